package main

import (
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"minimal", []string{"--kubeconfig=/k"}, ""},
		{"unknown flag", []string{"--kubeconfig=/k", "--bogus"}, "flag provided but not defined: -bogus"},
		{"no kubeconfig", []string{"--kubeconfig="}, "--kubeconfig (or $KUBECONFIG) is required"},
		{"bad port", []string{"--kubeconfig=/k", "--port=70000"}, "--port 70000 is not a port number"},
		{"bad node ip", []string{"--kubeconfig=/k", "--node-ip=10.0.0"}, `--node-ip "10.0.0" is not an IP address`},
		{"bad log level", []string{"--kubeconfig=/k", "--log-level=loud"}, "--log-level"},
		{"bad max pods", []string{"--kubeconfig=/k", "--max-pods=0"}, "--max-pods must be positive"},
		{"stray argument", []string{"--kubeconfig=/k", "extra"}, `unexpected argument "extra"`},
		{"empty node name", []string{"--kubeconfig=/k", "--node-name="}, "--node-name is empty"},
		{"reserved", []string{"--kubeconfig=/k", "--system-reserved=cpu=100m,memory=1Gi", "--kube-reserved=memory=256Mi", "--eviction-hard=memory.available<200Mi", "--cgroup-root=/crivk"}, ""},
		{"bad system reserved", []string{"--kubeconfig=/k", "--system-reserved=memory:1Gi"}, "--system-reserved: "},
		{"bad kube reserved", []string{"--kubeconfig=/k", "--kube-reserved=gpu=1"}, `--kube-reserved: cannot reserve "gpu"`},
		{"bad eviction", []string{"--kubeconfig=/k", "--eviction-hard=memory.available<-1"}, "--eviction-hard: "},
		{"soft eviction", []string{"--kubeconfig=/k", "--eviction-soft=memory.available<1Gi", "--eviction-soft-grace-period=memory.available=1m", "--eviction-minimum-reclaim=memory.available=100Mi"}, ""},
		{"soft eviction without grace", []string{"--kubeconfig=/k", "--eviction-soft=memory.available<1Gi"}, "grace period must be specified for the soft eviction threshold memory.available"},
		{"bad oom score adj", []string{"--kubeconfig=/k", "--oom-score-adj=-1001"}, "--oom-score-adj -1001 is not in [-1000, 1000]"},
		{"relative cgroup root", []string{"--kubeconfig=/k", "--cgroup-root=crivk"}, `--cgroup-root "crivk" is not an absolute cgroup path`},
		{"no wake spacing", []string{"--kubeconfig=/k", "--pleg-wake-spacing=0"}, ""},
		{"wake spacing above the period", []string{"--kubeconfig=/k", "--pleg-wake-spacing=2s"}, "--pleg-wake-spacing 2s must be at least 0 and below --pleg-relist-period 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags(tc.args)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if o.port != 10250 || o.maxPods != 110 || o.podLogDir != "/var/log/pods" {
					t.Errorf("defaults not applied: %+v", o)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}
