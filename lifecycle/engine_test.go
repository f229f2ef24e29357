package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/lifecycle/pleg"
	"github.com/crivk/crivk/lifecycle/status"
	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// event is one thing the engine did, in the order it happened.
type event struct {
	op    string // GetPodStatus, SyncPod, KillContainer (a plan's kill), KillPod, RemovePod, notify, OnTerminated
	uid   types.UID
	grace int64          // KillPod, KillContainer
	plan  cri.PodActions // SyncPod
	phase v1.PodPhase    // notify, OnTerminated
}

// fakeRuntime is an in-memory runtime: SyncPod starts what the plan asks,
// KillPod stops everything with exit code killExit, RemovePod forgets the
// pod. Every call is recorded with the notifications and OnTerminated calls
// of the engine, so tests can check their order.
type fakeRuntime struct {
	mu       sync.Mutex
	events   []event
	pods     map[types.UID]*cri.PodStatus
	killErrs int // KillPod fails this many more times
	// KillPod with a grace period above blockKillAbove (when > 0) blocks
	// until its context is cancelled, like a container ignoring SIGTERM.
	blockKillAbove int64
	killExit       int32 // exit code of containers stopped by KillPod
	now            func() time.Time
	// pulls are reported by every SyncPod that starts a container.
	pulls []cri.PullSpan
	// beforeKill (nil: none) runs at the start of every KillPod, without
	// the lock.
	beforeKill func()
	// statusErr fails GetPodStatus of these pods.
	statusErr map[types.UID]error
	// podLevel is, per pod, the pod-level resources its pod cgroup was
	// made or last resized with (the kubelet's actuated ones); resizeErr
	// fails the resize of a plan that has one.
	podLevel  map[types.UID]*v1.ResourceRequirements
	resizeErr error
}

var _ Runtime = (*fakeRuntime)(nil)

func newFakeRuntime(clk *testingclock.FakeClock) *fakeRuntime {
	return &fakeRuntime{pods: map[types.UID]*cri.PodStatus{}, now: clk.Now, podLevel: map[types.UID]*v1.ResourceRequirements{}}
}

func (f *fakeRuntime) record(e event) {
	f.mu.Lock()
	f.events = append(f.events, e)
	f.mu.Unlock()
}

func (f *fakeRuntime) podLocked(ref cri.PodRef) *cri.PodStatus {
	st, ok := f.pods[ref.UID]
	if !ok {
		st = &cri.PodStatus{Ref: ref}
		f.pods[ref.UID] = st
	}
	return st
}

func copyStatus(st *cri.PodStatus) *cri.PodStatus {
	out := &cri.PodStatus{Ref: st.Ref}
	out.Sandboxes = append(out.Sandboxes, st.Sandboxes...)
	out.Containers = append(out.Containers, st.Containers...)
	return out
}

func (f *fakeRuntime) GetPodStatus(_ context.Context, ref cri.PodRef) (*cri.PodStatus, error) {
	f.record(event{op: "GetPodStatus", uid: ref.UID})
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.statusErr[ref.UID]; err != nil {
		return nil, err
	}
	return copyStatus(f.podLocked(ref)), nil
}

func (f *fakeRuntime) SyncPod(_ context.Context, pod *v1.Pod, _ *cri.PodStatus, plan cri.PodActions, _ *cri.BackOffs, _ time.Time) *cri.SyncResult {
	f.record(event{op: "SyncPod", uid: pod.UID, plan: plan})
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.podLocked(cri.RefOf(pod))
	if plan.CreateSandbox {
		f.podLevel[pod.UID] = pod.Spec.Resources.DeepCopy()
		sb := cri.SandboxStatus{ID: fmt.Sprintf("%s-sb%d", pod.UID, plan.Attempt), Attempt: plan.Attempt, Ready: true, IPs: []string{"10.0.0.7"}}
		if pod.Spec.HostNetwork {
			sb.IPs = nil // the runtime reports no IP for a host-network sandbox
		}
		st.Sandboxes = append([]cri.SandboxStatus{sb}, st.Sandboxes...)
	}
	res := &cri.SyncResult{Waiting: map[string]cri.Waiting{}}
	for name, w := range plan.Waiting {
		res.Waiting[name] = w
	}
	// The plan's kills (a failed liveness or startup probe among them)
	// stop containers with exit code 137, each recorded with its grace.
	for id, k := range plan.ContainersToKill {
		for i := range st.Containers {
			if st.Containers[i].ID == id && st.Containers[i].State == cri.StateRunning {
				st.Containers[i].State = cri.StateExited
				st.Containers[i].ExitCode = 137
				st.Containers[i].FinishedAt = f.now()
			}
		}
		f.events = append(f.events, event{op: "KillContainer", uid: pod.UID, grace: k.Grace})
	}
	// An in-place restart's reset removes every instance it lists
	// (this fake keeps no logs: the next attempt starts at 0 again).
	for _, r := range plan.ContainersToReset {
		st.Containers = slices.DeleteFunc(st.Containers, func(c cri.ContainerStatus) bool { return c.ID == r.ID })
		res.Reset = append(res.Reset, r.ID)
	}
	start := func(name string, typ cri.ContainerType) {
		attempt := uint32(0)
		if prev := st.Latest(name, typ); prev != nil {
			attempt = prev.Attempt + 1
		}
		c := cri.ContainerStatus{ID: fmt.Sprintf("%s-%s-%d", pod.UID, name, attempt), Name: name, Type: typ,
			Attempt: attempt, State: cri.StateRunning, StartedAt: f.now()}
		st.Containers = append([]cri.ContainerStatus{c}, st.Containers...)
		res.Started = append(res.Started, name)
	}
	if plan.UpdatePodLevelResources || len(plan.ContainersToUpdate) > 0 {
		if f.resizeErr != nil {
			res.ResizeErr = f.resizeErr
			res.Errs = append(res.Errs, f.resizeErr)
		} else {
			f.podLevel[pod.UID] = pod.Spec.Resources.DeepCopy()
			f.events = append(f.events, event{op: "ResizePodCgroup", uid: pod.UID})
		}
	}
	// Sidecars (restartable init containers) start and keep running; a
	// plain init container is not run by this fake.
	if plan.NextInit >= 0 && plan.NextInit < len(pod.Spec.InitContainers) && podutil.IsSidecar(&pod.Spec.InitContainers[plan.NextInit]) {
		start(pod.Spec.InitContainers[plan.NextInit].Name, cri.ContainerTypeInit)
		return res
	}
	for _, i := range plan.SidecarsToStart {
		start(pod.Spec.InitContainers[i].Name, cri.ContainerTypeInit)
	}
	for _, i := range plan.ContainersToStart {
		start(pod.Spec.Containers[i].Name, cri.ContainerTypeRegular)
	}
	if len(res.Started) > 0 {
		res.Pulls = append(res.Pulls, f.pulls...)
	}
	return res
}

func (f *fakeRuntime) KillPod(ctx context.Context, _ *v1.Pod, st *cri.PodStatus, grace int64) error {
	f.mu.Lock()
	before := f.beforeKill
	f.mu.Unlock()
	if before != nil {
		before()
	}
	f.record(event{op: "KillPod", uid: st.Ref.UID, grace: grace})
	f.mu.Lock()
	if f.blockKillAbove > 0 && grace > f.blockKillAbove {
		f.mu.Unlock()
		<-ctx.Done()
		return ctx.Err()
	}
	defer f.mu.Unlock()
	if f.killErrs > 0 {
		f.killErrs--
		return errors.New("runtime timed out stopping a container")
	}
	p := f.podLocked(st.Ref)
	for i := range p.Containers {
		if p.Containers[i].State == cri.StateRunning {
			p.Containers[i].State = cri.StateExited
			p.Containers[i].ExitCode = f.killExit
			p.Containers[i].FinishedAt = f.now()
		}
	}
	for i := range p.Sandboxes {
		p.Sandboxes[i].Ready = false
	}
	return nil
}

func (f *fakeRuntime) ListPods(context.Context) ([]cri.PodRef, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []cri.PodRef
	for _, st := range f.pods {
		out = append(out, st.Ref)
	}
	return out, nil
}

// snapshot returns a copy of every pod's state.
func (f *fakeRuntime) snapshot() map[types.UID]*cri.PodStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[types.UID]*cri.PodStatus{}
	for uid, st := range f.pods {
		out[uid] = copyStatus(st)
	}
	return out
}

func (f *fakeRuntime) RemoveInterrupted(context.Context, *cri.PodStatus) (bool, error) {
	return false, nil
}

// PodCgroupResizing: the pod's pod-level resources differ from those its
// sandbox was made or last resized with.
func (f *fakeRuntime) PodCgroupResizing(pod *v1.Pod) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, ok := f.podLevel[pod.UID]
	return ok && !apiequality.Semantic.DeepEqual(cur, pod.Spec.Resources)
}

// RecursiveReadOnlyMountsSupported: as containerd 1.6, which reports no
// runtime handlers.
func (f *fakeRuntime) RecursiveReadOnlyMountsSupported(*v1.Pod) bool { return false }

func (f *fakeRuntime) RemovePod(_ context.Context, st *cri.PodStatus) error {
	f.record(event{op: "RemovePod", uid: st.Ref.UID})
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.pods, st.Ref.UID)
	return nil
}

// exit makes the running containers of a pod exit with code, as if they
// finished on their own.
func (f *fakeRuntime) exit(uid types.UID, code int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, c := range f.pods[uid].Containers {
		if c.State == cri.StateRunning {
			f.pods[uid].Containers[i].State = cri.StateExited
			f.pods[uid].Containers[i].ExitCode = code
			f.pods[uid].Containers[i].FinishedAt = f.now()
		}
	}
}

// exitContainer makes the running container name of a pod exit with
// code.
func (f *fakeRuntime) exitContainer(uid types.UID, name string, code int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, c := range f.pods[uid].Containers {
		if c.Name == name && c.State == cri.StateRunning {
			f.pods[uid].Containers[i].State = cri.StateExited
			f.pods[uid].Containers[i].ExitCode = code
			f.pods[uid].Containers[i].FinishedAt = f.now()
		}
	}
}

func (f *fakeRuntime) setKillErrs(n int) {
	f.mu.Lock()
	f.killErrs = n
	f.mu.Unlock()
}

// ops returns the events of uid (all when uid is empty) with op in ops (all
// when none given).
func (f *fakeRuntime) ops(uid types.UID, ops ...string) []event {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []event
	for _, e := range f.events {
		if uid != "" && e.uid != uid {
			continue
		}
		if len(ops) > 0 {
			found := false
			for _, op := range ops {
				found = found || e.op == op
			}
			if !found {
				continue
			}
		}
		out = append(out, e)
	}
	return out
}

func (f *fakeRuntime) count(uid types.UID, op string) int { return len(f.ops(uid, op)) }

type engineFixture struct {
	e     *Engine
	rt    *fakeRuntime
	cache *pleg.Cache
	clock *testingclock.FakeClock

	mu         sync.Mutex
	published  []*v1.Pod            // guarded by mu
	terminated []*v1.Pod            // guarded by mu
	lastSeen   map[types.UID]string // runtime state at the last relist; guarded by mu
}

const syncInterval = 10 * time.Second

// newEngineFixture starts an engine over a fake runtime; relist stands in
// for the PLEG.
func newEngineFixture(t *testing.T, opts ...func(*Config)) *engineFixture {
	t.Helper()
	clk := testingclock.NewFakeClock(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))
	f := &engineFixture{rt: newFakeRuntime(clk), clock: clk, cache: pleg.NewCache()}
	ctx, cancel := context.WithCancel(context.Background())
	cfg := Config{
		Runtime: f.rt, RuntimeName: "containerd", NodeIP: "192.0.2.10", Clock: clk, SyncInterval: syncInterval, Cache: f.cache,
		OnTerminated: func(_ context.Context, pod *v1.Pod) error {
			f.rt.record(event{op: "OnTerminated", uid: pod.UID, phase: pod.Status.Phase})
			f.mu.Lock()
			f.terminated = append(f.terminated, pod)
			f.mu.Unlock()
			return nil
		},
	}
	for _, o := range opts {
		o(&cfg)
	}
	e, err := NewEngine(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatalf("NewEngine: %v", err)
	}
	e.NotifyPods(func(pod *v1.Pod) {
		f.rt.record(event{op: "notify", uid: pod.UID, phase: pod.Status.Phase})
		f.mu.Lock()
		f.published = append(f.published, pod)
		f.mu.Unlock()
	})
	f.e = e
	f.cache.UpdateTime(clk.Now())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

// relist does what the PLEG does after a relist: the clock moves on a
// little, every pod's state goes into the cache, and the pods whose state
// changed since the previous relist are kicked.
// opSeq is the order of uid's runtime operations among ops.
func (f *engineFixture) opSeq(uid types.UID, ops ...string) []string {
	var seq []string
	for _, e := range f.rt.ops(uid, ops...) {
		seq = append(seq, e.op)
	}
	return seq
}

func (f *engineFixture) relist() {
	f.clock.Step(time.Millisecond)
	now := f.clock.Now()
	snap := f.rt.snapshot()
	for uid, st := range snap {
		f.cache.Set(uid, st, nil, now)
	}
	f.cache.UpdateTime(now)
	f.mu.Lock()
	var changed []types.UID
	seen := map[types.UID]string{}
	for uid, st := range snap {
		seen[uid] = fmt.Sprint(st.Sandboxes, st.Containers)
		if f.lastSeen[uid] != seen[uid] {
			changed = append(changed, uid)
		}
	}
	for uid := range f.lastSeen {
		if _, ok := seen[uid]; !ok {
			changed = append(changed, uid)
		}
	}
	f.lastSeen = seen
	f.mu.Unlock()
	for _, uid := range changed {
		f.e.Kick(uid)
	}
}

// step moves the clock by d (firing the engine's work-queue and
// housekeeping tickers) and relists.
func (f *engineFixture) step(d time.Duration) {
	f.clock.Step(d)
	f.relist()
}

// eventually waits, with a deadline, until cond holds, relisting at every
// poll as the PLEG would: a worker waits for a status newer than its last
// sync before each piece of work.
func (f *engineFixture) eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) {
			if cond() {
				return true, nil
			}
			f.relist()
			return false, nil
		})
	if err != nil {
		t.Fatalf("timed out waiting for %s; runtime calls and notifications: %v", what, f.rt.ops(""))
	}
}

// lastPhase is the phase of the newest status published for uid.
func (f *engineFixture) lastPhase(uid types.UID) v1.PodPhase {
	if p := f.lastPublished(uid); p != nil {
		return p.Status.Phase
	}
	return ""
}

// lastPublished is the newest status published for uid, or nil.
func (f *engineFixture) lastPublished(uid types.UID) *v1.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.published) - 1; i >= 0; i-- {
		if f.published[i].UID == uid {
			return f.published[i]
		}
	}
	return nil
}

func enginePod(uid types.UID, name string, policy v1.RestartPolicy) *v1.Pod {
	pod := &v1.Pod{}
	pod.UID, pod.Name, pod.Namespace = uid, name, "prod"
	pod.Spec.RestartPolicy = policy
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](17)
	pod.Spec.Containers = []v1.Container{{Name: "a", Image: "busybox:1.36"}}
	return pod
}

func (f *engineFixture) startRunning(t *testing.T, pod *v1.Pod) {
	t.Helper()
	f.e.UpdatePod(context.Background(), pod)
	f.eventually(t, "pod "+string(pod.UID)+" to be published Running", func() bool { return f.lastPhase(pod.UID) == v1.PodRunning })
	// Let the PLEG see the started containers, so that no event is pending.
	f.relist()
	f.eventually(t, "the worker idle", func() bool { return !f.e.workers.isWorking(pod.UID) })
}

func deleted(pod *v1.Pod, now time.Time, grace *int64) *v1.Pod {
	d := pod.DeepCopy()
	d.DeletionTimestamp = &metav1.Time{Time: now}
	d.DeletionGracePeriodSeconds = grace
	return d
}

func TestNewEngineValidates(t *testing.T) {
	if _, err := NewEngine(context.Background(), Config{}); err == nil {
		t.Fatal("NewEngine without a runtime succeeded")
	}
}

func TestEngineSyncsAndPublishes(t *testing.T) {
	f := newEngineFixture(t)
	pod := enginePod("uid-1", "web", v1.RestartPolicyAlways)
	f.startRunning(t, pod)

	syncs := f.rt.ops("uid-1", "SyncPod")
	if len(syncs) != 1 || !syncs[0].plan.CreateSandbox || len(syncs[0].plan.ContainersToStart) != 1 {
		t.Fatalf("SyncPod calls %+v, want one that creates the sandbox and starts a", syncs)
	}
	p := f.lastPublished("uid-1")
	if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil ||
		p.Status.ContainerStatuses[0].ContainerID != "containerd://uid-1-a-0" {
		t.Errorf("published container statuses %+v", p.Status.ContainerStatuses)
	}
	if p.Status.PodIP != "10.0.0.7" || p.Status.HostIP != "192.0.2.10" {
		t.Errorf("podIP %q hostIP %q", p.Status.PodIP, p.Status.HostIP)
	}
	if got := f.e.Pod("uid-1"); got == nil || got.Status.Phase != v1.PodRunning {
		t.Errorf("Engine.Pod = %v, want the running pod", got)
	}

	// The running status was published right after the containers started,
	// from the engine's own read: no relist was needed.
	notifies := f.rt.count("uid-1", "notify")
	// Relists and a spec change sync the pod again; nothing is started twice
	// and an unchanged status is not published again.
	f.relist()
	updated := pod.DeepCopy()
	updated.Labels = map[string]string{"v": "2"}
	f.e.UpdatePod(context.Background(), updated)
	f.relist()
	f.eventually(t, "the worker idle", func() bool { return !f.e.workers.isWorking("uid-1") })
	if n := f.rt.count("uid-1", "notify"); n != notifies {
		t.Errorf("%d more notifications for an unchanged status", n-notifies)
	}
	if n := f.rt.count("uid-1", "SyncPod"); n != 1 {
		t.Errorf("SyncPod called %d times for a running pod, want 1", n)
	}

	// A crash is seen at the next relist and the container restarted.
	f.rt.exit("uid-1", 1)
	f.relist()
	f.eventually(t, "the crashed container to be restarted", func() bool { return f.rt.count("uid-1", "SyncPod") == 2 })
	if plan := f.rt.ops("uid-1", "SyncPod")[1].plan; plan.CreateSandbox || len(plan.ContainersToStart) != 1 {
		t.Errorf("restart plan %s, want only a started again", plan)
	}
}

func TestEngineKill(t *testing.T) {
	tests := map[string]struct {
		deletionGrace *int64
		killExit      int32
		wantGrace     int64
		wantPhase     v1.PodPhase
	}{
		"spec grace, clean exit":       {killExit: 0, wantGrace: 17, wantPhase: v1.PodSucceeded},
		"deletion grace, SIGTERM exit": {deletionGrace: ptr.To[int64](5), killExit: 143, wantGrace: 5, wantPhase: v1.PodFailed},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newEngineFixture(t)
			f.rt.killExit = tc.killExit
			pod := enginePod("uid-1", "web", v1.RestartPolicyAlways)
			f.startRunning(t, pod)

			del := deleted(pod, f.clock.Now(), tc.deletionGrace)
			if !f.e.Kill(context.Background(), del) {
				t.Fatal("Kill of a known pod returned false")
			}
			f.relist()
			f.eventually(t, "the pod to be forgotten", func() bool { return f.e.Pod("uid-1") == nil })

			var seq []string
			for _, e := range f.rt.ops("uid-1", "KillPod", "RemovePod", "OnTerminated") {
				if e.op == "KillPod" && e.grace != tc.wantGrace {
					t.Errorf("KillPod grace %d, want %d", e.grace, tc.wantGrace)
				}
				seq = append(seq, e.op)
			}
			// As the kubelet: the API object goes once the containers are
			// stopped; their removal follows.
			if want := []string{"KillPod", "OnTerminated", "RemovePod"}; fmt.Sprint(seq) != fmt.Sprint(want) {
				t.Errorf("termination sequence %v, want %v", seq, want)
			}
			f.eventually(t, "the terminal status to be published", func() bool { return f.lastPhase("uid-1") == tc.wantPhase })
			f.mu.Lock()
			term := f.terminated
			f.mu.Unlock()
			if len(term) != 1 || term[0].UID != "uid-1" || term[0].DeletionTimestamp == nil || term[0].Status.Phase != tc.wantPhase {
				t.Errorf("OnTerminated got %v, want the deleted pod once with phase %s", term, tc.wantPhase)
			}
			if f.e.Kill(context.Background(), del) {
				t.Errorf("Kill of a forgotten pod returned true")
			}
		})
	}
}

func TestEngineKillRetriesUntilTheRuntimeStops(t *testing.T) {
	f := newEngineFixture(t)
	pod := enginePod("uid-1", "web", v1.RestartPolicyAlways)
	f.startRunning(t, pod)
	f.rt.setKillErrs(2)

	f.e.Kill(context.Background(), deleted(pod, f.clock.Now(), nil))
	for attempt := 1; attempt <= 2; attempt++ {
		f.eventually(t, fmt.Sprintf("KillPod attempt %d", attempt), func() bool { return f.rt.count("uid-1", "KillPod") == attempt })
		f.eventually(t, "the worker idle", func() bool { return !f.e.workers.isWorking("uid-1") })
		if n := f.rt.count("uid-1", "RemovePod") + f.rt.count("uid-1", "OnTerminated"); n != 0 {
			t.Fatalf("pod removed or reported terminated after a failed kill")
		}
		f.step(20 * time.Second) // beyond the back-off period with jitter
	}
	f.eventually(t, "the pod to be forgotten", func() bool { return f.e.Pod("uid-1") == nil })
	if n := f.rt.count("uid-1", "KillPod"); n != 3 {
		t.Errorf("KillPod called %d times, want 3", n)
	}
	if n := f.rt.count("uid-1", "RemovePod"); n != 1 {
		t.Errorf("RemovePod called %d times, want 1", n)
	}
	if n := f.rt.count("uid-1", "OnTerminated"); n != 1 {
		t.Errorf("OnTerminated called %d times, want 1", n)
	}
}

// TestEngineSameNameWaits: a new pod under the name of a pod still
// terminating starts only once the old one is gone.
func TestEngineSameNameWaits(t *testing.T) {
	f := newEngineFixture(t)
	old := enginePod("uid-1", "web", v1.RestartPolicyAlways)
	old.CreationTimestamp = metav1.NewTime(f.clock.Now())
	f.startRunning(t, old)

	reused := enginePod("uid-2", "web", v1.RestartPolicyAlways)
	reused.CreationTimestamp = metav1.NewTime(f.clock.Now().Add(time.Minute))
	f.e.UpdatePod(context.Background(), reused)
	f.eventually(t, "uid-2 idle", func() bool { return !f.e.workers.isWorking("uid-2") })
	if n := f.rt.count("uid-2", "SyncPod"); n != 0 {
		t.Fatalf("uid-2 started while uid-1 runs under the same name")
	}
	if got := f.e.PodByName("prod", "web"); got == nil || got.UID != "uid-2" {
		t.Errorf("PodByName = %v, want the newer uid-2", got)
	}
	if n := len(f.e.Pods()); n != 2 {
		t.Errorf("Pods() has %d pods, want 2", n)
	}

	f.e.Kill(context.Background(), deleted(old, f.clock.Now(), nil))
	f.relist()
	f.eventually(t, "uid-1 to be forgotten", func() bool { return f.e.Pod("uid-1") == nil })
	if n := f.rt.count("uid-2", "KillPod") + f.rt.count("uid-2", "RemovePod") + f.rt.count("uid-2", "OnTerminated"); n != 0 {
		t.Errorf("killing uid-1 touched uid-2 %d times", n)
	}
	// uid-2 was requeued; it starts at its turn.
	for i := 0; i < 3 && f.lastPhase("uid-2") != v1.PodRunning; i++ {
		f.step(20 * time.Second)
		f.eventually(t, "uid-2 idle", func() bool { return !f.e.workers.isWorking("uid-2") })
	}
	f.eventually(t, "uid-2 running", func() bool { return f.lastPhase("uid-2") == v1.PodRunning })
}

func TestEngineFinishedPodIsStoppedAndKeptUntilDeleted(t *testing.T) {
	tests := map[string]struct {
		policy v1.RestartPolicy
		exit   int32
		phase  v1.PodPhase
	}{
		"Never, exit 0: Succeeded":     {v1.RestartPolicyNever, 0, v1.PodSucceeded},
		"OnFailure, exit 0: Succeeded": {v1.RestartPolicyOnFailure, 0, v1.PodSucceeded},
		"Never, exit 1: Failed":        {v1.RestartPolicyNever, 1, v1.PodFailed},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newEngineFixture(t)
			pod := enginePod("uid-1", "job", tc.policy)
			f.startRunning(t, pod)

			f.rt.exit("uid-1", tc.exit)
			f.relist()
			f.eventually(t, "the pod to be published "+string(tc.phase), func() bool { return f.lastPhase("uid-1") == tc.phase })
			f.eventually(t, "the worker to finish", func() bool { return f.e.workers.IsPodFinished("uid-1") })
			if kills := f.rt.ops("uid-1", "KillPod"); len(kills) != 1 || kills[0].grace != 17 {
				t.Fatalf("KillPod calls %+v, want one with the pod's grace period to stop the sandbox", kills)
			}
			// A finished pod is not synced again, however often it is kicked.
			for i := 0; i < 3; i++ {
				f.step(time.Minute)
			}
			if n := f.rt.count("uid-1", "SyncPod"); n != 1 {
				t.Errorf("SyncPod called %d times, want only the first", n)
			}
			if got := f.lastPublished("uid-1"); got.Status.Phase != tc.phase {
				t.Errorf("phase went from %s to %s", tc.phase, got.Status.Phase)
			}
			if f.rt.count("uid-1", "RemovePod") != 0 {
				t.Errorf("a finished pod's containers were removed before deletion")
			}
			// Deleted: housekeeping removes the containers and reports it.
			if !f.e.Kill(context.Background(), deleted(pod, f.clock.Now(), nil)) {
				t.Fatal("Kill of a finished pod returned false")
			}
			f.e.Housekeeping(context.Background())
			f.eventually(t, "the pod to be forgotten", func() bool { return f.e.Pod("uid-1") == nil })
			if f.rt.count("uid-1", "RemovePod") != 1 || f.rt.count("uid-1", "OnTerminated") != 1 {
				t.Errorf("deleted finished pod: RemovePod %d, OnTerminated %d, want 1 each",
					f.rt.count("uid-1", "RemovePod"), f.rt.count("uid-1", "OnTerminated"))
			}
			f.e.Housekeeping(context.Background())
			if f.e.workers.IsKnown("uid-1") {
				t.Error("worker record kept after the pod was forgotten")
			}
		})
	}
}

// TestEngineTerminalPhaseOnlyOnceStopped: a pod that ends on its own is
// published in its terminal phase only once its termination completed
// (the kubelet's status manager: mergePodStatus holds a terminal phase
// while PodCouldHaveRunningContainers), so its first terminal status
// already shows the sandbox stopped (PodReadyToStartContainers False).
// virtual-kubelet writes no status of a pod the API shows terminal: a
// terminal phase published before the sandbox stopped left the condition
// True in the API.
func TestEngineTerminalPhaseOnlyOnceStopped(t *testing.T) {
	tests := map[string]struct {
		policy v1.RestartPolicy
		exit   int32
		phase  v1.PodPhase
	}{
		"Never, exit 0: Succeeded": {v1.RestartPolicyNever, 0, v1.PodSucceeded},
		"Never, exit 3: Failed":    {v1.RestartPolicyNever, 3, v1.PodFailed},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newEngineFixture(t)
			pod := enginePod("uid-1", "job", tc.policy)
			f.startRunning(t, pod)
			// What made it show: the status published before the kill
			// is handed on (and written) before the sandbox stops.
			f.rt.mu.Lock()
			f.rt.beforeKill = func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = f.e.status.WaitDelivered(ctx, "uid-1")
			}
			f.rt.mu.Unlock()
			f.rt.exit("uid-1", tc.exit)
			f.relist()
			f.eventually(t, "the worker to finish", func() bool { return f.e.workers.IsPodFinished("uid-1") })
			f.eventually(t, "the pod to be published "+string(tc.phase), func() bool { return f.lastPhase("uid-1") == tc.phase })

			var kill, firstTerminal = -1, -1
			for i, e := range f.rt.ops("uid-1", "KillPod", "notify") {
				switch {
				case e.op == "KillPod" && kill < 0:
					kill = i
				case e.op == "notify" && isTerminalPhase(e.phase) && firstTerminal < 0:
					firstTerminal = i
				}
			}
			if kill < 0 || firstTerminal < kill {
				t.Errorf("terminal phase published at %d, KillPod at %d: want the phase only after the kill; calls %v",
					firstTerminal, kill, f.rt.ops("uid-1", "KillPod", "notify"))
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, p := range f.published {
				if p.UID != "uid-1" || !isTerminalPhase(p.Status.Phase) {
					continue
				}
				for _, c := range p.Status.Conditions {
					if c.Type == v1.PodReadyToStartContainers && c.Status != v1.ConditionFalse {
						t.Errorf("published %s with PodReadyToStartContainers %s, want False (sandbox stopped)", p.Status.Phase, c.Status)
					}
				}
			}
		})
	}
}

func TestEngineFinishedPodStopIsRetried(t *testing.T) {
	f := newEngineFixture(t)
	pod := enginePod("uid-1", "job", v1.RestartPolicyNever)
	f.startRunning(t, pod)
	f.rt.setKillErrs(1)
	f.rt.exit("uid-1", 0)
	f.relist()
	f.eventually(t, "the first KillPod", func() bool { return f.rt.count("uid-1", "KillPod") == 1 })
	f.eventually(t, "the worker idle", func() bool { return !f.e.workers.isWorking("uid-1") })
	// While the kill fails the containers may run: the phase stays
	// Running, as the kubelet's status manager holds it.
	if p := f.lastPhase("uid-1"); p != v1.PodRunning {
		t.Errorf("phase %s published while the pod could still run, want Running", p)
	}
	f.step(20 * time.Second)
	f.eventually(t, "KillPod to be retried", func() bool { return f.rt.count("uid-1", "KillPod") == 2 })
	f.eventually(t, "the worker to finish", func() bool { return f.e.workers.IsPodFinished("uid-1") })
	f.eventually(t, "the Succeeded status", func() bool { return f.lastPhase("uid-1") == v1.PodSucceeded })
}

func TestEngineKillUnknown(t *testing.T) {
	f := newEngineFixture(t)
	// A pod left in the runtime by an earlier run, deleted while nobody watched.
	pod := enginePod("uid-9", "ghost", v1.RestartPolicyAlways)
	f.rt.mu.Lock()
	f.rt.pods["uid-9"] = &cri.PodStatus{Ref: cri.RefOf(pod),
		Sandboxes:  []cri.SandboxStatus{{ID: "sb", Ready: true}},
		Containers: []cri.ContainerStatus{{ID: "c", Name: "a", Type: cri.ContainerTypeRegular, State: cri.StateRunning}}}
	f.rt.mu.Unlock()
	f.relist()

	f.e.KillUnknown(context.Background(), deleted(pod, f.clock.Now(), nil))
	f.eventually(t, "the pod to be cleaned up", func() bool { return f.rt.count("uid-9", "OnTerminated") == 1 })
	if n := f.rt.count("uid-9", "SyncPod"); n != 0 {
		t.Errorf("SyncPod called %d times for a pod only to clean up", n)
	}
	if n := f.rt.count("uid-9", "KillPod"); n != 1 {
		t.Errorf("KillPod called %d times, want 1", n)
	}
	f.eventually(t, "the pod to be forgotten", func() bool { return f.e.Pod("uid-9") == nil })
}

// TestEngineRuntimeOrphans: once the desired set is known, housekeeping
// terminates runtime pods of no API pod through the runtime-pod path and
// leaves desired ones alone.
func TestEngineRuntimeOrphans(t *testing.T) {
	orphan := enginePod("uid-o", "gone", v1.RestartPolicyAlways)
	wanted := enginePod("uid-w", "kept", v1.RestartPolicyAlways)
	var synced atomic.Bool
	f := newEngineFixture(t, func(c *Config) {
		c.APIPods = func() ([]*v1.Pod, error) { return []*v1.Pod{wanted}, nil }
		c.APIPodsSynced = synced.Load
	})
	f.rt.mu.Lock()
	for _, p := range []*v1.Pod{orphan, wanted} {
		f.rt.pods[p.UID] = &cri.PodStatus{Ref: cri.RefOf(p),
			Sandboxes:  []cri.SandboxStatus{{ID: string(p.UID) + "-sb", Ready: true}},
			Containers: []cri.ContainerStatus{{ID: string(p.UID) + "-c", Name: "a", Type: cri.ContainerTypeRegular, State: cri.StateRunning}}}
	}
	f.rt.mu.Unlock()

	// Before the informer of the API's pods synced nothing is taken for an
	// orphan.
	f.e.Housekeeping(context.Background())
	if n := f.rt.count("", "KillPod"); n != 0 {
		t.Fatalf("KillPod called %d times before the desired set was known", n)
	}
	synced.Store(true)
	f.e.Housekeeping(context.Background())
	f.eventually(t, "the orphan to be removed", func() bool { return f.rt.count("uid-o", "RemovePod") == 1 })
	if kills := f.rt.ops("uid-o", "KillPod"); len(kills) != 1 || kills[0].grace != 1 {
		t.Errorf("orphan KillPod calls %+v, want one with grace 1", kills)
	}
	if n := f.rt.count("uid-o", "OnTerminated"); n != 0 {
		t.Errorf("OnTerminated called for a pod with no API object")
	}
	if n := f.rt.count("uid-w", "KillPod"); n != 0 {
		t.Errorf("a desired pod was killed")
	}
	f.eventually(t, "the orphan's record dropped", func() bool { return !f.e.workers.IsKnown("uid-o") })
}

// TestEngineAdoptsRunningPods: after a restart, a pod whose containers run
// is adopted: its status is published and nothing is started again.
func TestEngineAdoptsRunningPods(t *testing.T) {
	f := newEngineFixture(t)
	pod := enginePod("uid-1", "web", v1.RestartPolicyAlways)
	pod.Status.Phase = v1.PodRunning
	f.rt.mu.Lock()
	f.rt.pods["uid-1"] = &cri.PodStatus{Ref: cri.RefOf(pod),
		Sandboxes:  []cri.SandboxStatus{{ID: "sb", Ready: true, IPs: []string{"10.0.0.9"}}},
		Containers: []cri.ContainerStatus{{ID: "c", Name: "a", Type: cri.ContainerTypeRegular, State: cri.StateRunning, StartedAt: f.clock.Now()}}}
	f.rt.mu.Unlock()
	f.relist()
	f.e.UpdatePod(context.Background(), pod)
	f.eventually(t, "the adopted pod published", func() bool { return f.lastPublished("uid-1") != nil })
	p := f.lastPublished("uid-1")
	if p.Status.Phase != v1.PodRunning || p.Status.PodIP != "10.0.0.9" {
		t.Errorf("adopted pod status %+v", p.Status)
	}
	if n := f.rt.count("uid-1", "SyncPod"); n != 0 {
		t.Errorf("SyncPod called %d times for a pod whose containers run", n)
	}
}

// TestEngineKillWithoutDeletionTimestamp: virtual-kubelet may hand DeletePod
// the provider's own copy of a pod whose object is already gone; the kill
// still means deletion: the runtime is cleaned up.
func TestEngineKillWithoutDeletionTimestamp(t *testing.T) {
	f := newEngineFixture(t)
	pod := enginePod("uid-1", "web", v1.RestartPolicyAlways)
	f.startRunning(t, pod)
	if !f.e.Kill(context.Background(), pod) {
		t.Fatal("Kill of a known pod returned false")
	}
	f.eventually(t, "the pod to be removed", func() bool { return f.rt.count("uid-1", "RemovePod") == 1 })
	f.eventually(t, "the pod to be forgotten", func() bool { return f.e.Pod("uid-1") == nil })
}

// TestEngineWaitsForTheNetwork: while the runtime's network is not ready a
// pod off the host network is not started (and retried), a host-network
// pod is; once the network is ready the pod starts.
func TestEngineWaitsForTheNetwork(t *testing.T) {
	f := newEngineFixture(t)
	var mu sync.Mutex
	netErr := errors.New("cni config uninitialized")
	f.e.sync.networkError = func() error { mu.Lock(); defer mu.Unlock(); return netErr }

	pod := enginePod("uid-1", "web", v1.RestartPolicyAlways)
	host := enginePod("uid-2", "host", v1.RestartPolicyAlways)
	host.Spec.HostNetwork = true
	f.e.UpdatePod(context.Background(), pod)
	f.startRunning(t, host)
	f.eventually(t, "the host-network pod to have the node's IP", func() bool {
		p := f.lastPublished("uid-2")
		return p != nil && p.Status.PodIP == "192.0.2.10" && len(p.Status.PodIPs) == 1 && p.Status.PodIPs[0].IP == "192.0.2.10"
	})
	f.eventually(t, "uid-1 idle", func() bool { return !f.e.workers.isWorking("uid-1") })
	if n := f.rt.count("uid-1", "SyncPod"); n != 0 {
		t.Fatalf("a pod was started while the network is not ready")
	}
	mu.Lock()
	netErr = nil
	mu.Unlock()
	f.step(2 * time.Second) // the retry after a network error is due within 1.5 s
	f.eventually(t, "uid-1 running", func() bool { return f.lastPhase("uid-1") == v1.PodRunning })
}

// TestEngineActiveDeadline: a pod running longer than its
// activeDeadlineSeconds fails with the kubelet's reason and is stopped.
func TestEngineActiveDeadline(t *testing.T) {
	f := newEngineFixture(t)
	pod := enginePod("uid-1", "web", v1.RestartPolicyAlways)
	f.startRunning(t, pod)
	if n := f.rt.count("uid-1", "KillPod"); n != 0 {
		t.Fatal("killed before any deadline")
	}
	// The deadline is set later (an API update) and is already past.
	updated := pod.DeepCopy()
	updated.Spec.ActiveDeadlineSeconds = ptr.To[int64](5)
	f.e.UpdatePod(context.Background(), updated)
	f.step(6 * time.Second)
	f.eventually(t, "the pod to fail", func() bool { return f.lastPhase("uid-1") == v1.PodFailed })
	p := f.lastPublished("uid-1")
	if p.Status.Reason != "DeadlineExceeded" || p.Status.Message != "Pod was active on the node longer than the specified deadline" {
		t.Errorf("reason %q message %q", p.Status.Reason, p.Status.Message)
	}
	f.eventually(t, "the containers stopped", func() bool { return f.rt.count("uid-1", "KillPod") == 1 })
	f.eventually(t, "the worker to finish", func() bool { return f.e.workers.IsPodFinished("uid-1") })
	if got := f.lastPublished("uid-1"); got.Status.Reason != "DeadlineExceeded" || got.Status.Phase != v1.PodFailed {
		t.Errorf("final status %s %q, want Failed DeadlineExceeded", got.Status.Phase, got.Status.Reason)
	}
}

// TestEngineReadinessGateFromTheAPI: a readiness gate another writer sets
// in the API is seen at the pod's next sync (virtual-kubelet forwards no
// status-only change), and the pod becomes Ready.
func TestEngineReadinessGateFromTheAPI(t *testing.T) {
	f := newEngineFixture(t)
	pod := enginePod("uid-1", "web", v1.RestartPolicyAlways)
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/ready"}}
	var mu sync.Mutex
	api := pod.DeepCopy()
	f.e.sync.apiPod = func(ns, name string) *v1.Pod {
		mu.Lock()
		defer mu.Unlock()
		if ns == api.Namespace && name == api.Name {
			return api.DeepCopy()
		}
		return nil
	}
	f.startRunning(t, pod)
	ready := func() v1.ConditionStatus { return podCondition(f.lastPublished("uid-1"), v1.PodReady) }
	if got := ready(); got != v1.ConditionFalse {
		t.Fatalf("Ready = %q with the gate unset, want False", got)
	}
	mu.Lock()
	api.Status.Conditions = append(api.Status.Conditions, v1.PodCondition{Type: "example.com/ready", Status: v1.ConditionTrue})
	mu.Unlock()
	f.step(20 * time.Second) // past the resync interval with jitter
	f.eventually(t, "the pod Ready", func() bool { return ready() == v1.ConditionTrue })
}

// fakeCgroups records pod cgroup calls among the runtime's calls.
type fakeCgroups struct {
	rt   *fakeRuntime
	mu   sync.Mutex
	have map[types.UID]bool
	// config holds what PodCgroupConfig reads, by pod; guarded by mu.
	config map[types.UID]status.PodCgroup
}

func (c *fakeCgroups) EnsurePod(pod *v1.Pod) error {
	c.rt.record(event{op: "EnsureCgroup", uid: pod.UID})
	c.mu.Lock()
	c.have[pod.UID] = true
	c.mu.Unlock()
	return nil
}

func (c *fakeCgroups) RemovePod(uid types.UID) error {
	c.rt.record(event{op: "RemoveCgroup", uid: uid})
	c.mu.Lock()
	delete(c.have, uid)
	c.mu.Unlock()
	return nil
}

// PodCgroupConfig reads what config holds for the pod, an error when
// nothing (no cgroup).
func (c *fakeCgroups) PodCgroupConfig(pod *v1.Pod) (int64, int64, int64, int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.config[pod.UID]
	if !ok {
		return 0, 0, 0, 0, errors.New("no pod cgroup")
	}
	return v.CPUShares, v.CPUQuota, v.CPUPeriod, v.MemoryLimit, nil
}

func (c *fakeCgroups) PodUIDs() ([]types.UID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var uids []types.UID
	for uid := range c.have {
		uids = append(uids, uid)
	}
	return uids, nil
}

// TestEnginePodCgroups: the pod cgroup is made before the sandbox, removed
// after the containers stopped and before the API object is deleted (the
// kubelet's PodResourcesAreReclaimed waits for it); housekeeping removes
// the cgroups of pods nobody knows once no runtime pod has their UID, and
// a runtime orphan's after its termination.
func TestEnginePodCgroups(t *testing.T) {
	var cg *fakeCgroups
	pod := enginePod("uid-1", "web", v1.RestartPolicyAlways)
	var synced atomic.Bool
	f := newEngineFixture(t, func(c *Config) {
		cg = &fakeCgroups{have: map[types.UID]bool{"uid-gone": true, "uid-o": true}}
		c.PodCgroups = cg
		c.APIPods = func() ([]*v1.Pod, error) { return []*v1.Pod{pod}, nil }
		c.APIPodsSynced = synced.Load
	})
	cg.rt = f.rt
	f.startRunning(t, pod)
	seq := f.opSeq("uid-1", "EnsureCgroup", "SyncPod")
	if len(seq) < 2 || seq[0] != "EnsureCgroup" || seq[1] != "SyncPod" {
		t.Errorf("first calls %v, want EnsureCgroup before SyncPod", seq)
	}

	orphan := enginePod("uid-o", "gone", v1.RestartPolicyAlways)
	f.rt.mu.Lock()
	f.rt.pods[orphan.UID] = &cri.PodStatus{Ref: cri.RefOf(orphan),
		Sandboxes:  []cri.SandboxStatus{{ID: "o-sb", Ready: true}},
		Containers: []cri.ContainerStatus{{ID: "o-c", Name: "a", Type: cri.ContainerTypeRegular, State: cri.StateRunning}}}
	f.rt.mu.Unlock()
	synced.Store(true)
	f.e.Housekeeping(context.Background())
	f.eventually(t, "the unknown pod's cgroup removed", func() bool { return f.rt.count("uid-gone", "RemoveCgroup") == 1 })
	f.eventually(t, "the runtime orphan removed", func() bool { return f.rt.count("uid-o", "RemovePod") == 1 })
	f.eventually(t, "the runtime orphan's cgroup removed", func() bool { return f.rt.count("uid-o", "RemoveCgroup") >= 1 })
	seq = f.opSeq("uid-o", "KillPod", "RemoveCgroup")
	if seq[0] != "KillPod" {
		t.Errorf("runtime orphan: %v, want its cgroup removed only after KillPod", seq)
	}
	if n := f.rt.count("uid-1", "RemoveCgroup"); n != 0 {
		t.Fatalf("the running pod's cgroup was removed %d times", n)
	}

	f.e.Kill(context.Background(), deleted(pod, f.clock.Now(), nil))
	f.relist()
	f.eventually(t, "the pod to be forgotten", func() bool { return f.e.Pod("uid-1") == nil })
	seq = f.opSeq("uid-1", "KillPod", "RemoveCgroup", "OnTerminated", "RemovePod")
	if want := []string{"KillPod", "RemoveCgroup", "OnTerminated", "RemovePod"}; fmt.Sprint(seq) != fmt.Sprint(want) {
		t.Errorf("termination sequence %v, want %v", seq, want)
	}
}

// TestEnginePodStartObserved: a new pod's start duration is observed once,
// when it first runs; a pod adopted running (its API phase Running) is not.
func TestEnginePodStartObserved(t *testing.T) {
	var mu sync.Mutex
	var starts []time.Duration
	f := newEngineFixture(t, func(c *Config) {
		c.ObservePodStart = func(d time.Duration) {
			mu.Lock()
			starts = append(starts, d)
			mu.Unlock()
		}
	})
	f.startRunning(t, enginePod("uid-1", "web", v1.RestartPolicyAlways))
	f.relist()
	adopted := enginePod("uid-2", "adopted", v1.RestartPolicyAlways)
	adopted.Status.Phase = v1.PodRunning
	f.startRunning(t, adopted)
	f.relist()
	f.eventually(t, "the workers idle", func() bool { return !f.e.workers.isWorking("uid-1") && !f.e.workers.isWorking("uid-2") })
	mu.Lock()
	defer mu.Unlock()
	if len(starts) != 1 || starts[0] < 0 {
		t.Errorf("pod starts observed %v, want one (the new pod's)", starts)
	}
}

// TestEnginePodStartSLI: the start SLI is the time since the pod's creation
// without the time spent pulling (first pull start to last pull end), once
// per new pod.
func TestEnginePodStartSLI(t *testing.T) {
	var mu sync.Mutex
	var slis []time.Duration
	f := newEngineFixture(t, func(c *Config) {
		c.ObservePodStartSLI = func(d time.Duration) {
			mu.Lock()
			slis = append(slis, d)
			mu.Unlock()
		}
	})
	t0 := f.clock.Now()
	f.rt.mu.Lock()
	f.rt.pulls = []cri.PullSpan{{Start: t0.Add(time.Second), End: t0.Add(3 * time.Second)}, {Start: t0.Add(2 * time.Second), End: t0.Add(5 * time.Second)}}
	f.rt.mu.Unlock()
	pod := enginePod("uid-1", "web", v1.RestartPolicyAlways)
	pod.CreationTimestamp = metav1.NewTime(t0.Add(-10 * time.Second))
	f.clock.Step(7 * time.Second)
	f.startRunning(t, pod)
	f.relist()
	f.eventually(t, "the worker idle", func() bool { return !f.e.workers.isWorking("uid-1") })
	// The SLI is taken by the sync that started the container, once it
	// sees it running: after the container's StartedAt, before now (each
	// failed poll of the waits above relisted, moving the fake clock 1 ms).
	started := f.lastPublished(pod.UID).Status.ContainerStatuses[0].State.Running.StartedAt.Time
	now := f.clock.Now()
	mu.Lock()
	defer mu.Unlock()
	// Created 10 s before t0; pulling from t0+1s to t0+5s.
	created, pulling := pod.CreationTimestamp.Time, 4*time.Second
	if lo, hi := started.Sub(created)-pulling, now.Sub(created)-pulling; len(slis) != 1 || slis[0] < lo || slis[0] > hi {
		t.Errorf("pod start SLIs %v, want one between %v and %v", slis, lo, hi)
	}
}

// TestLatestLoopEntryTime: the sync loop records each iteration's start,
// which the syncloop health check reads; the clock's tick starts the next.
func TestLatestLoopEntryTime(t *testing.T) {
	f := newEngineFixture(t)
	start := f.clock.Now()
	entered := func(want time.Time) {
		t.Helper()
		err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true,
			func(context.Context) (bool, error) { return f.e.LatestLoopEntryTime().Equal(want), nil })
		if err != nil {
			t.Fatalf("latest loop entry %v, want %v", f.e.LatestLoopEntryTime(), want)
		}
	}
	entered(start)
	f.clock.Step(workQueuePoll)
	entered(start.Add(workQueuePoll))
}

// TestEngineWaitingPodKilled: a pod waiting for its name (a static pod
// whose manifest changed again during the old pod's grace period) that is
// killed before it started is finished with OnTerminated (the static pod
// source counts on it to release the name's mirror pod) and never takes
// the name from the pod that holds it.
func TestEngineWaitingPodKilled(t *testing.T) {
	f := newEngineFixture(t)
	old := enginePod("uid-1", "web", v1.RestartPolicyAlways)
	old.CreationTimestamp = metav1.NewTime(f.clock.Now())
	f.startRunning(t, old)

	waiting := enginePod("uid-2", "web", v1.RestartPolicyAlways)
	waiting.CreationTimestamp = metav1.NewTime(f.clock.Now().Add(time.Minute))
	f.e.UpdatePod(context.Background(), waiting)
	f.eventually(t, "uid-2 idle", func() bool { return !f.e.workers.isWorking("uid-2") })
	f.e.Kill(context.Background(), deleted(waiting, f.clock.Now(), nil))
	f.eventually(t, "uid-2 terminated", func() bool { return f.rt.count("uid-2", "OnTerminated") == 1 })
	if n := f.rt.count("uid-2", "SyncPod"); n != 0 {
		t.Errorf("uid-2 was synced %d times before it was killed: it never had the name", n)
	}

	next := enginePod("uid-3", "web", v1.RestartPolicyAlways)
	next.CreationTimestamp = metav1.NewTime(f.clock.Now().Add(2 * time.Minute))
	f.e.UpdatePod(context.Background(), next)
	f.eventually(t, "uid-3 idle", func() bool { return !f.e.workers.isWorking("uid-3") })
	if n := f.rt.count("uid-3", "SyncPod"); n != 0 {
		t.Fatalf("uid-3 started while uid-1 still runs under the same name")
	}
}

// TestEngineOrphanSweepKeepsWhatTheRuntimeRuns: a runtime orphan that
// could not be handed to a worker (its status unreadable) keeps its pod
// directory (its volumes) and its user namespace range: both go only with
// its termination, after its containers stopped.
func TestEngineOrphanSweepKeepsWhatTheRuntimeRuns(t *testing.T) {
	vols := newFakeVolumes()
	vols.orphans = []types.UID{"uid-o", "uid-gone"}
	un := &fakeUserns{}
	var synced atomic.Bool
	f := newEngineFixture(t, func(c *Config) {
		c.Volumes = vols
		c.UserNamespaces = un
		c.APIPods = func() ([]*v1.Pod, error) { return nil, nil }
		c.APIPodsSynced = synced.Load
	})
	un.rt = f.rt
	orphan := enginePod("uid-o", "gone", v1.RestartPolicyAlways)
	f.rt.mu.Lock()
	f.rt.pods[orphan.UID] = &cri.PodStatus{Ref: cri.RefOf(orphan),
		Sandboxes:  []cri.SandboxStatus{{ID: "o-sb", Ready: true}},
		Containers: []cri.ContainerStatus{{ID: "o-c", Name: "a", Type: cri.ContainerTypeRegular, State: cri.StateRunning}}}
	f.rt.statusErr = map[types.UID]error{"uid-o": errors.New("status unreadable")}
	f.rt.mu.Unlock()
	synced.Store(true)
	f.e.Housekeeping(context.Background())
	vols.mu.Lock()
	cleaned := fmt.Sprint(vols.cleanedUp)
	vols.mu.Unlock()
	if cleaned != "[uid-gone]" {
		t.Errorf("pod directories removed %s, want only uid-gone's (uid-o's containers run)", cleaned)
	}
	un.mu.Lock()
	defer un.mu.Unlock()
	if !un.kept["uid-o"] || un.kept["uid-gone"] {
		t.Errorf("user namespace sweep keeps %v: want uid-o kept, uid-gone not", un.kept)
	}
}

// fakeUserns records the engine's user namespace calls among the
// runtime's calls, and what CleanupOrphans would keep.
type fakeUserns struct {
	rt   *fakeRuntime
	mu   sync.Mutex
	kept map[types.UID]bool // the last CleanupOrphans' verdicts
}

func (u *fakeUserns) Release(uid types.UID) { u.rt.record(event{op: "ReleaseUserns", uid: uid}) }

func (u *fakeUserns) CleanupOrphans(keep func(types.UID) bool) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.kept = map[types.UID]bool{}
	for _, uid := range []types.UID{"uid-1", "uid-o", "uid-gone"} {
		u.kept[uid] = keep(uid)
	}
	return nil
}

// TestEngineUserNamespacesReleased: a pod's user namespace range is
// released once its containers stopped, before its API object goes (the
// kubelet's SyncTerminatedPod); the orphan sweep keeps the range of a
// runtime orphan whose containers still run (released by its own
// termination, after KillPod: by the sweep's verdict the orphan is its
// worker's already, and the runtime's listing would keep it too) and
// frees one nobody has.
func TestEngineUserNamespacesReleased(t *testing.T) {
	var un *fakeUserns
	pod := enginePod("uid-1", "web", v1.RestartPolicyAlways)
	var synced atomic.Bool
	f := newEngineFixture(t, func(c *Config) {
		un = &fakeUserns{}
		c.UserNamespaces = un
		c.APIPods = func() ([]*v1.Pod, error) { return []*v1.Pod{pod}, nil }
		c.APIPodsSynced = synced.Load
	})
	un.rt = f.rt
	f.startRunning(t, pod)
	orphan := enginePod("uid-o", "gone", v1.RestartPolicyAlways)
	f.rt.mu.Lock()
	f.rt.pods[orphan.UID] = &cri.PodStatus{Ref: cri.RefOf(orphan),
		Sandboxes:  []cri.SandboxStatus{{ID: "o-sb", Ready: true}},
		Containers: []cri.ContainerStatus{{ID: "o-c", Name: "a", Type: cri.ContainerTypeRegular, State: cri.StateRunning}}}
	f.rt.mu.Unlock()
	synced.Store(true)
	f.e.Housekeeping(context.Background())
	un.mu.Lock()
	kept := un.kept
	un.mu.Unlock()
	if !kept["uid-1"] || !kept["uid-o"] || kept["uid-gone"] {
		t.Errorf("orphan sweep keeps %v: want the API's pod and the running runtime orphan kept, the unknown one not", kept)
	}
	f.eventually(t, "the runtime orphan's range released", func() bool { return f.rt.count("uid-o", "ReleaseUserns") == 1 })
	seq := f.opSeq("uid-o", "KillPod", "ReleaseUserns")
	if seq[0] != "KillPod" {
		t.Errorf("runtime orphan: %v, want its range released only after KillPod", seq)
	}
	if n := f.rt.count("uid-1", "ReleaseUserns"); n != 0 {
		t.Fatalf("the running pod's range was released %d times", n)
	}

	f.e.Kill(context.Background(), deleted(pod, f.clock.Now(), nil))
	f.relist()
	f.eventually(t, "the pod to be forgotten", func() bool { return f.e.Pod("uid-1") == nil })
	seq = f.opSeq("uid-1", "KillPod", "ReleaseUserns", "OnTerminated")
	if want := []string{"KillPod", "ReleaseUserns", "OnTerminated"}; fmt.Sprint(seq) != fmt.Sprint(want) {
		t.Errorf("termination sequence %v, want %v", seq, want)
	}
}

// TestEngineRestartAllContainers: a container whose exit matches a
// RestartAllContainers rule makes the engine plan the reset of every
// container (the status' AllContainersRestarting condition is True), then
// sync the pod again at once, without waiting for the PLEG or the resync
// (the kubelet's requeue), which starts every container again; the
// published status carries the restart over.
func TestEngineRestartAllContainers(t *testing.T) {
	f := newEngineFixture(t)
	pod := enginePod("uid-1", "web", v1.RestartPolicyNever)
	pod.Spec.Containers = []v1.Container{
		{Name: "src", Image: "busybox:1.36", RestartPolicy: ptr.To(v1.ContainerRestartPolicyNever),
			RestartPolicyRules: []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestartAllContainers,
				ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}},
		{Name: "r", Image: "busybox:1.36"},
	}
	f.startRunning(t, pod)
	f.rt.exitContainer("uid-1", "src", 42)
	f.relist() // the PLEG sees the exit; nothing relists after this
	started := func() bool {
		syncs := f.rt.ops("uid-1", "SyncPod")
		return len(syncs) >= 3 && len(syncs[len(syncs)-1].plan.ContainersToStart) == 2
	}
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return started(), nil })
	if err != nil {
		t.Fatalf("the containers were not started again without a relist; runtime calls: %v", f.rt.ops("uid-1", "SyncPod"))
	}
	syncs := f.rt.ops("uid-1", "SyncPod")
	reset := syncs[len(syncs)-2].plan
	if len(reset.ContainersToReset) != 2 || len(reset.ContainersToStart) != 0 || reset.ContainersToReset[1].Name != "src" {
		t.Errorf("plan before the restart %s %+v, want both containers reset, the source last", reset, reset.ContainersToReset)
	}
	f.eventually(t, "the restart published", func() bool {
		p := f.lastPublished("uid-1")
		if p == nil || len(p.Status.ContainerStatuses) != 2 {
			return false
		}
		for _, cs := range p.Status.ContainerStatuses {
			lt := cs.LastTerminationState.Terminated
			if cs.State.Running == nil || cs.RestartCount != 1 || lt == nil || lt.Reason != status.ReasonRestartingAllContainers {
				return false
			}
		}
		c := podutil.AllContainersRestarting(&p.Spec, &p.Status)
		return !c && p.Status.Phase == v1.PodRunning
	})
}
