package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// syncCall is one call the workers made to the fake syncer.
type syncCall struct {
	method string // sync, terminating, runtime, terminated
	uid    types.UID
	grace  int64
	update UpdateType
}

// fakeSyncer records calls; each method's behaviour can be replaced.
type fakeSyncer struct {
	mu    sync.Mutex
	calls []syncCall

	syncPod        func(ctx context.Context, pod *v1.Pod) (bool, error)
	terminating    func(ctx context.Context, pod *v1.Pod, grace int64, fn PodStatusFunc) error
	runtimePod     func(ctx context.Context, rp *cri.PodStatus) error
	terminatedFunc func(ctx context.Context, pod *v1.Pod) error
}

func (f *fakeSyncer) record(c syncCall) {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
}

func (f *fakeSyncer) get() []syncCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]syncCall(nil), f.calls...)
}

func (f *fakeSyncer) methods(uid types.UID) []string {
	var out []string
	for _, c := range f.get() {
		if c.uid == uid {
			out = append(out, c.method)
		}
	}
	return out
}

func (f *fakeSyncer) SyncPod(ctx context.Context, t UpdateType, pod *v1.Pod, _ *cri.PodStatus) (bool, error) {
	f.record(syncCall{method: "sync", uid: pod.UID, update: t})
	if f.syncPod != nil {
		return f.syncPod(ctx, pod)
	}
	return false, nil
}

func (f *fakeSyncer) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, _ *cri.PodStatus, grace int64, fn PodStatusFunc) error {
	f.record(syncCall{method: "terminating", uid: pod.UID, grace: grace})
	if f.terminating != nil {
		return f.terminating(ctx, pod, grace, fn)
	}
	return nil
}

func (f *fakeSyncer) SyncTerminatingRuntimePod(ctx context.Context, rp *cri.PodStatus) error {
	f.record(syncCall{method: "runtime", uid: rp.Ref.UID})
	if f.runtimePod != nil {
		return f.runtimePod(ctx, rp)
	}
	return nil
}

func (f *fakeSyncer) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, _ *cri.PodStatus) error {
	f.record(syncCall{method: "terminated", uid: pod.UID})
	if f.terminatedFunc != nil {
		return f.terminatedFunc(ctx, pod)
	}
	return nil
}

// readyCache answers at once: every pod is empty in the runtime unless
// running says otherwise.
type readyCache struct {
	mu      sync.Mutex
	running map[types.UID]bool
}

func (c *readyCache) Get(uid types.UID) (*cri.PodStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := &cri.PodStatus{Ref: cri.PodRef{UID: uid}}
	if c.running[uid] {
		st.Containers = []cri.ContainerStatus{{Name: "c", State: cri.StateRunning}}
	}
	return st, nil
}

func (c *readyCache) Modified(types.UID) (time.Time, bool) { return time.Time{}, false }

func (c *readyCache) GetNewerThan(_ context.Context, uid types.UID, _ time.Time) (*cri.PodStatus, error) {
	return c.Get(uid)
}

type workersFixture struct {
	w      *PodWorkers
	syncer *fakeSyncer
	cache  *readyCache
	queue  *WorkQueue
	clock  *testingclock.FakeClock
}

func newWorkersFixture(t *testing.T) *workersFixture {
	t.Helper()
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	f := &workersFixture{syncer: &fakeSyncer{}, cache: &readyCache{running: map[types.UID]bool{}}, queue: NewWorkQueue(clk), clock: clk}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := NewPodWorkers(ctx, PodWorkersConfig{Syncer: f.syncer, Cache: f.cache, Queue: f.queue, Clock: clk,
		ResyncInterval: time.Minute, BackOffPeriod: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f.w = w
	return f
}

func (f *workersFixture) idle(t *testing.T, uid types.UID) {
	t.Helper()
	waitFor(t, fmt.Sprintf("worker of %s idle", uid), func() bool { return !f.w.isWorking(uid) })
}

// waitFor is testutil.WaitFor.
var waitFor = testutil.WaitFor

func wpod(uid, name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: name, Namespace: "ns"},
		Spec: v1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			Containers:                    []v1.Container{{Name: "c", Image: "busybox"}},
		},
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCanTransition(t *testing.T) {
	all := []PodWorkerState{SyncPodWork, TerminatingPodWork, TerminatedPodWork}
	allowed := map[[2]PodWorkerState]bool{
		{SyncPodWork, SyncPodWork}: true, {SyncPodWork, TerminatingPodWork}: true,
		{TerminatingPodWork, TerminatingPodWork}: true, {TerminatingPodWork, TerminatedPodWork}: true,
		{TerminatedPodWork, TerminatedPodWork}: true,
	}
	for _, from := range all {
		for _, to := range all {
			t.Run(from.String()+"->"+to.String(), func(t *testing.T) {
				if got := canTransition(from, to); got != allowed[[2]PodWorkerState{from, to}] {
					t.Fatalf("canTransition = %v", got)
				}
			})
		}
	}
}

func TestNewPodWorkersValidates(t *testing.T) {
	if _, err := NewPodWorkers(context.Background(), PodWorkersConfig{}); err == nil {
		t.Fatal("no error for an empty config")
	}
}

// TestPodWorkerTimeline walks one pod through the seed's timeline and checks
// every predicate at each stop.
func TestPodWorkerTimeline(t *testing.T) {
	f := newWorkersFixture(t)
	pod := wpod("u1", "p")
	terminal := make(chan struct{})
	f.syncer.syncPod = func(context.Context, *v1.Pod) (bool, error) {
		select {
		case <-terminal:
			return true, nil
		default:
			return false, nil
		}
	}
	type preds struct{ known, couldRun, termRequested, containersTerminating, runtimeRemovable, contentRemovable, finished bool }
	check := func(stage string, want preds) {
		t.Helper()
		got := preds{
			f.w.IsPodKnownTerminated(pod.UID), f.w.couldHaveRunningContainers(pod.UID), f.w.IsPodTerminationRequested(pod.UID),
			f.w.shouldPodContainersBeTerminating(pod.UID), f.w.shouldPodRuntimeBeRemoved(pod.UID), f.w.shouldPodContentBeRemoved(pod.UID),
			f.w.IsPodFinished(pod.UID),
		}
		if got != want {
			t.Fatalf("%s: predicates %+v, want %+v", stage, got, want)
		}
	}
	check("unknown", preds{containersTerminating: true, runtimeRemovable: true, contentRemovable: true})

	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: pod})
	f.idle(t, pod.UID)
	check("syncing", preds{couldRun: true})
	if m := f.syncer.methods(pod.UID); !equalStrings(m, []string{"sync"}) {
		t.Fatalf("calls %v", m)
	}

	// A resync while running calls SyncPod again.
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodSync, Pod: pod})
	f.idle(t, pod.UID)

	// The pod reaches a terminal phase: terminating, then terminated, then
	// finished, without any further update.
	close(terminal)
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodSync, Pod: pod})
	waitFor(t, "finished", func() bool { return f.w.IsPodFinished(pod.UID) })
	if m := f.syncer.methods(pod.UID); !equalStrings(m, []string{"sync", "sync", "sync", "terminating", "terminated"}) {
		t.Fatalf("calls %v", m)
	}
	check("finished, not deleted", preds{known: true, termRequested: true, containersTerminating: true, runtimeRemovable: true, finished: true})

	// Updates to a finished pod are ignored.
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodSync, Pod: pod})
	if m := f.syncer.methods(pod.UID); len(m) != 5 {
		t.Fatalf("finished pod synced again: %v", m)
	}

	// Still desired: kept. Gone from the desired set: forgotten.
	if got := f.w.SyncKnownPods([]*v1.Pod{pod}); got[pod.UID].State != TerminatedPodWork || got[pod.UID].Orphan {
		t.Fatalf("SyncKnownPods = %+v", got)
	}
	if got := f.w.SyncKnownPods(nil); len(got) != 0 {
		t.Fatalf("finished orphan not forgotten: %+v", got)
	}
	check("forgotten", preds{containersTerminating: true, runtimeRemovable: true, contentRemovable: true})
}

func TestPodWorkerDeletionIsTerminationAndContentRemovable(t *testing.T) {
	f := newWorkersFixture(t)
	pod := wpod("u1", "p")
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: pod})
	f.idle(t, pod.UID)
	del := pod.DeepCopy()
	del.DeletionTimestamp = &metav1.Time{Time: f.clock.Now()}
	del.DeletionGracePeriodSeconds = ptr.To[int64](7)
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodUpdate, Pod: del})
	waitFor(t, "finished", func() bool { return f.w.IsPodFinished(pod.UID) })
	calls := f.syncer.get()
	if calls[1].method != "terminating" || calls[1].grace != 7 {
		t.Fatalf("terminating call %+v, want grace 7", calls[1])
	}
	if !f.w.shouldPodContentBeRemoved(pod.UID) {
		t.Fatal("deleted, terminated pod: content should be removable")
	}
}

func TestPodWorkerEffectiveGracePeriod(t *testing.T) {
	tests := map[string]struct {
		spec, deletion, override *int64
		inForce                  int64
		want                     int64
		shortened                bool
	}{
		"spec":                         {spec: ptr.To[int64](30), want: 30},
		"default when spec unset":      {want: 30},
		"deletion grace wins":          {spec: ptr.To[int64](30), deletion: ptr.To[int64](5), want: 5},
		"kill override wins":           {spec: ptr.To[int64](30), deletion: ptr.To[int64](5), override: ptr.To[int64](2), want: 2},
		"zero becomes one":             {spec: ptr.To[int64](0), want: 1},
		"never lengthened":             {deletion: ptr.To[int64](60), inForce: 10, want: 10},
		"shortened while terminating":  {override: ptr.To[int64](3), inForce: 10, want: 3, shortened: true},
		"same grace is not shortening": {deletion: ptr.To[int64](10), inForce: 10, want: 10},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := wpod("u", "p")
			pod.Spec.TerminationGracePeriodSeconds = tc.spec
			pod.DeletionGracePeriodSeconds = tc.deletion
			got, shortened := effectiveGracePeriod(&podSyncStatus{gracePeriod: tc.inForce}, pod,
				&KillPodOptions{PodTerminationGracePeriodSecondsOverride: tc.override})
			if got != tc.want || shortened != tc.shortened {
				t.Fatalf("got %d shortened=%v, want %d shortened=%v", got, shortened, tc.want, tc.shortened)
			}
		})
	}
}

// TestPodWorkerKillDuringSync: a kill cancels a SyncPod in flight and the
// pod goes straight to terminating with the kill's grace period.
func TestPodWorkerKillDuringSync(t *testing.T) {
	f := newWorkersFixture(t)
	pod := wpod("u1", "p")
	inSync := make(chan struct{})
	f.syncer.syncPod = func(ctx context.Context, _ *v1.Pod) (bool, error) {
		close(inSync)
		<-ctx.Done()
		return false, ctx.Err()
	}
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: pod})
	<-inSync
	done := make(chan struct{})
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: pod, KillPodOptions: &KillPodOptions{
		CompletedCh: done, PodTerminationGracePeriodSecondsOverride: ptr.To[int64](4)}})
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("kill's completion channel not closed")
	}
	calls := f.syncer.get()
	if len(calls) < 2 || calls[1].method != "terminating" || calls[1].grace != 4 {
		t.Fatalf("calls %+v, want terminating with grace 4 after the cancelled sync", calls)
	}
}

// TestPodWorkerGraceShortening: a shorter grace period cancels the
// termination in flight and restarts it; a longer one changes nothing.
func TestPodWorkerGraceShortening(t *testing.T) {
	f := newWorkersFixture(t)
	pod := wpod("u1", "p")
	started := make(chan int64, 4)
	f.syncer.terminating = func(ctx context.Context, _ *v1.Pod, grace int64, _ PodStatusFunc) error {
		started <- grace
		if grace > 5 {
			<-ctx.Done() // a container ignoring SIGTERM
			return ctx.Err()
		}
		return nil
	}
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: pod})
	f.idle(t, pod.UID)
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: pod})
	if g := <-started; g != 30 {
		t.Fatalf("first attempt grace %d, want the spec's 30", g)
	}
	// Longer: no effect (the attempt stays in flight).
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: pod, KillPodOptions: &KillPodOptions{PodTerminationGracePeriodSecondsOverride: ptr.To[int64](60)}})
	select {
	case g := <-started:
		if g != 30 {
			t.Fatalf("a longer grace period restarted termination with %d", g)
		}
	default:
	}
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: pod, KillPodOptions: &KillPodOptions{PodTerminationGracePeriodSecondsOverride: ptr.To[int64](2)}})
	var last int64
	waitFor(t, "termination restarted with grace 2", func() bool {
		select {
		case last = <-started:
		default:
		}
		return last == 2
	})
	waitFor(t, "finished", func() bool { return f.w.IsPodFinished(pod.UID) })
}

func TestPodWorkerKillOptions(t *testing.T) {
	f := newWorkersFixture(t)
	pod := wpod("u1", "p")
	var applied v1.PodStatus
	f.syncer.terminating = func(_ context.Context, _ *v1.Pod, _ int64, fn PodStatusFunc) error {
		if fn != nil {
			fn(&applied)
		}
		return nil
	}
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: pod})
	f.idle(t, pod.UID)
	done := make(chan struct{})
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: pod, KillPodOptions: &KillPodOptions{
		CompletedCh: done, Evict: true,
		PodStatusFunc: func(s *v1.PodStatus) { s.Reason, s.Message = "Evicted", "The node was low on resource: memory." },
	}})
	<-done
	waitFor(t, "finished", func() bool { return f.w.IsPodFinished(pod.UID) })
	if applied.Reason != "Evicted" {
		t.Fatalf("status override not applied: %+v", applied)
	}
	// A kill after the containers stopped completes at once.
	late := make(chan struct{})
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: pod, KillPodOptions: &KillPodOptions{CompletedCh: late}})
	select {
	case <-late:
	case <-time.After(5 * time.Second):
		t.Fatal("kill of a terminated pod did not complete at once")
	}
	// A kill option on a non-kill update completes at once too.
	other := wpod("u2", "q")
	ch := make(chan struct{})
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: other, KillPodOptions: &KillPodOptions{CompletedCh: ch}})
	<-ch
}

// TestPodWorkerUIDReuse: a create for a UID whose termination started is
// held back until SyncKnownPods drops the old record, then starts afresh.
func TestPodWorkerUIDReuse(t *testing.T) {
	f := newWorkersFixture(t)
	pod := wpod("u1", "p")
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: pod})
	f.idle(t, pod.UID)
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: pod})
	waitFor(t, "finished", func() bool { return f.w.IsPodFinished(pod.UID) })
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: pod})
	if m := f.syncer.methods(pod.UID); !equalStrings(m, []string{"sync", "terminating", "terminated"}) {
		t.Fatalf("re-create started before SyncKnownPods: %v", m)
	}
	// Desired again, but restart requested: the old record goes.
	f.w.SyncKnownPods([]*v1.Pod{pod})
	if f.w.IsKnown(pod.UID) {
		t.Fatal("record of the terminated UID kept")
	}
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: pod})
	f.idle(t, pod.UID)
	if m := f.syncer.methods(pod.UID); !equalStrings(m, []string{"sync", "terminating", "terminated", "sync"}) {
		t.Fatalf("calls %v", m)
	}
	if !f.w.couldHaveRunningContainers(pod.UID) {
		t.Fatal("restarted pod not running")
	}
}

// TestPodWorkerOrphanTermination: a started pod missing from the desired set
// is terminated with its spec's grace period, then forgotten.
func TestPodWorkerOrphanTermination(t *testing.T) {
	f := newWorkersFixture(t)
	pod := wpod("u1", "p")
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](12)
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: pod})
	f.idle(t, pod.UID)
	if got := f.w.SyncKnownPods(nil); !got[pod.UID].Orphan {
		t.Fatalf("orphan not reported: %+v", got)
	}
	waitFor(t, "finished", func() bool { return f.w.IsPodFinished(pod.UID) })
	calls := f.syncer.get()
	if calls[1].method != "terminating" || calls[1].grace != 12 {
		t.Fatalf("calls %+v", calls)
	}
	if got := f.w.SyncKnownPods(nil); len(got) != 0 {
		t.Fatalf("finished orphan kept: %+v", got)
	}
}

// TestPodWorkerRuntimePod: a pod only the runtime knows is terminated
// through the runtime-pod path and its record dropped at once.
func TestPodWorkerRuntimePod(t *testing.T) {
	f := newWorkersFixture(t)
	rp := &cri.PodStatus{Ref: cri.PodRef{UID: "r1", Name: "gone", Namespace: "ns"}}
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodSync, RunningPod: rp})
	if f.w.IsKnown("r1") {
		t.Fatal("a runtime pod was accepted without a kill")
	}
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, RunningPod: rp})
	waitFor(t, "runtime pod forgotten", func() bool { return !f.w.IsKnown("r1") })
	if m := f.syncer.methods("r1"); !equalStrings(m, []string{"runtime"}) {
		t.Fatalf("calls %v", m)
	}
}

// TestPodWorkerSameFullName: a second UID with the same namespace/name
// waits until the first is finished.
func TestPodWorkerSameFullName(t *testing.T) {
	f := newWorkersFixture(t)
	a, b := wpod("a", "same"), wpod("b", "same")
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: a})
	f.idle(t, a.UID)
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: b})
	f.idle(t, b.UID)
	if m := f.syncer.methods(b.UID); len(m) != 0 {
		t.Fatalf("second pod of the same name started: %v", m)
	}
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: a})
	waitFor(t, "a finished", func() bool { return f.w.IsPodFinished(a.UID) })
	// b was requeued; the sync loop hands it back.
	f.clock.Step(time.Minute)
	for _, uid := range f.queue.GetWork() {
		if uid == b.UID {
			f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodSync, Pod: b})
		}
	}
	waitFor(t, "b synced", func() bool { return len(f.syncer.methods(b.UID)) > 0 })
}

// TestPodWorkerTerminalOnFirstSight: a pod already terminal in the API with
// nothing running (crivk restarted) goes straight to the terminated work.
func TestPodWorkerTerminalOnFirstSight(t *testing.T) {
	f := newWorkersFixture(t)
	pod := wpod("u1", "p")
	pod.Status.Phase = v1.PodSucceeded
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: pod})
	waitFor(t, "finished", func() bool { return f.w.IsPodFinished(pod.UID) })
	if m := f.syncer.methods(pod.UID); !equalStrings(m, []string{"terminated"}) {
		t.Fatalf("calls %v", m)
	}
	// With something running, it is terminated first.
	run := wpod("u2", "q")
	run.Status.Phase = v1.PodFailed
	f.cache.mu.Lock()
	f.cache.running[run.UID] = true
	f.cache.mu.Unlock()
	f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: run})
	waitFor(t, "finished", func() bool { return f.w.IsPodFinished(run.UID) })
	if m := f.syncer.methods(run.UID); !equalStrings(m, []string{"terminating", "terminated"}) {
		t.Fatalf("calls %v", m)
	}
}

// TestPodWorkerRequeue checks when a pod is due again after each outcome.
func TestPodWorkerRequeue(t *testing.T) {
	tests := map[string]struct {
		err      error
		terminal bool
		min, max time.Duration
	}{
		"success: resync with jitter":   {min: time.Minute, max: 90 * time.Second},
		"error: back-off period":        {err: errors.New("boom"), min: 10 * time.Second, max: 15 * time.Second},
		"network not ready: one second": {err: fmt.Errorf("create sandbox: %w", ErrNetworkNotReady), min: time.Second, max: 1500 * time.Millisecond},
		"back-off error: its own time":  {err: &BackOffError{Err: errors.New("crash"), Until: time.Unix(1003, 0)}, min: 3 * time.Second, max: 3 * time.Second},
		"terminal: at once":             {terminal: true, min: 0, max: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newWorkersFixture(t)
			pod := wpod("u1", "p")
			block := make(chan struct{})
			f.syncer.syncPod = func(context.Context, *v1.Pod) (bool, error) { return tc.terminal, tc.err }
			if tc.terminal {
				// Hold the terminating work so the queue entry of the
				// transition is observable.
				f.syncer.terminating = func(context.Context, *v1.Pod, int64, PodStatusFunc) error { <-block; return nil }
				defer close(block)
			}
			f.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: pod})
			waitFor(t, "queued", func() bool { return f.queue.Len() == 1 })
			if tc.min > 0 {
				f.clock.Step(tc.min - time.Millisecond)
				if got := f.queue.GetWork(); len(got) != 0 {
					t.Fatalf("due before %v", tc.min)
				}
			}
			f.clock.Step(tc.max - tc.min + time.Millisecond)
			if got := f.queue.GetWork(); len(got) != 1 {
				t.Fatalf("not due after %v", tc.max)
			}
		})
	}
}
