package cri

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"
)

func TestSnapshot(t *testing.T) {
	managed := func(uid, name, ns string) map[string]string {
		l := map[string]string{LabelManagedBy: managedByValue, LabelPodUID: uid}
		if name != "" {
			l[LabelPodName], l[LabelPodNamespace] = name, ns
		}
		return l
	}
	sandbox := func(id, uid string, labels map[string]string, state runtimeapi.PodSandboxState) *runtimeapi.PodSandboxStatus {
		return &runtimeapi.PodSandboxStatus{
			Id: id, State: state, Labels: labels,
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "meta-" + uid, Namespace: "meta-ns", Uid: uid},
		}
	}
	container := func(id, sandboxID string, labels map[string]string, state runtimeapi.ContainerState) *fakeContainer {
		return &fakeContainer{SandboxID: sandboxID, ContainerStatus: runtimeapi.ContainerStatus{
			Id: id, State: state, Labels: labels, Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
		}}
	}
	rs := newFakeRuntimeService(testingclock.NewFakeClock(time.Unix(0, 0)))
	for _, s := range []*runtimeapi.PodSandboxStatus{
		sandbox("sa", "a", managed("a", "web", "prod"), runtimeapi.PodSandboxState_SANDBOX_READY),
		sandbox("sb", "b", managed("b", "", ""), runtimeapi.PodSandboxState_SANDBOX_NOTREADY),             // names only in metadata
		sandbox("sx", "x", map[string]string{LabelPodUID: "x"}, runtimeapi.PodSandboxState_SANDBOX_READY), // not crivk's
		sandbox("snouid", "", managed("", "", ""), runtimeapi.PodSandboxState_SANDBOX_READY),              // no pod UID
	} {
		rs.addSandbox(s)
	}
	for _, c := range []*fakeContainer{
		container("a1", "sa", managed("a", "web", "prod"), runtimeapi.ContainerState_CONTAINER_RUNNING),
		container("a0", "sa", managed("a", "web", "prod"), runtimeapi.ContainerState_CONTAINER_EXITED),
		container("c1", "gone", managed("c", "job", "batch"), runtimeapi.ContainerState_CONTAINER_CREATED), // sandbox removed
		container("d1", "gone", managed("d", "", ""), runtimeapi.ContainerState_CONTAINER_UNKNOWN),         // no names anywhere
	} {
		rs.addContainer(c)
	}
	rt, err := New(Config{PodLogDir: t.TempDir()}, rs, newFakeImageService())
	if err != nil {
		t.Fatalf("New: %v", err)
	}

	got, err := rt.Snapshot(context.Background())
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	wantPods := map[types.UID]map[string]State{
		"a": {"sa": SandboxReady, "a1": StateRunning, "a0": StateExited},
		"b": {"sb": SandboxNotReady},
		"c": {"c1": StateCreated},
		"d": {"d1": StateUnknown},
	}
	wantRefs := map[types.UID]PodRef{
		"a": {UID: "a", Name: "web", Namespace: "prod"},
		"b": {UID: "b", Name: "meta-b", Namespace: "meta-ns"},
		"c": {UID: "c", Name: "job", Namespace: "batch"},
		"d": {UID: "d"},
	}
	if !reflect.DeepEqual(got.Pods, wantPods) {
		t.Errorf("Pods\n got %v\nwant %v", got.Pods, wantPods)
	}
	if !reflect.DeepEqual(got.Refs, wantRefs) {
		t.Errorf("Refs\n got %v\nwant %v", got.Refs, wantRefs)
	}
	// ListPods finds the same pods, those with only a container (c, d:
	// their sandbox is gone) included, so that housekeeping removes them.
	pods, err := rt.ListPods(context.Background())
	if err != nil {
		t.Fatalf("ListPods: %v", err)
	}
	if want := []PodRef{wantRefs["a"], wantRefs["b"], wantRefs["c"], wantRefs["d"]}; !reflect.DeepEqual(pods, want) {
		t.Errorf("ListPods\n got %v\nwant %v", pods, want)
	}

	for _, call := range []string{"ListPodSandbox", "ListContainers"} {
		t.Run(call+" fails", func(t *testing.T) {
			rs.InjectError(call, errors.New("boom"))
			if s, err := rt.Snapshot(context.Background()); err == nil {
				t.Errorf("Snapshot = %v, want an error", s)
			}
		})
	}
}
