package hostruntime

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParseHostRuntimeFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		err  string
	}{
		{nil, ""},
		{[]string{"--cri-endpoint=/run/x.sock"}, "want unix:///absolute/path"},
		{[]string{"--cri-endpoint=tcp://1.2.3.4:5"}, "want unix:///absolute/path"},
		{[]string{"--root=var/lib/x"}, "--root \"var/lib/x\" is not an absolute path"},
		{[]string{"--pod-cidr=10.89.0.0"}, "--pod-cidr"},
		{[]string{"--cni-bridge=a-very-long-bridge-name"}, "not a network interface name"},
		{[]string{"--containerd=containerd"}, "not an absolute path"},
		{[]string{"--check-interval=0s"}, "not positive"},
		{[]string{"--host-pid=-1"}, "negative"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		_, err := parseHostRuntimeFlags(c.args)
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.err)
		}
	}
}

// TestHostRuntimeFiles writes the config and the conflist under a fake host
// root and checks they hold crivk's own paths and network.
func TestHostRuntimeFiles(t *testing.T) {
	host := t.TempDir()
	o, err := parseHostRuntimeFlags([]string{"--cri-endpoint=unix:///run/crivk-b/containerd.sock",
		"--state=/run/crivk-b/state", "--runc-root=/run/crivk-b/runc", "--cni-bridge=crivk1", "--pod-cidr=10.89.0.0/16",
		"--restrict-oom-score-adj", "--cni-bin-dir=/usr/lib/cni"})
	if err != nil {
		t.Fatal(err)
	}
	o.hostRoot = host
	if err := o.writeRuntimeFiles(ContainerdVersion{1, 6, 20}); err != nil {
		t.Fatal(err)
	}
	config, err := os.ReadFile(filepath.Join(host, "/etc/crivk-containerd/config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`address = "/run/crivk-b/containerd.sock"`, `root = "/var/lib/crivk-containerd"`, `state = "/run/crivk-b/state"`,
		`Root = "/run/crivk-b/runc"`, `restrict_oom_score_adj = true`, `bin_dir = "/usr/lib/cni"`, `conf_dir = "/etc/crivk-containerd/net.d"`,
		`sandbox_image = "registry.k8s.io/pause:3.10.2"`} {
		if !strings.Contains(string(config), want) {
			t.Errorf("config.toml lacks %s:\n%s", want, config)
		}
	}
	conflist, err := os.ReadFile(filepath.Join(host, "/etc/crivk-containerd/net.d/10-crivk.conflist"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"bridge": "crivk1"`, `"subnet": "10.89.0.0/16"`, `"dataDir": "/run/crivk-b/cni"`} {
		if !strings.Contains(string(conflist), want) {
			t.Errorf("conflist lacks %s:\n%s", want, conflist)
		}
	}
	// The host's containerd 2.4: a version 4 config, registry hosts in the
	// config dir; a containerd 2.1 is refused.
	if err := o.writeRuntimeFiles(ContainerdVersion{2, 4, 2}); err != nil {
		t.Fatal(err)
	}
	config, err = os.ReadFile(filepath.Join(host, "/etc/crivk-containerd/config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nversion = 4\n", `address = "/run/crivk-b/containerd.sock"`, `Root = "/run/crivk-b/runc"`,
		`bin_dirs = ["/usr/lib/cni"]`, `conf_dir = "/etc/crivk-containerd/net.d"`, `sandbox = "registry.k8s.io/pause:3.10.2"`,
		`config_path = "/etc/crivk-containerd/certs.d"`} {
		if !strings.Contains(string(config), want) {
			t.Errorf("config.toml for containerd 2.4 lacks %s:\n%s", want, config)
		}
	}
	if err := o.writeRuntimeFiles(ContainerdVersion{2, 1, 0}); err == nil || !strings.Contains(err.Error(), "containerd 2.1.0 reads config versions up to 3") {
		t.Errorf("writeRuntimeFiles for containerd 2.1: %v", err)
	}
	for _, d := range []string{"/var/lib/crivk-containerd", "/run/crivk-b/state", "/run/crivk-b"} {
		if st, err := os.Stat(filepath.Join(host, d)); err != nil || !st.IsDir() {
			t.Errorf("%s not made: %v", d, err)
		}
	}
	if _, err := o.containerdBinary(); err == nil || !strings.Contains(err.Error(), "no containerd on the host") {
		t.Errorf("containerdBinary on an empty host: %v", err)
	}
	bin := filepath.Join(host, "usr/bin/containerd")
	_ = os.MkdirAll(filepath.Dir(bin), 0o755)
	_ = os.WriteFile(bin, []byte("#!"), 0o755)
	if got, err := o.containerdBinary(); err != nil || got != "/usr/bin/containerd" {
		t.Errorf("containerdBinary: %q, %v", got, err)
	}
}

// TestResolveHost finds a readable process: this test's own, given.
func TestResolveHost(t *testing.T) {
	o, err := parseHostRuntimeFlags([]string{"--host-pid=" + strconv.Itoa(os.Getpid())})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.resolveHost(); err != nil || o.hostRoot != "/proc/"+strconv.Itoa(os.Getpid())+"/root" {
		t.Errorf("resolveHost: %v, root %q", err, o.hostRoot)
	}
	o.hostPID = 1 << 30 // no such process
	if err := o.resolveHost(); err == nil || !strings.Contains(err.Error(), "hostPID and privileged") {
		t.Errorf("resolveHost of no process: %v", err)
	}
}

// TestContainerdEnv: the host's containerd runs with the directory of its
// own binary first in PATH (its shim and runc), then the host's usual
// directories, whatever this image's PATH; the rest of the environment
// is kept.
func TestContainerdEnv(t *testing.T) {
	env := containerdEnv([]string{"HOME=/root", "PATH=/crivk/bin", "LANG=C"}, "/opt/runtime/containerd")
	want := []string{"HOME=/root", "LANG=C", "PATH=/opt/runtime:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if !slices.Equal(env, want) {
		t.Errorf("containerdEnv = %q, want %q", env, want)
	}
}
