//go:build tools

package tools

// The kubelet's hollow node (kubemark --morph=kubelet: the real kubelet over
// the kubelet's own fake CRI runtime), the kubelet side of make bench-fleet
// (hack/bench-fleet.sh, docs/benchmarks-fleet.md).
import (
	_ "k8s.io/kubernetes/cmd/kubemark"
)
