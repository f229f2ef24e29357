package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPodMaxPidsFlag: --pod-max-pids defaults to the kubelet's -1, the
// file's podPidsLimit sets it, and the command line wins over the file.
func TestPodMaxPidsFlag(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kubelet.yaml")
	cfg := "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\npodPidsLimit: 1024\n"
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		args []string
		want int64
	}{
		"the kubelet's default":          {want: -1},
		"the flag":                       {args: []string{"--pod-max-pids=64"}, want: 64},
		"the file":                       {args: []string{"--config", file}, want: 1024},
		"the command line over the file": {args: []string{"--config", file, "--pod-max-pids", "64"}, want: 64},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			o, err := parseFlags(append([]string{"--kubeconfig=/k"}, tt.args...))
			if err != nil {
				t.Fatal(err)
			}
			if o.PodMaxPids != tt.want {
				t.Errorf("--pod-max-pids = %d, want %d", o.PodMaxPids, tt.want)
			}
		})
	}
}
