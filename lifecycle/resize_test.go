package lifecycle

import (
	"context"
	"testing"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
)

// TestEngineResize: a running pod's resize is decided at its next sync:
// more CPU than the node's allocatable stays pending (Infeasible, the
// container keeps its allocation in the status); a resize that fits is
// allocated and the pending condition goes.
func TestEngineResize(t *testing.T) {
	f := newEngineFixture(t, func(c *Config) { c.NodeAllocatable = testutil.Resources("2", "4Gi") })
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
	f.eventually(t, "PodResizePending Infeasible", func() bool {
		c := cond(v1.PodResizePending)
		return c != nil && c.Reason == v1.PodReasonInfeasible
	})
	if c := cond(v1.PodResizePending); c.Message != "Node didn't have enough capacity: cpu, requested: 3000, capacity: 2000" || c.ObservedGeneration != 2 {
		t.Errorf("PodResizePending %q generation %d", c.Message, c.ObservedGeneration)
	}
	if cs := f.lastPublished("uid-r").Status.ContainerStatuses[0]; cs.AllocatedResources.Cpu().MilliValue() != 500 {
		t.Errorf("infeasible: allocatedResources %v, want the allocation (500m)", cs.AllocatedResources)
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
