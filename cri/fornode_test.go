package cri

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
)

// TestForNode: two nodes' runtimes over one connection share its gates and
// nothing a node changes: each creates, lists and reports only its own.
func TestForNode(t *testing.T) {
	ctx := context.Background()
	clk := testingclock.NewFakeClock(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))
	rs, is := newFakeRuntimeService(clk), newFakeImageService("busybox:1.36")
	base, err := New(Config{PodLogDir: t.TempDir(), MaxParallelSandboxes: 2, MaxParallelImagePulls: 1, Clock: clk}, rs, is)
	if err != nil {
		t.Fatal(err)
	}
	logs := t.TempDir()
	type node struct {
		rt       *Runtime
		recorder *fakeRecorder
		pod      *v1.Pod
	}
	nodes := map[string]*node{}
	for _, name := range []string{"n-a", "n-b"} {
		rec := &fakeRecorder{}
		rt, err := base.ForNode(NodeView{Node: name, PodLogDir: filepath.Join(logs, name), Recorder: rec,
			CgroupParent: func(*v1.Pod) string { return "/crivk/" + name + "/kubepods" }})
		if err != nil {
			t.Fatal(err)
		}
		pod := syncPod(v1.RestartPolicyAlways, image("c", "busybox:1.36"))
		pod.Name, pod.UID = "web-"+name, types.UID("uid-"+name)
		nodes[name] = &node{rt: rt, recorder: rec, pod: pod}
	}
	a, b := nodes["n-a"], nodes["n-b"]

	// Shared: the connection and the gates that protect the runtime.
	if a.rt.rs != b.rt.rs || a.rt.is != b.rt.is || a.rt.puller != base.puller || b.rt.puller != base.puller ||
		a.rt.sandboxes != base.sandboxes || b.rt.sandboxes != base.sandboxes {
		t.Error("the nodes do not share the base's connection, pull gate and sandbox gate")
	}
	// Not shared: a node's helper is its own engine's.
	a.rt.SetRuntimeHelper(nil)
	if b.rt.helper != nil || base.helper != nil {
		t.Error("SetRuntimeHelper of one node reached another runtime")
	}

	for name, n := range nodes {
		f := &syncFixture{rt: n.rt, rs: rs, is: is, clock: clk, b: newSyncFixture(t).b}
		if res, _ := f.sync(t, n.pod); res.Error() != nil {
			t.Fatalf("SyncPod on %s: %v", name, res.Error())
		}
	}
	for name, n := range nodes {
		refs, err := n.rt.ListPods(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := []PodRef{RefOf(n.pod)}; !reflect.DeepEqual(refs, want) {
			t.Errorf("%s lists %v, want only its own %v", name, refs, want)
		}
		other := a
		if n == a {
			other = b
		}
		st, err := n.rt.GetPodStatus(ctx, RefOf(other.pod))
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Sandboxes)+len(st.Containers) != 0 {
			t.Errorf("%s reads the other node's pod: %+v", name, st)
		}
		// Its events go to its own recorder.
		if !n.recorder.has("Normal Started") {
			t.Errorf("%s recorded no Started event: %v", name, n.recorder.events)
		}
		for _, e := range n.recorder.events {
			if strings.Contains(e, other.pod.Name) {
				t.Errorf("%s recorded an event of the other node's pod: %s", name, e)
			}
		}
	}
	// Every sandbox carries its node's name, the one of its pod's node.
	for _, sb := range rs.sandboxes {
		n := nodes[sb.Labels[LabelNode]]
		if n == nil || types.UID(sb.Labels[LabelPodUID]) != n.pod.UID {
			t.Errorf("sandbox %s labelled %v, not its node's", sb.Id, sb.Labels)
		}
	}
	all, err := base.ListPods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 {
		t.Errorf("the base (single-node view) lists %d pods, want both nodes' 2", len(all))
	}
}

func TestForNodeRefuses(t *testing.T) {
	base, err := New(Config{PodLogDir: t.TempDir()}, newFakeRuntimeService(nil), newFakeImageService())
	if err != nil {
		t.Fatal(err)
	}
	n, err := base.ForNode(NodeView{Node: "n-a", PodLogDir: "/var/log/crivk-pods/n-a"})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		from *Runtime
		v    NodeView
	}{
		"no node name":      {base, NodeView{PodLogDir: "/x"}},
		"relative log dir":  {base, NodeView{Node: "n-b", PodLogDir: "logs"}},
		"no log dir":        {base, NodeView{Node: "n-b"}},
		"from another node": {n, NodeView{Node: "n-b", PodLogDir: "/x"}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := tc.from.ForNode(tc.v); err == nil {
				t.Error("ForNode accepted it")
			}
		})
	}
}
