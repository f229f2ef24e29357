package lifecycle

import (
	"context"
	"testing"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestEngineResize: a running pod's resize is decided at its next sync:
// more CPU than the node's allocatable stays pending (Deferred with
// admission's message, as the kubelet v1.37; the container keeps its
// allocation in the status); a resize that fits is allocated and the
// pending condition goes.
func TestEngineResize(t *testing.T) {
	node := resizeNode("2", "4Gi")
	f := newEngineFixture(t, func(c *Config) { c.Node = func() *v1.Node { return node } })
	pod := enginePod("uid-r", "web", v1.RestartPolicyAlways)
	pod.Generation = 1
	pod.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: testutil.Resources("500m", "64Mi"), Limits: testutil.Resources("500m", "64Mi")}
	f.startRunning(t, pod)
	if cs := f.lastPublished("uid-r").Status.ContainerStatuses[0]; cs.Resources == nil || cs.AllocatedResources.Cpu().MilliValue() != 500 {
		t.Fatalf("running: resources %v allocatedResources %v, want both", cs.Resources, cs.AllocatedResources)
	}
	resize := func(cpu string, gen int64) {
		p := pod.DeepCopy()
		p.Generation = gen
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: testutil.Resources(cpu, "64Mi"), Limits: testutil.Resources(cpu, "64Mi")}
		f.e.UpdatePod(context.Background(), p)
	}
	cond := func(typ v1.PodConditionType) *v1.PodCondition {
		p := f.lastPublished("uid-r")
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == typ {
				return &p.Status.Conditions[i]
			}
		}
		return nil
	}

	resize("3", 2)
	f.eventually(t, "PodResizePending Deferred", func() bool {
		c := cond(v1.PodResizePending)
		return c != nil && c.Reason == v1.PodReasonDeferred
	})
	if c := cond(v1.PodResizePending); c.Message != "Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000" || c.ObservedGeneration != 2 {
		t.Errorf("PodResizePending %q generation %d", c.Message, c.ObservedGeneration)
	}
	if cs := f.lastPublished("uid-r").Status.ContainerStatuses[0]; cs.AllocatedResources.Cpu().MilliValue() != 500 {
		t.Errorf("deferred: allocatedResources %v, want the allocation (500m)", cs.AllocatedResources)
	}

	resize("1", 3)
	f.eventually(t, "the resize allocated", func() bool {
		cs := f.lastPublished("uid-r").Status.ContainerStatuses[0]
		return cs.AllocatedResources.Cpu().MilliValue() == 1000 && cond(v1.PodResizePending) == nil
	})
	if c := cond(v1.PodResizeInProgress); c != nil {
		t.Errorf("PodResizeInProgress %+v; the runtime reports no values to wait for", c)
	}
}

// resizeNode is a node with that allocatable CPU and memory, room for 110
// pods.
func resizeNode(cpu, mem string) *v1.Node {
	allocatable := testutil.Resources(cpu, mem)
	allocatable[v1.ResourcePods] = resource.MustParse("110")
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Allocatable: allocatable, Capacity: allocatable}}
}
