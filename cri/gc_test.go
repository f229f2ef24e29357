package cri

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"
)

var gcNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// dc is a dead container of pod uid, named name, created ago before gcNow.
func dc(id string, uid types.UID, name string, ago time.Duration) deadContainer {
	return deadContainer{id: id, uid: uid, name: name, created: gcNow.Add(-ago)}
}

func ids(cs []deadContainer) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.id)
	}
	sort.Strings(out)
	return out
}

func TestPlanContainerGC(t *testing.T) {
	none := func(types.UID) bool { return false }
	// Pod p1: container a with 4 dead instances (a1 newest), b with 2;
	// pod p2: container a with 3.
	node := []deadContainer{
		dc("p1-a1", "p1", "a", 1*time.Minute), dc("p1-a2", "p1", "a", 2*time.Minute),
		dc("p1-a3", "p1", "a", 3*time.Minute), dc("p1-a4", "p1", "a", 4*time.Minute),
		dc("p1-b1", "p1", "b", 90*time.Second), dc("p1-b2", "p1", "b", 5*time.Minute),
		dc("p2-a1", "p2", "a", 30*time.Second), dc("p2-a2", "p2", "a", 6*time.Minute),
		dc("p2-a3", "p2", "a", 7*time.Minute),
	}
	for name, tc := range map[string]struct {
		policy GCPolicy
		gone   func(types.UID) bool
		want   []string
	}{
		"default: the newest dead instance of each container stays": {
			policy: DefaultGCPolicy, gone: none,
			want: []string{"p1-a2", "p1-a3", "p1-a4", "p1-b2", "p2-a2", "p2-a3"},
		},
		"two per container": {
			policy: GCPolicy{MaxPerPodContainer: 2, MaxContainers: -1}, gone: none,
			want: []string{"p1-a3", "p1-a4", "p2-a3"},
		},
		"no per-container limit, no total limit: nothing goes": {
			policy: GCPolicy{MaxPerPodContainer: -1, MaxContainers: -1}, gone: none,
		},
		"zero per container: every dead instance goes": {
			policy: GCPolicy{MaxPerPodContainer: 0, MaxContainers: -1}, gone: none,
			want: ids(node),
		},
		"min age: younger instances are not candidates (nor counted)": {
			policy: GCPolicy{MinAge: 150 * time.Second, MaxPerPodContainer: 1, MaxContainers: -1}, gone: none,
			// Candidates: p1-a3, p1-a4 (a3 stays), p1-b2, p2-a2, p2-a3 (a2 stays).
			want: []string{"p1-a4", "p2-a3"},
		},
		"total limit: an equal share per container, at least one, then the oldest": {
			// 3 units, 4 in all: a share of 1 each leaves 3 (p1-a1,
			// p1-b1, p2-a1), under the limit.
			policy: GCPolicy{MaxPerPodContainer: -1, MaxContainers: 4}, gone: none,
			want: []string{"p1-a2", "p1-a3", "p1-a4", "p1-b2", "p2-a2", "p2-a3"},
		},
		"total limit below the number of containers: the oldest of the newest go": {
			// A share of max(2/3, 1) = 1 each leaves p1-a1 (1m),
			// p1-b1 (90s) and p2-a1 (30s); the oldest of them goes.
			policy: GCPolicy{MaxPerPodContainer: -1, MaxContainers: 2}, gone: none,
			want: []string{"p1-a2", "p1-a3", "p1-a4", "p1-b1", "p1-b2", "p2-a2", "p2-a3"},
		},
		"a pod gone: all its dead containers go, whatever the limits": {
			policy: GCPolicy{MaxPerPodContainer: -1, MaxContainers: -1},
			gone:   func(uid types.UID) bool { return uid == "p2" },
			want:   []string{"p2-a1", "p2-a2", "p2-a3"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			in := append([]deadContainer(nil), node...)
			got := ids(planContainerGC(in, tc.policy, gcNow, tc.gone))
			want := append([]string{}, tc.want...)
			sort.Strings(want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("removed %v, want %v", got, want)
			}
		})
	}
}

func TestPlanSandboxGC(t *testing.T) {
	sb := func(id string, uid types.UID, ago time.Duration, active bool) gcSandbox {
		return gcSandbox{id: id, uid: uid, created: gcNow.Add(-ago), active: active}
	}
	sbs := []gcSandbox{
		// Living pod p1: a ready sandbox and two old exited ones, one
		// still holding a dead container.
		sb("p1-new", "p1", time.Minute, true), sb("p1-old", "p1", 2*time.Minute, false), sb("p1-held", "p1", 3*time.Minute, true),
		// Living pod p2: only exited sandboxes: the newest stays.
		sb("p2-new", "p2", time.Minute, false), sb("p2-old", "p2", 2*time.Minute, false),
		// Gone pod p3: every inactive sandbox goes, the newest too.
		sb("p3-new", "p3", time.Minute, false), sb("p3-old", "p3", 2*time.Minute, false), sb("p3-held", "p3", 3*time.Minute, true),
	}
	got := planSandboxGC(sbs, func(uid types.UID) bool { return uid == "p3" })
	want := []string{"p1-old", "p2-old", "p3-new", "p3-old"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("removed %v, want %v", got, want)
	}
}

func TestExcessDead(t *testing.T) {
	at := func(c ContainerStatus, ago time.Duration) ContainerStatus {
		c.CreatedAt = gcNow.Add(-ago)
		return c
	}
	st := readyStatus( // newest first, as GetPodStatus sorts them
		at(running("a"), 0),
		at(ctr("a", ContainerTypeRegular, 3, StateExited, 1), time.Minute),
		at(ctr("a", ContainerTypeRegular, 2, StateExited, 1), 2*time.Minute),
		at(ctr("a", ContainerTypeRegular, 1, StateCreated, 0), 3*time.Minute),
		at(ctr("a", ContainerTypeRegular, 0, StateExited, 1), 4*time.Minute),
		at(ctr("i", ContainerTypeInit, 1, StateExited, 0), 5*time.Minute),
		at(ctr("i", ContainerTypeInit, 0, StateExited, 1), 6*time.Minute),
	)
	for name, tc := range map[string]struct {
		max  int
		want []string
	}{
		"zero value keeps one (the newest)": {0, []string{"a-2", "a-0", "i-0"}},
		"one":                               {1, []string{"a-2", "a-0", "i-0"}},
		"no limit still keeps one only, as the kubelet's deletor": {-1, []string{"a-2", "a-0", "i-0"}},
		"two, per container; a created instance is not counted":   {2, []string{"a-0"}},
		"more than there are": {5, nil},
	} {
		t.Run(name, func(t *testing.T) {
			if got := excessDead(st, tc.max); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("excessDead(%d) = %v, want %v", tc.max, got, tc.want)
			}
			plan := ComputePodActions(testutil.Pod(v1.RestartPolicyAlways, nil, "a"), st, PlanInputs{MaxDeadPerContainer: tc.max})
			if !reflect.DeepEqual(plan.ContainersToRemove, tc.want) {
				t.Errorf("plan removes %v, want %v", plan.ContainersToRemove, tc.want)
			}
		})
	}
}

// podState is a fake PodState.
type podState struct {
	ready      bool
	gone       map[types.UID]bool // content may be removed
	terminated map[types.UID]bool // runtime may be removed
}

func (p podState) SourcesReady() bool                           { return p.ready }
func (p podState) ShouldPodContentBeRemoved(uid types.UID) bool { return p.gone[uid] }
func (p podState) ShouldPodRuntimeBeRemoved(uid types.UID) bool {
	return p.gone[uid] || p.terminated[uid]
}

// gcFixture is a fake runtime holding crivk's sandboxes and containers
// and a pod log directory.
type gcFixture struct {
	rt     *Runtime
	rs     *fakeRuntimeService
	logDir string
}

func newGCFixture(t *testing.T) *gcFixture {
	t.Helper()
	clk := testingclock.NewFakeClock(gcNow)
	rs := newFakeRuntimeService(clk)
	dir := t.TempDir()
	rt, err := New(Config{PodLogDir: dir, Clock: clk}, rs, newFakeImageService())
	if err != nil {
		t.Fatal(err)
	}
	return &gcFixture{rt: rt, rs: rs, logDir: dir}
}

func (f *gcFixture) sandbox(t *testing.T, id string, uid types.UID, ago time.Duration, ready bool) {
	t.Helper()
	st := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	if ready {
		st = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	f.rs.sandboxes[id] = &runtimeapi.PodSandboxStatus{Id: id, State: st, CreatedAt: gcNow.Add(-ago).UnixNano(),
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: string(uid)},
		Labels:   map[string]string{LabelManagedBy: managedByValue, LabelPodUID: string(uid)}}
}

// container adds a container of sandbox sb with a log file under the pod's
// log directory (and a rotated one).
func (f *gcFixture) container(t *testing.T, id, sb string, uid types.UID, name string, ago time.Duration, state runtimeapi.ContainerState) string {
	t.Helper()
	logPath := filepath.Join(f.logDir, "ns_p_"+string(uid), name, id+".log")
	for _, p := range []string{logPath, logPath + ".20250601-110000"} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("log\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.rs.containers[id] = &fakeContainer{SandboxID: sb, ContainerStatus: runtimeapi.ContainerStatus{
		Id: id, Metadata: &runtimeapi.ContainerMetadata{Name: name}, State: state, CreatedAt: gcNow.Add(-ago).UnixNano(),
		Image: &runtimeapi.ImageSpec{Image: "busybox"}, ImageRef: "sha256:busybox", LogPath: logPath,
		Labels: map[string]string{LabelManagedBy: managedByValue, LabelPodUID: string(uid), LabelContainerName: name}}}
	return logPath
}

func (f *gcFixture) left() (sandboxes, containers []string) {
	for id := range f.rs.sandboxes {
		sandboxes = append(sandboxes, id)
	}
	for id := range f.rs.containers {
		containers = append(containers, id)
	}
	sort.Strings(sandboxes)
	sort.Strings(containers)
	return sandboxes, containers
}

func TestContainerGCCollect(t *testing.T) {
	running, exited := runtimeapi.ContainerState_CONTAINER_RUNNING, runtimeapi.ContainerState_CONTAINER_EXITED
	setup := func(t *testing.T) (*gcFixture, map[string]string) {
		f := newGCFixture(t)
		logs := map[string]string{}
		// Living pod "live": its ready sandbox with a running container
		// and two dead instances; an older exited sandbox, empty.
		f.sandbox(t, "live-sb1", "live", time.Minute, true)
		f.sandbox(t, "live-sb0", "live", time.Hour, false)
		f.container(t, "live-a2", "live-sb1", "live", "a", 10*time.Second, running)
		logs["live-a1"] = f.container(t, "live-a1", "live-sb1", "live", "a", 20*time.Second, exited)
		logs["live-a0"] = f.container(t, "live-a0", "live-sb1", "live", "a", 30*time.Second, exited)
		// Gone pod "gone": an exited sandbox and a dead container.
		f.sandbox(t, "gone-sb0", "gone", time.Hour, false)
		logs["gone-a0"] = f.container(t, "gone-a0", "gone-sb0", "gone", "a", time.Hour, exited)
		// Something in the log directory that is not a pod's.
		if err := os.MkdirAll(filepath.Join(f.logDir, "not-a-pod"), 0o755); err != nil {
			t.Fatal(err)
		}
		return f, logs
	}
	gone := podState{ready: true, gone: map[types.UID]bool{"gone": true}}

	t.Run("sources ready", func(t *testing.T) {
		f, logs := setup(t)
		var res GCResult
		gc, err := NewContainerGC(f.rt, ContainerGCConfig{Policy: DefaultGCPolicy, Pods: gone,
			Observe: func(r GCResult, _ time.Duration) { res = r }})
		if err != nil {
			t.Fatal(err)
		}
		if err := gc.GarbageCollect(context.Background()); err != nil {
			t.Fatal(err)
		}
		sbs, cs := f.left()
		if want := []string{"live-sb1"}; !reflect.DeepEqual(sbs, want) {
			t.Errorf("sandboxes left %v, want %v", sbs, want)
		}
		if want := []string{"live-a1", "live-a2"}; !reflect.DeepEqual(cs, want) {
			t.Errorf("containers left %v, want %v (the running one and the newest dead)", cs, want)
		}
		for id, p := range logs {
			_, err := os.Stat(p)
			_, rerr := os.Stat(p + ".20250601-110000")
			if kept := id == "live-a1"; kept != (err == nil) || kept != (rerr == nil) {
				t.Errorf("log of %s (and its rotated file): present %v/%v, want %v", id, err == nil, rerr == nil, kept)
			}
		}
		if _, err := os.Stat(filepath.Join(f.logDir, "ns_p_gone")); !os.IsNotExist(err) {
			t.Errorf("the gone pod's log directory is still there (%v)", err)
		}
		for _, d := range []string{"ns_p_live", "not-a-pod"} {
			if _, err := os.Stat(filepath.Join(f.logDir, d)); err != nil {
				t.Errorf("%s removed: %v", d, err)
			}
		}
		if want := (GCResult{Containers: 2, Sandboxes: 2, LogDirs: 1}); res != want {
			t.Errorf("observed %+v, want %+v", res, want)
		}
	})

	t.Run("sources not ready: no pod counts as gone", func(t *testing.T) {
		f, _ := setup(t)
		gc, err := NewContainerGC(f.rt, ContainerGCConfig{Policy: DefaultGCPolicy, Pods: podState{gone: gone.gone}})
		if err != nil {
			t.Fatal(err)
		}
		if err := gc.GarbageCollect(context.Background()); err != nil {
			t.Fatal(err)
		}
		sbs, cs := f.left()
		if want := []string{"gone-sb0", "live-sb1"}; !reflect.DeepEqual(sbs, want) {
			t.Errorf("sandboxes left %v, want %v", sbs, want)
		}
		if want := []string{"gone-a0", "live-a1", "live-a2"}; !reflect.DeepEqual(cs, want) {
			t.Errorf("containers left %v, want %v", cs, want)
		}
		if _, err := os.Stat(filepath.Join(f.logDir, "ns_p_gone")); err != nil {
			t.Errorf("the log directory went before the pods were listed: %v", err)
		}
	})

	t.Run("DeleteAllUnusedContainers: terminated pods count as gone", func(t *testing.T) {
		f, _ := setup(t)
		gc, err := NewContainerGC(f.rt, ContainerGCConfig{Policy: DefaultGCPolicy,
			Pods: podState{ready: true, terminated: map[types.UID]bool{"gone": true}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := gc.DeleteAllUnusedContainers(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, cs := f.left(); !reflect.DeepEqual(cs, []string{"live-a1", "live-a2"}) {
			t.Errorf("containers left %v", cs)
		}
		// Terminated but not deleted: the log directory stays.
		if _, err := os.Stat(filepath.Join(f.logDir, "ns_p_gone")); err != nil {
			t.Errorf("the log directory of a pod not deleted went: %v", err)
		}
	})
}

func TestNewContainerGCRefusesNegativeMinAge(t *testing.T) {
	f := newGCFixture(t)
	if _, err := NewContainerGC(f.rt, ContainerGCConfig{Policy: GCPolicy{MinAge: -time.Second}, Pods: podState{}}); err == nil {
		t.Error("a negative minimum age was accepted")
	}
}

func TestSandboxImageOf(t *testing.T) {
	for info, want := range map[string]string{
		`{"sandboxImage":"registry.k8s.io/pause:3.10.1","other":1}`: "registry.k8s.io/pause:3.10.1",
		`not json`: "",
		``:         "",
	} {
		m := map[string]string{}
		if info != "" {
			m["config"] = info
		}
		if got := sandboxImageOf(m); got != want {
			t.Errorf("sandboxImageOf(%q) = %q, want %q", info, got, want)
		}
	}
}

// TestPinnedSandboxImage: where the status config has no sandboxImage
// (containerd 2), the sandbox image is the pinned pause image, or the only
// pinned image; none when that does not say which.
func TestPinnedSandboxImage(t *testing.T) {
	img := func(pinned bool, tags ...string) *runtimeapi.Image {
		return &runtimeapi.Image{Id: "sha256:" + strings.Join(tags, ","), RepoTags: tags, Pinned: pinned}
	}
	for _, c := range []struct {
		name string
		imgs []*runtimeapi.Image
		want string
	}{
		{"containerd 2's pinned pause", []*runtimeapi.Image{img(false, "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"),
			img(true, "registry.k8s.io/pause:3.10.1")}, "registry.k8s.io/pause:3.10.1"},
		{"the pause among several pinned", []*runtimeapi.Image{img(true, "example.com/agent:1"), img(true, "example.com/x:1", "registry.k8s.io/pause:3.10.2")},
			"registry.k8s.io/pause:3.10.2"},
		{"the only pinned one", []*runtimeapi.Image{img(true, "example.com/sandbox:1"), img(false, "example.com/pause:2")}, "example.com/sandbox:1"},
		{"several pinned, no pause", []*runtimeapi.Image{img(true, "example.com/a:1"), img(true, "example.com/b:1")}, ""},
		{"none pinned (containerd 1.6)", []*runtimeapi.Image{img(false, "registry.k8s.io/pause:3.10.1")}, ""},
	} {
		if got := pinnedSandboxImage(c.imgs); got != c.want {
			t.Errorf("%s: pinnedSandboxImage = %q, want %q", c.name, got, c.want)
		}
	}
}
