package cri

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"
)

// One walk split by node equals each node's own Snapshot, with two list
// calls in all.
func TestSnapshotNodes(t *testing.T) {
	labels := func(uid, node string) map[string]string {
		l := map[string]string{LabelManagedBy: managedByValue, LabelPodUID: uid, LabelPodName: "p-" + uid, LabelPodNamespace: "ns"}
		if node != "" {
			l[LabelNode] = node
		}
		return l
	}
	rs := newFakeRuntimeService(testingclock.NewFakeClock(time.Unix(0, 0)))
	for _, s := range []struct{ id, uid, node string }{
		{"sa", "a", "n-0"}, {"sb", "b", "n-1"}, {"sc", "c", "n-0"}, {"su", "u", ""}, {"sz", "z", "n-9"},
	} {
		rs.addSandbox(&runtimeapi.PodSandboxStatus{Id: s.id, State: runtimeapi.PodSandboxState_SANDBOX_READY, Labels: labels(s.uid, s.node),
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "p-" + s.uid, Namespace: "ns", Uid: s.uid}})
	}
	for _, c := range []struct{ id, sb, uid, node string }{
		{"a1", "sa", "a", "n-0"}, {"b1", "sb", "b", "n-1"}, {"d1", "gone", "d", "n-2"}, {"u1", "su", "u", ""},
	} {
		rs.addContainer(&fakeContainer{SandboxID: c.sb, ContainerStatus: runtimeapi.ContainerStatus{Id: c.id,
			State: runtimeapi.ContainerState_CONTAINER_RUNNING, Labels: labels(c.uid, c.node), Metadata: &runtimeapi.ContainerMetadata{Name: "c"}}})
	}
	base, err := New(Config{PodLogDir: t.TempDir()}, rs, newFakeImageService())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	before := len(rs.GetCalls())
	got, err := base.SnapshotNodes(context.Background())
	if err != nil {
		t.Fatalf("SnapshotNodes: %v", err)
	}
	if calls := rs.GetCalls()[before:]; !reflect.DeepEqual(calls, []string{"ListPodSandbox", "ListContainers"}) {
		t.Errorf("calls %v, want one ListPodSandbox and one ListContainers", calls)
	}
	if got.Unlabelled != 2 {
		t.Errorf("Unlabelled = %d, want 2 (su, u1)", got.Unlabelled)
	}
	if len(got.Nodes) != 4 {
		t.Errorf("nodes %v, want n-0, n-1, n-2 (a container only), n-9", got.Nodes)
	}
	for _, n := range []string{"n-0", "n-1", "n-2", "n-9", "n-5"} {
		rt, err := base.ForNode(NodeView{Node: n, PodLogDir: t.TempDir()})
		if err != nil {
			t.Fatalf("ForNode: %v", err)
		}
		own, err := rt.Snapshot(context.Background())
		if err != nil {
			t.Fatalf("Snapshot of %s: %v", n, err)
		}
		share := got.Nodes[n]
		if share == nil {
			share = &Snapshot{Pods: own.Pods, Refs: own.Refs}
			if len(own.Pods) != 0 {
				t.Errorf("node %s: no share, its own Snapshot has %v", n, own.Pods)
			}
		}
		if !reflect.DeepEqual(share, own) {
			t.Errorf("node %s: share %+v, own Snapshot %+v", n, share, own)
		}
		if _, err := rt.SnapshotNodes(context.Background()); err == nil {
			t.Errorf("node %s: SnapshotNodes of a node's runtime succeeded", n)
		}
	}
	for _, call := range []string{"ListPodSandbox", "ListContainers"} {
		rs.InjectError(call, errors.New("boom"))
		if s, err := base.SnapshotNodes(context.Background()); err == nil {
			t.Errorf("%s fails: SnapshotNodes = %v, want an error", call, s)
		}
	}
}
