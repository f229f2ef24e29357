package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigCommand: `crivk config check` accepts what crivk accepts at
// start, prints the effective configuration with the file's and the
// command line's values, and refuses with crivk's own messages (an
// unsupported field by name, a bad value as its flag's) and exit code 2.
func TestConfigCommand(t *testing.T) {
	const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", header+"maxPods: 57\ncgroupRoot: /crivk\nport: 10260\nregisterWithTaints: [{key: a, value: b, effect: NoSchedule}]\n")
	for name, tc := range map[string]struct {
		args       []string
		wantCode   int
		wantStdout []string
		wantStderr string
	}{
		"a good file, no kubeconfig needed": {
			args: []string{"check", "--config", good}, wantCode: 0,
			wantStdout: []string{"apiVersion: kubelet.config.k8s.io/v1beta1\n", "\nkind: KubeletConfiguration\n", "\nmaxPods: 57\n", "\ncgroupRoot: /crivk\n", "\nport: 10260\n", "  value: b\n"},
		},
		"flags override the file": {
			args: []string{"check", "--config", good, "--max-pods=9"}, wantCode: 0, wantStdout: []string{"\nmaxPods: 9\n"},
		},
		"an unsupported field, by name": {
			args: []string{"check", "--config", write("cpu.yaml", header+"cpuManagerPolicy: static\n")}, wantCode: 2,
			wantStderr: "crivk config check: KubeletConfiguration field cpuManagerPolicy is not supported by crivk\n",
		},
		"a misspelt field": {
			args: []string{"check", "--config", write("typo.yaml", header+"maxpods: 5\n")}, wantCode: 2, wantStderr: `unknown field "maxpods"`,
		},
		"another kind": {
			args: []string{"check", "--config", write("kind.yaml", "apiVersion: v1\nkind: ConfigMap\n")}, wantCode: 2, wantStderr: "crivk config check: ",
		},
		"a bad value, as its flag's": {
			args: []string{"check", "--config", write("qps.yaml", header+"eventRecordQPS: -1\n")}, wantCode: 2, wantStderr: "--event-qps -1 must not be negative",
		},
		"no subcommand": {args: nil, wantCode: 2, wantStderr: "usage: crivk config check"},
		"help":          {args: []string{"check", "--help"}, wantCode: 0, wantStdout: []string{"--config string"}},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := configCommand(tc.args, &stdout, &stderr)
			if code != tc.wantCode || !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("exit %d, stderr %q; want exit %d, stderr with %q", code, stderr.String(), tc.wantCode, tc.wantStderr)
			}
			for _, w := range tc.wantStdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout.String())
				}
			}
		})
	}
}
