package cri

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"
)

// Runtimes of several nodes of one crivk process share one fake runtime:
// each sees, syncs and collects only its own objects (docs/scale.md).

func TestOwnedSelector(t *testing.T) {
	tests := map[string]struct {
		node string
		want map[string]string
	}{
		"single-node crivk: every crivk object": {node: "", want: map[string]string{LabelManagedBy: "crivk"}},
		"node of many: its own":                 {node: "n-1", want: map[string]string{LabelManagedBy: "crivk", LabelNode: "n-1"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := OwnedSelector(tc.node)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("OwnedSelector(%q) = %v, want %v", tc.node, got, tc.want)
			}
			got["x"] = "y" // a new map each call
			if _, ok := OwnedSelector(tc.node)["x"]; ok {
				t.Error("OwnedSelector returned a shared map")
			}
		})
	}
}

func TestSyncPodWritesNodeLabel(t *testing.T) {
	tests := map[string]struct {
		node      string
		podLabel  string // the pod's own io.crivk.node label, if any
		wantLabel string // LabelNode on the sandbox; "" absent
		// wantContainer is LabelNode on the container (which gets no pod
		// label).
		wantContainer string
	}{
		"single-node crivk writes none": {node: ""},
		// As before: the sandbox carries the pod's labels.
		"single-node crivk keeps a pod's label": {node: "", podLabel: "spoof", wantLabel: "spoof"},
		"node of many writes its name":          {node: "n-0", wantLabel: "n-0", wantContainer: "n-0"},
		"node of many overwrites a pod's label": {node: "n-0", podLabel: "n-1", wantLabel: "n-0", wantContainer: "n-0"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newSyncFixture(t)
			rt, err := New(Config{PodLogDir: f.dir, Node: tc.node}, f.rs, f.is)
			if err != nil {
				t.Fatal(err)
			}
			f.rt = rt
			f.is.SetFakeImages([]string{"busybox:1.36"})
			pod := syncPod(v1.RestartPolicyAlways, image("a", "busybox:1.36"))
			if tc.podLabel != "" {
				pod.Labels = map[string]string{LabelNode: tc.podLabel}
			}
			if res, _ := f.sync(t, pod); res.Error() != nil {
				t.Fatalf("SyncPod: %v", res.Error())
			}
			check := func(kind, id string, labels map[string]string, want string) {
				got, ok := labels[LabelNode]
				if ok != (want != "") || got != want {
					t.Errorf("%s %s: %s=%q (present %v), want %q", kind, id, LabelNode, got, ok, want)
				}
			}
			if len(f.rs.sandboxes) != 1 || len(f.rs.containers) != 1 {
				t.Fatalf("%d sandboxes, %d containers, want 1 and 1", len(f.rs.sandboxes), len(f.rs.containers))
			}
			for id, s := range f.rs.sandboxes {
				check("sandbox", id, s.Labels, tc.wantLabel)
			}
			for id, c := range f.rs.containers {
				check("container", id, c.Labels, tc.wantContainer)
			}
			// The node finds what it made.
			if st := f.status(t, pod); len(st.Sandboxes) != 1 || len(st.Containers) != 1 {
				t.Errorf("GetPodStatus: %d sandboxes, %d containers, want 1 and 1", len(st.Sandboxes), len(st.Containers))
			}
		})
	}
}

// sharedRuntime is one fake runtime holding, for pods "old" (a crivk of
// an earlier version or a single-node crivk: no node label), "a" (node
// n-a), "b" (node n-b) and "foreign" (not crivk's), an exited sandbox
// sandbox<uid> with one exited container container<uid> each.
func sharedRuntime(t *testing.T) (*fakeRuntimeService, string, *testingclock.FakeClock) {
	t.Helper()
	clk := testingclock.NewFakeClock(gcNow)
	rs := newFakeRuntimeService(clk)
	logDir := t.TempDir()
	for _, p := range []struct {
		uid    types.UID
		labels map[string]string
	}{
		{"old", map[string]string{LabelManagedBy: managedByValue}},
		{"a", map[string]string{LabelManagedBy: managedByValue, LabelNode: "n-a"}},
		{"b", map[string]string{LabelManagedBy: managedByValue, LabelNode: "n-b"}},
		{"foreign", map[string]string{LabelNode: "n-a"}},
	} {
		labels := func(extra ...string) map[string]string {
			l := map[string]string{LabelPodUID: string(p.uid), LabelPodName: "p-" + string(p.uid), LabelPodNamespace: "ns"}
			for k, v := range p.labels {
				l[k] = v
			}
			for i := 0; i+1 < len(extra); i += 2 {
				l[extra[i]] = extra[i+1]
			}
			return l
		}
		sb, c := "sandbox"+string(p.uid), "container"+string(p.uid)
		rs.sandboxes[sb] = &runtimeapi.PodSandboxStatus{Id: sb, State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY,
			CreatedAt: gcNow.Add(-time.Hour).UnixNano(), Labels: labels(),
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "p-" + string(p.uid), Namespace: "ns", Uid: string(p.uid)}}
		rs.containers[c] = &fakeContainer{SandboxID: sb, ContainerStatus: runtimeapi.ContainerStatus{
			Id: c, Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, State: runtimeapi.ContainerState_CONTAINER_EXITED,
			CreatedAt: gcNow.Add(-time.Hour).UnixNano(), Labels: labels(LabelContainerName, "c")}}
	}
	return rs, logDir, clk
}

func TestNodeScopedListings(t *testing.T) {
	tests := map[string]struct {
		node string
		// mine are the pods the node's listings see; the others it never
		// reads, syncs or removes.
		mine []types.UID
	}{
		"single-node crivk adopts unlabelled and labelled objects": {node: "", mine: []types.UID{"a", "b", "old"}},
		"node n-a sees only its own":                               {node: "n-a", mine: []types.UID{"a"}},
		"node n-b sees only its own":                               {node: "n-b", mine: []types.UID{"b"}},
		"a node this runtime does not hold sees nothing":           {node: "n-c"},
	}
	all := []types.UID{"a", "b", "foreign", "old"}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			rs, logDir, clk := sharedRuntime(t)
			rt, err := New(Config{PodLogDir: logDir, Clock: clk, Node: tc.node}, rs, newFakeImageService())
			if err != nil {
				t.Fatal(err)
			}
			mine := map[types.UID]bool{}
			for _, uid := range tc.mine {
				mine[uid] = true
			}

			// The PLEG's relist and housekeeping's orphan list.
			refs, err := rt.ListPods(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var got []types.UID
			for _, r := range refs {
				got = append(got, r.UID)
			}
			if !reflect.DeepEqual(got, tc.mine) {
				t.Errorf("ListPods: %v, want %v", got, tc.mine)
			}

			// GetPodStatus of a pod of this node reads its objects; of a
			// pod of another node nothing (a single-node crivk reads by
			// UID alone, as before, foreign objects included).
			for _, uid := range all {
				st, err := rt.GetPodStatus(ctx, PodRef{UID: uid, Name: "p-" + string(uid), Namespace: "ns"})
				if err != nil {
					t.Fatal(err)
				}
				want := mine[uid] || tc.node == "" && uid == "foreign"
				if (len(st.Sandboxes) == 1 && len(st.Containers) == 1) != want || !want && (len(st.Sandboxes) != 0 || len(st.Containers) != 0) {
					t.Errorf("GetPodStatus(%s): %d sandboxes, %d containers, want its own: %v", uid, len(st.Sandboxes), len(st.Containers), want)
				}
			}

			// The collector, with every pod gone, removes all of this
			// node's dead objects and nothing of any other node's.
			gc, err := NewContainerGC(rt, ContainerGCConfig{Policy: DefaultGCPolicy,
				Pods: podState{ready: true, gone: map[types.UID]bool{"old": true, "a": true, "b": true, "foreign": true}}})
			if err != nil {
				t.Fatal(err)
			}
			if err := gc.GarbageCollect(ctx); err != nil {
				t.Fatal(err)
			}
			var wantLeft []string
			for _, uid := range all {
				if !mine[uid] {
					wantLeft = append(wantLeft, "container"+string(uid), "sandbox"+string(uid))
				}
			}
			var left []string
			for id := range rs.sandboxes {
				left = append(left, id)
			}
			for id := range rs.containers {
				left = append(left, id)
			}
			sort.Strings(left)
			sort.Strings(wantLeft)
			if !reflect.DeepEqual(left, wantLeft) {
				t.Errorf("after GC %v left, want %v", left, wantLeft)
			}
		})
	}
}

func TestDeadLogSymlinkOfAnotherNode(t *testing.T) {
	rs, logDir, clk := sharedRuntime(t)
	links := t.TempDir()
	// Dangling links of exited containers of nodes n-a and n-b and of an
	// unlabelled crivk container.
	for _, id := range []string{"containera", "containerb", "containerold"} {
		if err := os.Symlink("/nonexistent/0.log", filepath.Join(links, "p_ns_c-"+id+".log")); err != nil {
			t.Fatal(err)
		}
	}
	rt, err := New(Config{PodLogDir: logDir, ContainerLogsDir: links, Clock: clk, Node: "n-a"}, rs, newFakeImageService())
	if err != nil {
		t.Fatal(err)
	}
	if n := rt.removeDeadLogSymlinks(context.Background()); n != 1 {
		t.Errorf("node n-a removed %d links, want 1 (its own)", n)
	}
	for id, kept := range map[string]bool{"containera": false, "containerb": true, "containerold": true} {
		_, err := os.Lstat(filepath.Join(links, "p_ns_c-"+id+".log"))
		if (err == nil) != kept {
			t.Errorf("link of %s present %v, want %v", id, err == nil, kept)
		}
	}
}

func TestUnlabelledSandboxes(t *testing.T) {
	rs, logDir, clk := sharedRuntime(t)
	rt, err := New(Config{PodLogDir: logDir, Clock: clk}, rs, newFakeImageService())
	if err != nil {
		t.Fatal(err)
	}
	got, err := rt.UnlabelledSandboxes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Not a, b (labelled) nor foreign (not crivk's).
	if want := []string{"sandboxold"}; !reflect.DeepEqual(got, want) {
		t.Errorf("UnlabelledSandboxes = %v, want %v", got, want)
	}
}
