package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crivk/crivk/cm"
)

// TestMain runs the package's tests, and the children TestMainExits
// starts, on a fixed cgroup v2 host: parsing the flags reads the host's
// cgroup version (the kubelet's refusal of cgroup v1), and the tests must
// not depend on the machine's. TestCgroupV1Refused sets a v1 host itself.
func TestMain(m *testing.M) {
	hostCgroups = cm.NewHost(cm.HostConfig{V2Mount: "/nonexistent/cgroup2"})
	os.Exit(m.Run())
}

// TestCgroupV1Refused: on a cgroup v1 host crivk refuses to start, with
// the kubelet v1.37's message, unless --fail-cgroupv1=false or the file's
// failCgroupV1: false; singleProcessOOMKill explicitly false is refused
// there too, in the kubelet's words; a cgroup v2 host starts with either.
// `crivk config check` says the same, and reports the effective value.
func TestCgroupV1Refused(t *testing.T) {
	const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const refused = "kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is unsupported and will be removed in a future release"
	const oomRefused = "invalid configuration: singleProcessOOMKill must not be explicitly set to false when using cgroup v1"
	v1, v2 := cm.NewHost(cm.HostConfig{V1Mounts: map[string]string{}}), hostCgroups
	defer func() { hostCgroups = v2 }()
	for name, tc := range map[string]struct {
		host    *cm.Host
		args    []string
		wantErr string
	}{
		"v1, the default":                     {host: v1, wantErr: refused},
		"v1, --fail-cgroupv1=false":           {host: v1, args: []string{"--fail-cgroupv1=false"}},
		"v1, failCgroupV1: false in the file": {host: v1, args: []string{"--config", write("v1.yaml", header+"failCgroupV1: false\n")}},
		"v1, the flag over the file": {host: v1, args: []string{"--config", write("v1.yaml", header+"failCgroupV1: false\n"), "--fail-cgroupv1=true"},
			wantErr: refused},
		"v1, singleProcessOOMKill false": {host: v1, args: []string{"--fail-cgroupv1=false", "--single-process-oom-kill=false"}, wantErr: oomRefused},
		"v1, singleProcessOOMKill true":  {host: v1, args: []string{"--fail-cgroupv1=false", "--single-process-oom-kill"}},
		"v2, the default":                {host: v2},
		"v2, singleProcessOOMKill false": {host: v2, args: []string{"--single-process-oom-kill=false"}},
		"v1, a bad value first":          {host: v1, args: []string{"--max-pods=0"}, wantErr: "--max-pods must be positive, got 0"},
	} {
		t.Run(name, func(t *testing.T) {
			hostCgroups = tc.host
			o, err := parseFlags(append([]string{"--kubeconfig=/k"}, tc.args...))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("parseFlags: %v", err)
				}
				if o.Cgroups != tc.host {
					t.Errorf("the settings run on another host's cgroups")
				}
				return
			}
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("parseFlags: %v, want exactly %q", err, tc.wantErr)
			}
		})
	}
	t.Run("config check", func(t *testing.T) {
		hostCgroups = v1
		var stdout, stderr bytes.Buffer
		if code := configCommand([]string{"check"}, &stdout, &stderr); code != 2 || stderr.String() != "crivk config check: "+refused+"\n" {
			t.Errorf("crivk config check on v1: exit %d, stderr %q", code, stderr.String())
		}
		stdout.Reset()
		if code := configCommand([]string{"check", "--fail-cgroupv1=false"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "\nfailCgroupV1: false\n") {
			t.Errorf("crivk config check --fail-cgroupv1=false on v1: exit %d, stdout %q", code, stdout.String())
		}
	})
}
