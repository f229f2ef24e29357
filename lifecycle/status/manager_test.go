package status

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// smWait bounds every wait for a delivery; it is a deadline, not a sleep.
const smWait = 10 * time.Second

var smEpoch = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

// smRecorder is a Notify that records deliveries and notices overlapping
// calls.
type smRecorder struct {
	ch       chan *v1.Pod
	inflight atomic.Int32
	overlaps atomic.Int32
}

func newSMRecorder() *smRecorder { return &smRecorder{ch: make(chan *v1.Pod, 1024)} }

func (r *smRecorder) notify(p *v1.Pod) {
	if r.inflight.Add(1) > 1 {
		r.overlaps.Add(1)
	}
	r.ch <- p
	r.inflight.Add(-1)
}

// next waits for the next delivery.
func (r *smRecorder) next(t *testing.T) *v1.Pod {
	t.Helper()
	select {
	case p := <-r.ch:
		return p
	case <-time.After(smWait):
		t.Fatal("no Notify within the deadline")
		return nil
	}
}

// nextFor waits for the delivery of uid, failing on any other delivery
// before it.
func (r *smRecorder) nextFor(t *testing.T, uid types.UID) *v1.Pod {
	t.Helper()
	p := r.next(t)
	if p.UID != uid {
		t.Fatalf("Notify delivered pod %s (phase %s), want pod %s next", p.UID, p.Status.Phase, uid)
	}
	return p
}

// expectNone fails if anything was delivered and not yet received.
func (r *smRecorder) expectNone(t *testing.T) {
	t.Helper()
	select {
	case p := <-r.ch:
		t.Fatalf("unexpected Notify for pod %s with phase %s", p.UID, p.Status.Phase)
	default:
	}
}

func newTestStatusManager(t *testing.T) (*Manager, *smRecorder, *clocktesting.FakeClock) {
	t.Helper()
	rec := newSMRecorder()
	clk := clocktesting.NewFakeClock(smEpoch)
	m, err := NewManager(ManagerConfig{Clock: clk, Notify: rec.notify})
	if err != nil {
		t.Fatal(err)
	}
	return m, rec, clk
}

// startRun runs m.Run until the returned function is called; that function
// waits for Run to return.
func startRun(t *testing.T, m *Manager) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(smWait):
				t.Error("Run did not return after its context ended")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func smPod(uid string, policy v1.RestartPolicy, containers ...string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod-" + uid, UID: types.UID(uid)},
		Spec:       v1.PodSpec{RestartPolicy: policy},
	}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c, Image: "img"})
	}
	return p
}

func withInit(p *v1.Pod, sidecar bool, names ...string) *v1.Pod {
	for _, n := range names {
		c := v1.Container{Name: n, Image: "img"}
		if sidecar {
			always := v1.ContainerRestartPolicyAlways
			c.RestartPolicy = &always
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	}
	return p
}

func csRunning(name string) v1.ContainerStatus {
	started := true
	return v1.ContainerStatus{Name: name, Ready: true, Started: &started,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(smEpoch)}}}
}

func csWaiting(name string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: ReasonPodInitializing}}}
}

func csExited(name string, code int32) v1.ContainerStatus {
	reason := "Error"
	if code == 0 {
		reason = "Completed"
	}
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
		ExitCode: code, Reason: reason, StartedAt: metav1.NewTime(smEpoch), FinishedAt: metav1.NewTime(smEpoch.Add(time.Second)),
	}}}
}

func smStatus(phase v1.PodPhase, cs ...v1.ContainerStatus) v1.PodStatus {
	return v1.PodStatus{Phase: phase, ContainerStatuses: cs}
}

func TestNewStatusManager(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg     ManagerConfig
		wantErr bool
	}{
		"no notify":             {cfg: ManagerConfig{}, wantErr: true},
		"notify, default clock": {cfg: ManagerConfig{Notify: func(*v1.Pod) {}}},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := NewManager(tc.cfg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err == nil && m.clock == nil {
				t.Error("clock not defaulted")
			}
		})
	}
}

func TestStatusManagerContainerStateTransition(t *testing.T) {
	for name, tc := range map[string]struct {
		pod *v1.Pod
		// old is set first (or only given as the API status if apiOnly);
		// then new is set.
		old, new v1.PodStatus
		apiOnly  bool
		refused  bool
	}{
		"Never: exit 0 to running refused": {
			pod: smPod("a", v1.RestartPolicyNever, "c"),
			old: smStatus(v1.PodRunning, csExited("c", 0)), new: smStatus(v1.PodRunning, csRunning("c")),
			refused: true,
		},
		"Never: exit 1 to waiting refused": {
			pod: smPod("a", v1.RestartPolicyNever, "c"),
			old: smStatus(v1.PodRunning, csExited("c", 1)), new: smStatus(v1.PodPending, csWaiting("c")),
			refused: true,
		},
		"OnFailure: exit 0 to running refused": {
			pod: smPod("a", v1.RestartPolicyOnFailure, "c"),
			old: smStatus(v1.PodRunning, csExited("c", 0)), new: smStatus(v1.PodRunning, csRunning("c")),
			refused: true,
		},
		"OnFailure: exit 1 to running allowed": {
			pod: smPod("a", v1.RestartPolicyOnFailure, "c"),
			old: smStatus(v1.PodRunning, csExited("c", 1)), new: smStatus(v1.PodRunning, csRunning("c")),
		},
		"Always: exit 0 to running allowed": {
			pod: smPod("a", v1.RestartPolicyAlways, "c"),
			old: smStatus(v1.PodRunning, csExited("c", 0)), new: smStatus(v1.PodRunning, csRunning("c")),
		},
		"no policy (API default Always): allowed": {
			pod: smPod("a", "", "c"),
			old: smStatus(v1.PodRunning, csExited("c", 0)), new: smStatus(v1.PodRunning, csRunning("c")),
		},
		"Never: terminated to terminated allowed": {
			pod: smPod("a", v1.RestartPolicyNever, "c"),
			old: smStatus(v1.PodRunning, csExited("c", 1)), new: smStatus(v1.PodFailed, csExited("c", 2)),
		},
		"Never: only the terminated container counts": {
			pod: smPod("a", v1.RestartPolicyNever, "c", "d"),
			old: smStatus(v1.PodRunning, csExited("c", 0), csWaiting("d")), new: smStatus(v1.PodRunning, csExited("c", 0), csRunning("d")),
		},
		"Never: init container exit 0 to running refused": {
			pod:     withInit(smPod("a", v1.RestartPolicyNever, "c"), false, "i"),
			old:     v1.PodStatus{Phase: v1.PodPending, InitContainerStatuses: []v1.ContainerStatus{csExited("i", 0)}},
			new:     v1.PodStatus{Phase: v1.PodPending, InitContainerStatuses: []v1.ContainerStatus{csRunning("i")}},
			refused: true,
		},
		"OnFailure: init container exit 0 to waiting refused": {
			pod:     withInit(smPod("a", v1.RestartPolicyOnFailure, "c"), false, "i"),
			old:     v1.PodStatus{Phase: v1.PodPending, InitContainerStatuses: []v1.ContainerStatus{csExited("i", 0)}},
			new:     v1.PodStatus{Phase: v1.PodPending, InitContainerStatuses: []v1.ContainerStatus{csWaiting("i")}},
			refused: true,
		},
		"OnFailure: init container exit 1 to running allowed": {
			pod: withInit(smPod("a", v1.RestartPolicyOnFailure, "c"), false, "i"),
			old: v1.PodStatus{Phase: v1.PodPending, InitContainerStatuses: []v1.ContainerStatus{csExited("i", 1)}},
			new: v1.PodStatus{Phase: v1.PodPending, InitContainerStatuses: []v1.ContainerStatus{csRunning("i")}},
		},
		"Never: sidecar exit 0 to running allowed": {
			pod: withInit(smPod("a", v1.RestartPolicyNever, "c"), true, "side"),
			old: v1.PodStatus{Phase: v1.PodRunning, InitContainerStatuses: []v1.ContainerStatus{csExited("side", 0)}},
			new: v1.PodStatus{Phase: v1.PodRunning, InitContainerStatuses: []v1.ContainerStatus{csRunning("side")}},
		},
		"Never: API status stands for an uncached pod": {
			pod: smPod("a", v1.RestartPolicyNever, "c"),
			old: smStatus(v1.PodRunning, csExited("c", 0)), new: smStatus(v1.PodPending, csWaiting("c")),
			apiOnly: true, refused: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			m, _, _ := newTestStatusManager(t)
			pod := tc.pod
			if tc.apiOnly {
				pod = pod.DeepCopy()
				pod.Status = tc.old
			} else {
				m.SetPodStatus(pod, tc.old)
			}
			before, hadBefore := m.GetPodStatus(pod.UID)
			v := m.Version(pod.UID)

			m.SetPodStatus(pod, tc.new)

			got, ok := m.GetPodStatus(pod.UID)
			if tc.refused {
				if m.Version(pod.UID) != v {
					t.Errorf("version moved from %d to %d on a refused update", v, m.Version(pod.UID))
				}
				if ok != hadBefore || !equality.Semantic.DeepEqual(got, before) {
					t.Errorf("refused update changed the cached status:\n got  %+v\n want %+v", got, before)
				}
				return
			}
			if !ok || m.Version(pod.UID) <= v {
				t.Fatalf("update not taken: cached %v, version %d -> %d", ok, v, m.Version(pod.UID))
			}
			want := append(append([]v1.ContainerStatus(nil), tc.new.InitContainerStatuses...), tc.new.ContainerStatuses...)
			have := append(append([]v1.ContainerStatus(nil), got.InitContainerStatuses...), got.ContainerStatuses...)
			if !equality.Semantic.DeepEqual(have, want) {
				t.Errorf("container statuses:\n got  %+v\n want %+v", have, want)
			}
		})
	}
}

func TestStatusManagerVersionOnlyIncreases(t *testing.T) {
	pod := smPod("a", v1.RestartPolicyNever, "c")
	other := smPod("b", v1.RestartPolicyNever, "c")
	running := smStatus(v1.PodRunning, csRunning("c"))
	done := smStatus(v1.PodSucceeded, csExited("c", 0))
	steps := []struct {
		name    string
		do      func(m *Manager)
		changed bool // whether pod's version must change (it may only grow)
	}{
		{"first status", func(m *Manager) { m.SetPodStatus(pod, running) }, true},
		{"same status", func(m *Manager) { m.SetPodStatus(pod, running) }, false},
		{"another pod", func(m *Manager) { m.SetPodStatus(other, running) }, false},
		{"new status", func(m *Manager) { m.SetPodStatus(pod, done) }, true},
		{"refused transition", func(m *Manager) { m.SetPodStatus(pod, running) }, false},
		{"terminate a terminated pod", func(m *Manager) { m.TerminatePod(pod) }, false},
		{"removed", func(m *Manager) { m.RemovePod(pod.UID) }, true},
		{"set again after removal", func(m *Manager) { m.SetPodStatus(pod, running) }, true},
	}
	m, _, _ := newTestStatusManager(t)
	var highest uint64
	prev := m.Version(pod.UID)
	for _, s := range steps {
		s.do(m)
		v := m.Version(pod.UID)
		switch {
		case s.name == "removed":
			if v != 0 {
				t.Fatalf("%s: version %d, want 0 for an unknown pod", s.name, v)
			}
		case s.changed && v <= highest:
			t.Fatalf("%s: version %d, want more than %d", s.name, v, highest)
		case !s.changed && v != prev:
			t.Fatalf("%s: version moved from %d to %d", s.name, prev, v)
		}
		highest = max(highest, v)
		prev = v
	}
}

func TestStatusManagerTerminalPhaseIsFinal(t *testing.T) {
	readyTrue := []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}, {Type: v1.ContainersReady, Status: v1.ConditionTrue}}
	for name, tc := range map[string]struct {
		cached   v1.PodPhase // set first unless empty
		api      v1.PodPhase // the pod's API status phase
		set      v1.PodPhase
		want     v1.PodPhase
		wantWhy  string // Reason of Ready/ContainersReady when False
		setReady bool   // the status set says Ready
	}{
		"Failed stays Failed":              {cached: v1.PodFailed, set: v1.PodRunning, want: v1.PodFailed, setReady: true, wantWhy: reasonPodFailed},
		"Succeeded stays Succeeded":        {cached: v1.PodSucceeded, set: v1.PodPending, want: v1.PodSucceeded, setReady: true, wantWhy: reasonPodCompleted},
		"Succeeded does not become Failed": {cached: v1.PodSucceeded, set: v1.PodFailed, want: v1.PodSucceeded},
		"API's terminal phase is final":    {api: v1.PodFailed, set: v1.PodRunning, want: v1.PodFailed, setReady: true, wantWhy: reasonPodFailed},
		"Running may end":                  {cached: v1.PodRunning, set: v1.PodSucceeded, want: v1.PodSucceeded},
		"Pending may run":                  {cached: v1.PodPending, set: v1.PodRunning, want: v1.PodRunning, setReady: true},
	} {
		t.Run(name, func(t *testing.T) {
			m, _, _ := newTestStatusManager(t)
			pod := smPod("a", v1.RestartPolicyAlways, "c")
			pod.Status.Phase = tc.api
			if tc.cached != "" {
				m.SetPodStatus(pod, smStatus(tc.cached, csRunning("c")))
			}
			st := smStatus(tc.set, csRunning("c"))
			if tc.setReady {
				st.Conditions = readyTrue
			}
			m.SetPodStatus(pod, st)
			got, _ := m.GetPodStatus(pod.UID)
			if got.Phase != tc.want {
				t.Errorf("phase %s, want %s", got.Phase, tc.want)
			}
			for _, c := range got.Conditions {
				terminal := tc.want == v1.PodSucceeded || tc.want == v1.PodFailed
				if terminal && c.Status == v1.ConditionTrue {
					t.Errorf("terminal pod has condition %s True", c.Type)
				}
				if terminal && tc.wantWhy != "" && c.Reason != tc.wantWhy {
					t.Errorf("condition %s reason %q, want %q", c.Type, c.Reason, tc.wantWhy)
				}
			}
		})
	}
}

// TestStatusManagerLateStatusKeepsTheCause: a status generated before an
// eviction's final status and set after it (a readiness probe's republish
// racing SyncTerminatingPod) keeps the terminal phase, its reason and
// message and the DisruptionTarget condition.
func TestStatusManagerLateStatusKeepsTheCause(t *testing.T) {
	m, _, _ := newTestStatusManager(t)
	pod := smPod("a", v1.RestartPolicyAlways, "c")
	final := smStatus(v1.PodFailed, csRunning("c"))
	final.Reason, final.Message = "Evicted", "The node was low on resource: memory."
	dt := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonTerminationByKubelet, Message: "Pod was evicted"}
	final.Conditions = append(final.Conditions, dt)
	m.SetPodStatus(pod, final)
	late := smStatus(v1.PodRunning, csRunning("c"))
	late.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	m.SetPodStatus(pod, late)
	// And one generated Failed, without the cause, from containers that
	// had exited before the eviction.
	m.SetPodStatus(pod, smStatus(v1.PodFailed, csRunning("c")))
	got, _ := m.GetPodStatus(pod.UID)
	if got.Phase != v1.PodFailed || got.Reason != final.Reason || got.Message != final.Message {
		t.Errorf("status %s %q %q, want Failed %q %q", got.Phase, got.Reason, got.Message, final.Reason, final.Message)
	}
	found := false
	for _, c := range got.Conditions {
		if c.Type == v1.DisruptionTarget {
			found = c.Status == v1.ConditionTrue && c.Reason == dt.Reason
		}
	}
	if !found {
		t.Errorf("conditions %+v: the DisruptionTarget was lost", got.Conditions)
	}
}

func TestStatusManagerConditions(t *testing.T) {
	t0 := metav1.NewTime(smEpoch.Add(-time.Hour))
	later := smEpoch.Add(time.Minute)
	cond := func(typ v1.PodConditionType, s v1.ConditionStatus, ltt metav1.Time) v1.PodCondition {
		return v1.PodCondition{Type: typ, Status: s, LastTransitionTime: ltt}
	}
	for name, tc := range map[string]struct {
		api   []v1.PodCondition // the pod's API conditions
		first []v1.PodCondition // set at smEpoch, unless nil
		then  []v1.PodCondition // set at later
		want  []v1.PodCondition
	}{
		"missing time filled": {
			then: []v1.PodCondition{cond(v1.PodReady, v1.ConditionFalse, metav1.Time{})},
			want: []v1.PodCondition{cond(v1.PodReady, v1.ConditionFalse, metav1.NewTime(later))},
		},
		"unchanged status keeps its time": {
			first: []v1.PodCondition{cond(v1.PodReady, v1.ConditionTrue, t0)},
			then:  []v1.PodCondition{cond(v1.PodReady, v1.ConditionTrue, metav1.NewTime(later))},
			want:  []v1.PodCondition{cond(v1.PodReady, v1.ConditionTrue, t0)},
		},
		"changed status without a time gets now": {
			first: []v1.PodCondition{cond(v1.PodReady, v1.ConditionTrue, t0)},
			then:  []v1.PodCondition{cond(v1.PodReady, v1.ConditionFalse, metav1.Time{})},
			want:  []v1.PodCondition{cond(v1.PodReady, v1.ConditionFalse, metav1.NewTime(later))},
		},
		"changed status keeps the caller's time": {
			first: []v1.PodCondition{cond(v1.PodReady, v1.ConditionTrue, t0)},
			then:  []v1.PodCondition{cond(v1.PodReady, v1.ConditionFalse, metav1.NewTime(smEpoch))},
			want:  []v1.PodCondition{cond(v1.PodReady, v1.ConditionFalse, metav1.NewTime(smEpoch))},
		},
		"API's time of a previous status is kept": {
			api:  []v1.PodCondition{cond(v1.PodInitialized, v1.ConditionTrue, t0)},
			then: []v1.PodCondition{cond(v1.PodInitialized, v1.ConditionTrue, metav1.Time{})},
			want: []v1.PodCondition{cond(v1.PodInitialized, v1.ConditionTrue, t0)},
		},
		"other writers' conditions come from the API": {
			api: []v1.PodCondition{
				cond(v1.PodReady, v1.ConditionFalse, t0), // owned by the node: ignored
				cond(v1.PodScheduled, v1.ConditionTrue, t0),
				cond("example.com/gate", v1.ConditionTrue, t0),
			},
			then: []v1.PodCondition{
				cond(v1.PodReady, v1.ConditionTrue, metav1.NewTime(later)),
				cond(v1.PodScheduled, v1.ConditionFalse, metav1.NewTime(later)), // stale copy
				cond(v1.DisruptionTarget, v1.ConditionTrue, metav1.Time{}),      // not in the API yet: kept
			},
			want: []v1.PodCondition{
				cond(v1.PodReady, v1.ConditionTrue, metav1.NewTime(later)),
				cond(v1.PodScheduled, v1.ConditionTrue, t0),
				cond(v1.DisruptionTarget, v1.ConditionTrue, metav1.NewTime(later)),
				cond("example.com/gate", v1.ConditionTrue, t0),
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			m, _, clk := newTestStatusManager(t)
			pod := smPod("a", v1.RestartPolicyAlways, "c")
			pod.Status.Conditions = tc.api
			if tc.first != nil {
				m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodRunning, Conditions: tc.first})
			}
			clk.SetTime(later)
			m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodRunning, Conditions: tc.then})
			got, _ := m.GetPodStatus(pod.UID)
			if !equality.Semantic.DeepEqual(got.Conditions, tc.want) {
				t.Errorf("conditions:\n got  %+v\n want %+v", got.Conditions, tc.want)
			}
		})
	}
}

func TestStatusManagerStartTimeAndNormalization(t *testing.T) {
	nanos := smEpoch.Add(123456789 * time.Nanosecond)
	t0 := metav1.NewTime(smEpoch.Add(-time.Hour))
	for name, tc := range map[string]struct {
		first, then    *metav1.Time // StartTime of the two statuses set; first nil: set only then
		setFirst       bool
		want           metav1.Time
		wantNewVersion bool
	}{
		"missing start time is now":      {then: nil, want: metav1.NewTime(smEpoch.Add(time.Minute)), wantNewVersion: true},
		"start time is kept once set":    {setFirst: true, first: &t0, then: ptrTime(metav1.NewTime(smEpoch)), want: t0},
		"start time truncated to second": {then: ptrTime(metav1.NewTime(nanos)), want: metav1.NewTime(smEpoch), wantNewVersion: true},
		"sub-second difference is no change": {
			setFirst: true, first: ptrTime(metav1.NewTime(smEpoch)), then: ptrTime(metav1.NewTime(nanos)), want: metav1.NewTime(smEpoch),
		},
	} {
		t.Run(name, func(t *testing.T) {
			m, _, clk := newTestStatusManager(t)
			pod := smPod("a", v1.RestartPolicyAlways, "c")
			status := func(start *metav1.Time, startedAt time.Time) v1.PodStatus {
				cs := csRunning("c")
				cs.State.Running.StartedAt = metav1.NewTime(startedAt)
				return v1.PodStatus{Phase: v1.PodRunning, StartTime: start, ContainerStatuses: []v1.ContainerStatus{cs}}
			}
			if tc.setFirst {
				m.SetPodStatus(pod, status(tc.first, smEpoch))
			}
			v := m.Version(pod.UID)
			clk.Step(time.Minute)
			m.SetPodStatus(pod, status(tc.then, nanos)) // StartedAt differs below a second only
			got, _ := m.GetPodStatus(pod.UID)
			if got.StartTime == nil || !got.StartTime.Equal(&tc.want) {
				t.Errorf("StartTime %v, want %v", got.StartTime, tc.want)
			}
			if ts := got.ContainerStatuses[0].State.Running.StartedAt; ts.Nanosecond() != 0 {
				t.Errorf("StartedAt %v not truncated to seconds", ts)
			}
			if changed := m.Version(pod.UID) != v; changed != tc.wantNewVersion {
				t.Errorf("version changed = %v, want %v", changed, tc.wantNewVersion)
			}
		})
	}
}

func ptrTime(t metav1.Time) *metav1.Time { return &t }

func TestStatusManagerNormalizeOrderAndMessage(t *testing.T) {
	pod := withInit(smPod("a", v1.RestartPolicyNever, "b", "a"), false, "z", "y")
	long := make([]byte, maxTerminationMessageBytesPod)
	for i := range long {
		long[i] = 'x'
	}
	exited := csExited("b", 1)
	exited.State.Terminated.Message = string(long)
	m, _, _ := newTestStatusManager(t)
	m.SetPodStatus(pod, v1.PodStatus{
		Phase:                 v1.PodFailed,
		InitContainerStatuses: []v1.ContainerStatus{csExited("y", 0), csExited("z", 0)},
		ContainerStatuses:     []v1.ContainerStatus{exited, csExited("a", 0)},
	})
	got, _ := m.GetPodStatus(pod.UID)
	var names []string
	for _, cs := range append(got.InitContainerStatuses, got.ContainerStatuses...) {
		names = append(names, cs.Name)
	}
	if fmt.Sprint(names) != "[z y a b]" {
		t.Errorf("container order %v, want init in spec order then by name: [z y a b]", names)
	}
	if n := len(got.ContainerStatuses[1].State.Terminated.Message); n != maxTerminationMessageBytesPod/4 {
		t.Errorf("termination message of %d bytes, want %d", n, maxTerminationMessageBytesPod/4)
	}
}

func TestStatusManagerCoalescesBurst(t *testing.T) {
	m, rec, _ := newTestStatusManager(t)
	pod := smPod("a", v1.RestartPolicyAlways, "c")
	for _, phase := range []v1.PodPhase{v1.PodPending, v1.PodRunning, v1.PodSucceeded} {
		m.SetPodStatus(pod, smStatus(phase, csRunning("c")))
	}
	startRun(t, m)
	got := rec.nextFor(t, pod.UID)
	if got.Status.Phase != v1.PodSucceeded {
		t.Errorf("delivered phase %s, want the newest, %s", got.Status.Phase, v1.PodSucceeded)
	}
	if got.Name != pod.Name || got.Namespace != pod.Namespace || got.Spec.RestartPolicy != pod.Spec.RestartPolicy {
		t.Errorf("delivered pod lost its identity or spec: %+v", got.ObjectMeta)
	}
	// A sentinel pod: deliveries come in order from one goroutine, so
	// once it arrives any second delivery of pod a would have too.
	sentinel := smPod("sentinel", v1.RestartPolicyAlways, "c")
	m.SetPodStatus(sentinel, smStatus(v1.PodRunning, csRunning("c")))
	rec.nextFor(t, sentinel.UID)
	rec.expectNone(t)
}

func TestStatusManagerEqualStatusNotDeliveredTwice(t *testing.T) {
	pod := smPod("a", v1.RestartPolicyAlways, "c")
	a := smStatus(v1.PodRunning, csRunning("c"))
	b := smStatus(v1.PodPending, csWaiting("c"))
	aNanos := *a.DeepCopy()
	aNanos.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(smEpoch.Add(time.Millisecond))
	for name, tc := range map[string]struct {
		// after sets these once a has been delivered and Run stopped.
		after []v1.PodStatus
	}{
		"same status again":                 {after: []v1.PodStatus{a}},
		"same status below a second":        {after: []v1.PodStatus{aNanos}},
		"changed and back before delivered": {after: []v1.PodStatus{b, a}},
	} {
		t.Run(name, func(t *testing.T) {
			m, rec, _ := newTestStatusManager(t)
			stop := startRun(t, m)
			m.SetPodStatus(pod, a)
			rec.nextFor(t, pod.UID)
			stop()
			for _, s := range tc.after {
				m.SetPodStatus(pod, s)
			}
			startRun(t, m)
			sentinel := smPod("sentinel", v1.RestartPolicyAlways, "c")
			m.SetPodStatus(sentinel, a)
			rec.nextFor(t, sentinel.UID)
			rec.expectNone(t)
		})
	}
}

func TestStatusManagerTerminatePod(t *testing.T) {
	unknown := func(name string) v1.ContainerStatus {
		started := false
		return v1.ContainerStatus{Name: name, Started: &started, State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			Reason: ReasonContainerStatusUnknown, Message: messageContainerNotLocated, ExitCode: 137,
		}}}
	}
	for name, tc := range map[string]struct {
		pod       *v1.Pod
		status    v1.PodStatus // cached first, unless apiOnly
		apiOnly   bool
		wantPhase v1.PodPhase
		wantInit  []v1.ContainerStatus
		want      []v1.ContainerStatus
	}{
		"running containers become unknown, 137": {
			pod:       smPod("a", v1.RestartPolicyAlways, "c", "d"),
			status:    smStatus(v1.PodRunning, csRunning("c"), csExited("d", 0)),
			wantPhase: v1.PodFailed,
			want:      []v1.ContainerStatus{unknown("c"), csExited("d", 0)},
		},
		"all succeeded: Succeeded kept": {
			pod:       smPod("a", v1.RestartPolicyNever, "c"),
			status:    smStatus(v1.PodSucceeded, csExited("c", 0)),
			wantPhase: v1.PodSucceeded,
			want:      []v1.ContainerStatus{csExited("c", 0)},
		},
		"Pending becomes Failed": {
			pod:       smPod("a", v1.RestartPolicyNever, "c"),
			status:    smStatus(v1.PodPending, csWaiting("c")),
			wantPhase: v1.PodFailed,
			want:      []v1.ContainerStatus{unknown("c")},
		},
		"not initialized: started init containers only": {
			pod: withInit(smPod("a", v1.RestartPolicyNever, "c"), false, "i1", "i2", "i3"),
			status: v1.PodStatus{
				Phase:                 v1.PodPending,
				InitContainerStatuses: []v1.ContainerStatus{csExited("i1", 0), csRunning("i2"), csWaiting("i3")},
				ContainerStatuses:     []v1.ContainerStatus{csWaiting("c")},
			},
			wantPhase: v1.PodFailed,
			wantInit:  []v1.ContainerStatus{csExited("i1", 0), unknown("i2"), csWaiting("i3")},
			want:      []v1.ContainerStatus{csWaiting("c")},
		},
		"no init container started: the first is marked": {
			pod: withInit(smPod("a", v1.RestartPolicyNever, "c"), false, "i1", "i2"),
			status: v1.PodStatus{
				Phase:                 v1.PodPending,
				InitContainerStatuses: []v1.ContainerStatus{csWaiting("i1"), csWaiting("i2")},
				ContainerStatuses:     []v1.ContainerStatus{csWaiting("c")},
			},
			wantPhase: v1.PodFailed,
			wantInit:  []v1.ContainerStatus{unknown("i1"), csWaiting("i2")},
			want:      []v1.ContainerStatus{csWaiting("c")},
		},
		"initialized: running sidecar and regular containers marked": {
			pod: withInit(smPod("a", v1.RestartPolicyNever, "c"), true, "side"),
			status: v1.PodStatus{
				Phase:                 v1.PodRunning,
				InitContainerStatuses: []v1.ContainerStatus{csRunning("side")},
				ContainerStatuses:     []v1.ContainerStatus{csRunning("c")},
			},
			wantPhase: v1.PodFailed,
			wantInit:  []v1.ContainerStatus{unknown("side")},
			want:      []v1.ContainerStatus{unknown("c")},
		},
		"static pod: containers unknown, phase kept (the kubelet's TODO(#116484))": {
			pod: func() *v1.Pod {
				p := smPod("a", v1.RestartPolicyAlways, "c")
				p.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
				return p
			}(),
			status:    smStatus(v1.PodRunning, csRunning("c")),
			wantPhase: v1.PodRunning,
			want:      []v1.ContainerStatus{unknown("c")},
		},
		"uncached pod: its API status is terminated": {
			pod:       smPod("a", v1.RestartPolicyAlways, "c"),
			status:    smStatus(v1.PodRunning, csRunning("c")),
			apiOnly:   true,
			wantPhase: v1.PodFailed,
			want:      []v1.ContainerStatus{unknown("c")},
		},
	} {
		t.Run(name, func(t *testing.T) {
			m, rec, _ := newTestStatusManager(t)
			pod := tc.pod.DeepCopy()
			if tc.apiOnly {
				pod.Status = tc.status
			} else {
				m.SetPodStatus(pod, tc.status)
			}
			before, _ := m.GetPodStatus(pod.UID)
			v := m.Version(pod.UID)
			m.TerminatePod(pod)
			got, ok := m.GetPodStatus(pod.UID)
			if !ok {
				t.Fatal("no cached status after TerminatePod")
			}
			if got.Phase != tc.wantPhase {
				t.Errorf("phase %s, want %s", got.Phase, tc.wantPhase)
			}
			if !equality.Semantic.DeepEqual(got.InitContainerStatuses, tc.wantInit) {
				t.Errorf("init container statuses:\n got  %+v\n want %+v", got.InitContainerStatuses, tc.wantInit)
			}
			if !equality.Semantic.DeepEqual(got.ContainerStatuses, tc.want) {
				t.Errorf("container statuses:\n got  %+v\n want %+v", got.ContainerStatuses, tc.want)
			}
			if changed := !equality.Semantic.DeepEqual(before, got); changed != (m.Version(pod.UID) > v) {
				t.Errorf("status changed = %v but version %d -> %d", changed, v, m.Version(pod.UID))
			}
			startRun(t, m)
			if d := rec.nextFor(t, pod.UID); !equality.Semantic.DeepEqual(d.Status, got) {
				t.Errorf("delivered status differs from the cached one:\n got  %+v\n want %+v", d.Status, got)
			}
		})
	}
}

func TestStatusManagerRemovePod(t *testing.T) {
	m, rec, _ := newTestStatusManager(t)
	a := smPod("a", v1.RestartPolicyAlways, "c")
	b := smPod("b", v1.RestartPolicyAlways, "c")
	m.SetPodStatus(a, smStatus(v1.PodRunning, csRunning("c")))
	m.SetPodStatus(b, smStatus(v1.PodRunning, csRunning("c")))
	m.RemovePod(a.UID)

	if _, ok := m.GetPodStatus(a.UID); ok {
		t.Error("removed pod still has a status")
	}
	if v := m.Version(a.UID); v != 0 {
		t.Errorf("removed pod has version %d", v)
	}
	pods := m.Pods()
	if len(pods) != 1 || pods[0].UID != b.UID || pods[0].Status.Phase != v1.PodRunning {
		t.Fatalf("Pods() = %+v, want only pod b with its status", pods)
	}
	// Pods and GetPodStatus hand out copies.
	pods[0].Status.Phase = v1.PodFailed
	st, _ := m.GetPodStatus(b.UID)
	st.ContainerStatuses[0].Name = "mutated"
	if again, _ := m.GetPodStatus(b.UID); again.Phase != v1.PodRunning || again.ContainerStatuses[0].Name != "c" {
		t.Error("mutating a returned pod or status changed the cache")
	}

	// The removed pod's undelivered status is dropped.
	startRun(t, m)
	rec.nextFor(t, b.UID)
	rec.expectNone(t)
}

func TestStatusManagerNotifyNeverConcurrent(t *testing.T) {
	const writers, updates = 8, 40
	var (
		mu        sync.Mutex
		delivered = map[types.UID]v1.PodPhase{}
		m         *Manager
	)
	rec := newSMRecorder()
	m, err := NewManager(ManagerConfig{
		Clock: clocktesting.NewFakeClock(smEpoch),
		Notify: func(p *v1.Pod) {
			// Notify may call back into the manager: no lock is held.
			m.GetPodStatus(p.UID)
			mu.Lock()
			delivered[p.UID] = p.Status.Phase
			mu.Unlock()
			rec.notify(p)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Two Runs: one must refuse and return at once.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runDone := make(chan struct{}, 2)
	for range 2 {
		go func() {
			m.Run(ctx)
			runDone <- struct{}{}
		}()
	}
	select {
	case <-runDone:
	case <-time.After(smWait):
		t.Fatal("a second concurrent Run did not return")
	}

	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pod := smPod(fmt.Sprintf("p%d", w), v1.RestartPolicyAlways, "c")
			for i := range updates {
				phase := v1.PodPending
				switch {
				case i == updates-1:
					phase = v1.PodSucceeded // final: nothing follows it
				case i%2 == 1:
					phase = v1.PodRunning
				}
				m.SetPodStatus(pod, smStatus(phase, csRunning("c")))
			}
		}()
	}
	wg.Wait()

	// Wait until every pod's final status (Succeeded) was delivered.
	deadline := time.After(smWait)
	for {
		mu.Lock()
		n := 0
		for _, p := range delivered {
			if p == v1.PodSucceeded {
				n++
			}
		}
		mu.Unlock()
		if n == writers {
			break
		}
		select {
		case <-rec.ch:
		case <-deadline:
			t.Fatalf("only %d of %d pods had their final status delivered", n, writers)
		}
	}
	if o := rec.overlaps.Load(); o != 0 {
		t.Errorf("Notify ran concurrently %d times", o)
	}
	cancel()
	select {
	case <-runDone:
	case <-time.After(smWait):
		t.Fatal("Run did not return after its context ended")
	}
}

// TestStatusManagerHoldsTerminalPhaseWhileContainersMayRun: the kubelet's
// mergePodStatus rule. A terminal phase is delivered only once the pod
// could have no running container; until then the phase, reason and
// message stay those last delivered (or the API's), the rest is new. Once
// the termination completed, setting the same status delivers it.
func TestStatusManagerHoldsTerminalPhaseWhileContainersMayRun(t *testing.T) {
	var running atomic.Bool
	running.Store(true)
	rec := newSMRecorder()
	m, err := NewManager(ManagerConfig{Clock: clocktesting.NewFakeClock(smEpoch), Notify: rec.notify,
		CouldHaveRunningContainers: func(types.UID) bool { return running.Load() }})
	if err != nil {
		t.Fatal(err)
	}
	startRun(t, m)
	pod := smPod("a", v1.RestartPolicyNever, "c")
	m.SetPodStatus(pod, smStatus(v1.PodRunning, csRunning("c")))
	if got := rec.nextFor(t, pod.UID); got.Status.Phase != v1.PodRunning {
		t.Fatalf("first delivery phase %s, want Running", got.Status.Phase)
	}

	done := smStatus(v1.PodSucceeded, csExited("c", 0))
	m.SetPodStatus(pod, done)
	got := rec.nextFor(t, pod.UID)
	if got.Status.Phase != v1.PodRunning {
		t.Errorf("phase delivered while containers may run: %s, want Running (held)", got.Status.Phase)
	}
	if cs := got.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil {
		t.Errorf("held delivery lost the new container states: %+v", cs)
	}
	if err := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), smWait)
		defer cancel()
		return m.WaitDelivered(ctx, pod.UID)
	}(); err != nil {
		t.Errorf("WaitDelivered with the phase held: %v, want nil (what may be published is)", err)
	}

	running.Store(false)
	m.SetPodStatus(pod, done) // SyncTerminatedPod's, equal to the cached one
	if got := rec.nextFor(t, pod.UID); got.Status.Phase != v1.PodSucceeded {
		t.Errorf("phase delivered once stopped: %s, want Succeeded", got.Status.Phase)
	}
	sentinel := smPod("sentinel", v1.RestartPolicyAlways, "c")
	m.SetPodStatus(sentinel, smStatus(v1.PodRunning, csRunning("c")))
	rec.nextFor(t, sentinel.UID)
	rec.expectNone(t)
}

// TestStatusManagerHeldPhaseFromTheAPI: before any delivery, a held
// terminal phase is replaced by the API's phase, reason and message.
func TestStatusManagerHeldPhaseFromTheAPI(t *testing.T) {
	rec := newSMRecorder()
	m, err := NewManager(ManagerConfig{Clock: clocktesting.NewFakeClock(smEpoch), Notify: rec.notify,
		CouldHaveRunningContainers: func(types.UID) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	pod := smPod("a", v1.RestartPolicyNever, "c")
	pod.Status = v1.PodStatus{Phase: v1.PodPending}
	failed := smStatus(v1.PodFailed, csExited("c", 1))
	failed.Reason, failed.Message = "DeadlineExceeded", "Pod was active on the node longer than the specified deadline"
	m.SetPodStatus(pod, failed)
	startRun(t, m)
	got := rec.nextFor(t, pod.UID)
	if got.Status.Phase != v1.PodPending || got.Status.Reason != "" || got.Status.Message != "" {
		t.Errorf("delivered phase %s reason %q message %q, want the API's Pending without reason", got.Status.Phase, got.Status.Reason, got.Status.Message)
	}
	if st, _ := m.GetPodStatus(pod.UID); st.Phase != v1.PodFailed {
		t.Errorf("cached phase %s, want Failed (only the delivery is held)", st.Phase)
	}
}
