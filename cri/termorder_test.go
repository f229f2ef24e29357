package cri

import (
	"context"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestSyncPodStopsFinishedPodsSidecarsInReverseOrder: once a Never pod's
// regular container exited, the plan's sidecar kills (PodEnds) stop the
// sidecars in the kubelet's termination order, the last in the spec
// first (node e2e "should terminate sidecars in reverse order after all
// main containers have exited").
func TestSyncPodStopsFinishedPodsSidecarsInReverseOrder(t *testing.T) {
	f := newSyncFixture(t)
	pod := sidecarPod(v1.RestartPolicyNever)
	f.rs.addSandbox(&runtimeapi.PodSandboxStatus{Id: "sb", State: runtimeapi.PodSandboxState_SANDBOX_READY})
	for _, id := range []string{"s1", "s2"} {
		f.rs.addContainer(&fakeContainer{ContainerStatus: runtimeapi.ContainerStatus{Id: id, State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	}
	st := &PodStatus{
		Ref:       RefOf(pod),
		Sandboxes: []SandboxStatus{{ID: "sb", Ready: true}},
		Containers: []ContainerStatus{
			{ID: "i1", Name: "i1", Type: ContainerTypeInit, State: StateExited},
			{ID: "s1", Name: "s1", Type: ContainerTypeInit, State: StateRunning},
			{ID: "s2", Name: "s2", Type: ContainerTypeInit, State: StateRunning},
			{ID: "a", Name: "a", Type: ContainerTypeRegular, State: StateExited},
		},
	}
	plan := ComputePodActions(pod, st, PlanInputs{})
	if err := f.rt.SyncPod(context.Background(), pod, st, plan, f.b, f.clock.Now()).Error(); err != nil {
		t.Fatal(err)
	}
	if got := f.rs.stopOrder(); !reflect.DeepEqual(got, []string{"s2", "s1"}) {
		t.Errorf("stop order %v, want [s2 s1] (plan %s)", got, plan)
	}
}
