package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestFleetNodeShares runs two nodes from one process with
// --node-shares=3,1 (docs/scale.md, "Allocatable"): node 0's allocatable
// CPU is three quarters of the single node's, node 1's a quarter, rounded
// down (millicores); memory the same part of the pods' bound less the
// whole memory.available threshold, which each node measures on its own
// share (shareMemoryAllocatable); each node's kubepods
// cgroup is bounded between its allocatable and its capacity. A pod whose
// memory request fits node 0's share and not node 1's runs on node 0 and
// is refused by node 1 with the kubelet's OutOfmemory against node 1's
// share. (The per-node memory.available of the same change, a node's pods
// filling its share, is TestFleetMemoryEvictionPerNode's, with a small
// share for node 0 rather than a quarter of this machine.)
func TestFleetNodeShares(t *testing.T) {
	weights := []int64{3, 1}
	const total = 4
	names := []string{nodeName + "-0", nodeName + "-1"}
	ctx := testContext(t, 8*time.Minute)

	single, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cleanupFleetNodes(t, names)
	waitSingleNodeEmpty(t, 2*time.Minute)
	args := []string{"--node-count=2", "--node-shares=3,1", "--pod-manifest-path=", "--node-labels=" + fleetLabel + "=true"}
	withCrivkFlags(t, func() { removeDeadUnlabelledSandboxes(t) }, nil, args...)
	waitFleetRenewed(t, names, time.Now().Add(-time.Second), 2*time.Minute)

	nodes := make([]*v1.Node, len(names))
	for i, n := range names {
		node, err := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = node
		cpu, mem := single.Status.Allocatable[v1.ResourceCPU], single.Status.Allocatable[v1.ResourceMemory]
		wantCPU := cpu.MilliValue() * weights[i] / total
		wantMem := shareMemoryAllocatable(mem.Value(), weights[i], total)
		gotCPU, gotMem := node.Status.Allocatable[v1.ResourceCPU], node.Status.Allocatable[v1.ResourceMemory]
		if gotCPU.MilliValue() != wantCPU || gotMem.Value() != wantMem {
			t.Errorf("node %s (weight %d of %d): allocatable cpu %dm memory %d, want %dm and %d (of the single node's %dm and %d)",
				n, weights[i], total, gotCPU.MilliValue(), gotMem.Value(), wantCPU, wantMem, cpu.MilliValue(), mem.Value())
		}
		limit := readInt(t, filepath.Join("/sys/fs/cgroup/memory", cgroupRoot(), n, "kubepods", "memory.limit_in_bytes"))
		capa := node.Status.Capacity[v1.ResourceMemory]
		if limit < gotMem.Value() || limit > capa.Value() {
			t.Errorf("node %s: kubepods memory.limit_in_bytes %d, want between its allocatable %d and its capacity %d", n, limit, gotMem.Value(), capa.Value())
		}
		t.Logf("node %s (weight %d of %d): allocatable cpu %s memory %s, kubepods limit %d", n, weights[i], total, gotCPU.String(), gotMem.String(), limit)
	}

	// A request that fits node 0's three quarters and not node 1's quarter.
	small := nodes[1].Status.Allocatable[v1.ResourceMemory]
	request := *resource.NewQuantity(small.Value()+64<<20, resource.BinarySI)
	ns := newNamespace(t)
	pod := func(name, node string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: fleetPodSpec(func(s *v1.PodSpec) {
			s.NodeName = node
			s.Containers[0].Resources.Requests[v1.ResourceMemory] = request
		})}
	}
	createPod(t, ns, pod("fits", names[0]))
	createPod(t, ns, pod("refused", names[1]))
	waitPod(t, ns, "fits", 2*time.Minute, "Running", isRunningReady)
	p := waitPod(t, ns, "refused", time.Minute, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	wantPrefix := fmt.Sprintf("Pod was rejected: Node didn't have enough resource: memory, requested: %d, used: ", request.Value())
	wantSuffix := fmt.Sprintf(", capacity: %d", small.Value())
	if p.Status.Reason != "OutOfmemory" || !strings.HasPrefix(p.Status.Message, wantPrefix) || !strings.HasSuffix(p.Status.Message, wantSuffix) {
		t.Errorf("refused on %s: reason %q message %q; want OutOfmemory, %q...%q (node 1's share)", names[1], p.Status.Reason, p.Status.Message, wantPrefix, wantSuffix)
	}
	for _, name := range []string{"fits", "refused"} {
		if err := client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"fits", "refused"} {
		waitGone(t, ns, name, time.Minute)
	}
}
