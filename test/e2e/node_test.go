package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

func TestNodeReadyAndLeaseRenews(t *testing.T) {
	ctx := testContext(t, 90*time.Second)
	var node *v1.Node
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		node = n
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.Status == v1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("node %s never became Ready: %v (last: %+v)", nodeName, err, node)
	}

	want := map[v1.NodeConditionType]string{
		v1.NodeReady:          "KubeletReady",
		v1.NodeMemoryPressure: "KubeletHasSufficientMemory",
		v1.NodeDiskPressure:   "KubeletHasNoDiskPressure",
		v1.NodePIDPressure:    "KubeletHasSufficientPID",
	}
	for _, c := range node.Status.Conditions {
		if r, ok := want[c.Type]; ok {
			if c.Reason != r {
				t.Errorf("condition %s: reason %q, want %q", c.Type, c.Reason, r)
			}
			delete(want, c.Type)
		}
	}
	if len(want) > 0 {
		t.Errorf("conditions missing: %v", want)
	}
	info := node.Status.NodeInfo
	if !strings.HasPrefix(info.KubeletVersion, "v1.37.2-crivk.") {
		t.Errorf("kubeletVersion %q, want v1.37.2-crivk.<n>", info.KubeletVersion)
	}
	if !strings.HasPrefix(info.ContainerRuntimeVersion, "containerd://") {
		t.Errorf("containerRuntimeVersion %q, want containerd://<version>", info.ContainerRuntimeVersion)
	}
	if info.KernelVersion == "" || info.OSImage == "" || info.Architecture == "" {
		t.Errorf("nodeInfo incomplete: %+v", info)
	}
	var internal, hostname string
	for _, a := range node.Status.Addresses {
		switch a.Type {
		case v1.NodeInternalIP:
			internal = a.Address
		case v1.NodeHostName:
			hostname = a.Address
		}
	}
	if internal != nodeIP || hostname == "" {
		t.Errorf("addresses %+v, want InternalIP %s and a Hostname", node.Status.Addresses, nodeIP)
	}
	if got := node.Status.Capacity.Pods().Value(); got != 110 {
		t.Errorf("pods capacity %d, want 110", got)
	}
	for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage} {
		q := node.Status.Capacity[r]
		if q.IsZero() {
			t.Errorf("capacity %s is zero", r)
		}
		if _, ok := node.Status.Allocatable[r]; !ok {
			t.Errorf("allocatable %s missing", r)
		}
	}
	if node.Status.DaemonEndpoints.KubeletEndpoint.Port != 10250 {
		t.Errorf("daemonEndpoints port %d, want 10250", node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	}

	// The Lease is renewed (virtual-kubelet renews every 10 s for a 40 s lease).
	lease, err := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("lease: %v", err)
	}
	first := lease.Spec.RenewTime.DeepCopy()
	err = wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		l, err := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, nodeName, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(first.Time), nil
	})
	if err != nil {
		t.Fatalf("lease not renewed after %v: %v", first, err)
	}
}

// TestNodeLabelsAndTaintsAtRegistration deletes the Node object while crivk
// is stopped and starts crivk with --node-labels and --register-with-taints:
// crivk registers the node again (with its own node credentials, through
// NodeRestriction) carrying the label and the taint, as the kubelet does
// at registration. The taint is PreferNoSchedule so the other tests are
// not affected; it is removed at the end and crivk restarted as before.
func TestNodeLabelsAndTaintsAtRegistration(t *testing.T) {
	// Back to the node the other tests expect at the end: crivk without
	// the flags, the taint and labels removed (the kubelet too sets them
	// only when it creates the Node).
	removeLabels := func() {
		patch := []byte(`{"metadata":{"labels":{"team":null,"node.kubernetes.io/e2e":null}},"spec":{"taints":null}}`)
		if _, err := client.CoreV1().Nodes().Patch(testContext(t, 10*time.Second), nodeName, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Errorf("removing the test's labels and taint: %v", err)
		}
	}
	deleteNode := func() {
		if err := client.CoreV1().Nodes().Delete(testContext(t, 10*time.Second), nodeName, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting node %s: %v", nodeName, err)
		}
	}
	withCrivkFlags(t, deleteNode, removeLabels, "--node-labels=node.kubernetes.io/e2e=crivk,team=e2e",
		"--register-with-taints=e2e.crivk.io/registered=yes:PreferNoSchedule")
	took, _ := waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	n, err := client.CoreV1().Nodes().Get(testContext(t, 10*time.Second), nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node registered again and Ready %s after crivk started; labels %v; taints %v", took.Round(time.Millisecond), n.Labels, n.Spec.Taints)
	if n.Labels["node.kubernetes.io/e2e"] != "crivk" || n.Labels["team"] != "e2e" {
		t.Errorf("labels %v lack node.kubernetes.io/e2e=crivk and team=e2e", n.Labels)
	}
	found := false
	for _, tn := range n.Spec.Taints {
		if tn.Key == "e2e.crivk.io/registered" && tn.Value == "yes" && tn.Effect == v1.TaintEffectPreferNoSchedule {
			found = true
		}
	}
	if !found {
		t.Errorf("taints %v lack e2e.crivk.io/registered=yes:PreferNoSchedule", n.Spec.Taints)
	}
}
