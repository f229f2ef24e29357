package main

import (
	"strings"
	"testing"
)

// TestParseFlagsNodeCount: --node-count and --node-shares are checked at
// start (the node names themselves: internal/fleet's TestSpecs).
func TestParseFlagsNodeCount(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		wantErr   string
		wantNodes []string
	}{
		{"default: one node, its name", []string{"--kubeconfig=/k", "--node-name=m"}, "", []string{"m"}},
		{"three nodes", []string{"--kubeconfig=/k", "--node-name=m", "--node-count=3"}, "", []string{"m-0", "m-1", "m-2"}},
		{"no node", []string{"--kubeconfig=/k", "--node-count=0"}, "--node-count must be at least 1, got 0", nil},
		{"static pods on every node", []string{"--kubeconfig=/k", "--node-count=2", "--pod-manifest-path=/etc/m"}, "--pod-manifest-path with --node-count above 1", nil},
		{"healthz among the ports", []string{"--kubeconfig=/k", "--node-count=3", "--port=10246"}, "--healthz-port 10248 is one of the nodes' API ports 10246-10248", nil},
		{"read-only ports overlap", []string{"--kubeconfig=/k", "--node-count=3", "--read-only-port=10251"}, "ranges of 3 ports overlap", nil},
		{"unequal shares", []string{"--kubeconfig=/k", "--node-name=m", "--node-count=3", "--node-shares=2,1,1"}, "", []string{"m-0", "m-1", "m-2"}},
		{"a weight per node", []string{"--kubeconfig=/k", "--node-count=3", "--node-shares=2,1"}, "--node-shares needs one weight per node, each an integer from 1 to 1000000: 2 weights for --node-count 3", nil},
		{"weights are integers", []string{"--kubeconfig=/k", "--node-count=2", "--node-shares=0.5,0.5"}, `--node-shares needs one weight per node, each an integer from 1 to 1000000: "0.5" in "0.5,0.5"`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notInPod(t)
			_, err := parseFlags(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseFlags: %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
