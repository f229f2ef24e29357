package prober

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

// scriptedExec returns the exit codes it is given, one per call (the last
// one repeats), safe for concurrent use.
type scriptedExec struct {
	mu    sync.Mutex
	codes []int32
	calls int
}

func (s *scriptedExec) ExecSync(context.Context, string, []string, time.Duration) ([]byte, []byte, int32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	code := s.codes[len(s.codes)-1]
	if len(s.codes) > 1 {
		s.codes = s.codes[1:]
	}
	return []byte("out"), nil, code, nil
}

func (s *scriptedExec) set(codes ...int32) {
	s.mu.Lock()
	s.codes = codes
	s.mu.Unlock()
}

func (s *scriptedExec) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// statuses is a fake of the engine's published statuses.
type statuses struct {
	mu sync.Mutex
	m  map[types.UID]v1.PodStatus
}

func (s *statuses) get(uid types.UID) (v1.PodStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.m[uid]
	return st, ok
}

func (s *statuses) set(uid types.UID, st v1.PodStatus) {
	s.mu.Lock()
	s.m[uid] = st
	s.mu.Unlock()
}

type recordedUpdates struct {
	mu sync.Mutex
	u  []Update
}

func (r *recordedUpdates) add(u Update) {
	r.mu.Lock()
	r.u = append(r.u, u)
	r.mu.Unlock()
}

func (r *recordedUpdates) all() []Update {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Update(nil), r.u...)
}

type fakeMetrics struct {
	mu     sync.Mutex
	counts map[string]int
}

func (f *fakeMetrics) Observe(l MetricLabels, result string, _ time.Duration) {
	f.mu.Lock()
	f.counts[l.ProbeType+"/"+result]++
	f.mu.Unlock()
}
func (f *fakeMetrics) Forget(MetricLabels) {}
func (f *fakeMetrics) get(k string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[k]
}

type fixture struct {
	clk     *clocktesting.FakeClock
	exec    *scriptedExec
	status  *statuses
	updates *recordedUpdates
	events  *record.FakeRecorder
	metrics *fakeMetrics
	m       *Manager
	cancel  context.CancelFunc
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{
		clk:     clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		exec:    &scriptedExec{codes: []int32{0}},
		status:  &statuses{m: map[types.UID]v1.PodStatus{}},
		updates: &recordedUpdates{},
		events:  record.NewFakeRecorder(100),
		metrics: &fakeMetrics{counts: map[string]int{}},
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	t.Cleanup(cancel)
	m, err := NewManager(ctx, Config{Exec: f.exec, Status: f.status.get, OnChange: f.updates.add, Recorder: f.events, Metrics: f.metrics, Clock: f.clk})
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	return f
}

func probePod(probe func(c *v1.Container)) *v1.Pod {
	c := v1.Container{Name: "app"}
	probe(&c)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"},
		Spec:       v1.PodSpec{Containers: []v1.Container{c}, RestartPolicy: v1.RestartPolicyAlways},
	}
}

func execProbeSpec(initialDelay, period, success, failure int32) *v1.Probe {
	return &v1.Probe{
		ProbeHandler:        v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}},
		InitialDelaySeconds: initialDelay, PeriodSeconds: period, TimeoutSeconds: 1,
		SuccessThreshold: success, FailureThreshold: failure,
	}
}

// running is a pod status with the container running since start.
func running(id string, start time.Time, started bool) v1.PodStatus {
	return v1.PodStatus{
		Phase: v1.PodRunning, PodIP: "127.0.0.1",
		ContainerStatuses: []v1.ContainerStatus{{
			Name: "app", ContainerID: "containerd://" + id, Started: &started,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(start)}},
		}},
	}
}

func TestWorkerThresholds(t *testing.T) {
	type step struct {
		advance time.Duration
		code    int32 // exit code of the probe run at this step
		want    Result
		known   bool
		probed  bool
	}
	for _, tc := range []struct {
		name  string
		typ   ProbeType
		probe *v1.Probe
		steps []step
	}{
		{
			name: "readiness starts as failure and needs successThreshold successes", typ: Readiness,
			probe: execProbeSpec(0, 1, 2, 3),
			steps: []step{
				{code: 0, want: Failure, known: true, probed: true},
				{advance: time.Second, code: 0, want: Success, known: true, probed: true},
				{advance: time.Second, code: 1, want: Success, known: true, probed: true},
				{advance: time.Second, code: 1, want: Success, known: true, probed: true},
				{advance: time.Second, code: 1, want: Failure, known: true, probed: true},
				{advance: time.Second, code: 0, want: Failure, known: true, probed: true},
				{advance: time.Second, code: 0, want: Success, known: true, probed: true},
			},
		},
		{
			name: "readiness waits for initialDelaySeconds", typ: Readiness,
			probe: execProbeSpec(10, 1, 1, 3),
			steps: []step{
				{code: 0, want: Failure, known: true},
				{advance: 9 * time.Second, code: 0, want: Failure, known: true},
				{advance: time.Second, code: 0, want: Success, known: true, probed: true},
			},
		},
		{
			name: "liveness starts as success, fails after failureThreshold and holds", typ: Liveness,
			probe: execProbeSpec(0, 1, 1, 2),
			steps: []step{
				{code: 1, want: Success, known: true, probed: true},
				{advance: time.Second, code: 1, want: Failure, known: true, probed: true},
				// On hold: not probed again until the container is replaced.
				{advance: time.Second, code: 0, want: Failure, known: true},
			},
		},
		{
			name: "startup unknown until success, then stops probing", typ: Startup,
			probe: execProbeSpec(0, 1, 1, 3),
			steps: []step{
				{code: 1, want: Unknown, known: true, probed: true},
				{advance: time.Second, code: 0, want: Success, known: true, probed: true},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			pod := probePod(func(c *v1.Container) {
				switch tc.typ {
				case Liveness:
					c.LivenessProbe = tc.probe
				case Readiness:
					c.ReadinessProbe = tc.probe
				case Startup:
					c.StartupProbe = tc.probe
				}
			})
			start := f.clk.Now()
			f.status.set(pod.UID, running("c1", start, tc.typ != Startup))
			w := newWorker(f.m, tc.typ, pod, &pod.Spec.Containers[0])
			for i, s := range tc.steps {
				f.clk.Step(s.advance)
				f.exec.set(s.code)
				before := f.exec.count()
				if !w.doProbe(context.Background()) {
					t.Fatalf("step %d: worker stopped", i)
				}
				if probed := f.exec.count() > before; probed != s.probed {
					t.Errorf("step %d: probed = %v, want %v", i, probed, s.probed)
				}
				got, known := f.m.Result(tc.typ, "c1")
				if got != s.want || known != s.known {
					t.Errorf("step %d: result (%v, %v), want (%v, %v)", i, got, known, s.want, s.known)
				}
			}
		})
	}
}

func TestWorkerStartupGatesOthers(t *testing.T) {
	f := newFixture(t)
	pod := probePod(func(c *v1.Container) { c.LivenessProbe = execProbeSpec(0, 1, 1, 1) })
	f.status.set(pod.UID, running("c1", f.clk.Now(), false))
	w := newWorker(f.m, Liveness, pod, &pod.Spec.Containers[0])
	f.exec.set(1)
	w.doProbe(context.Background())
	if f.exec.count() != 0 {
		t.Fatalf("liveness probed a container that is not started")
	}
	f.status.set(pod.UID, running("c1", f.clk.Now(), true))
	w.doProbe(context.Background())
	if r, _ := f.m.Result(Liveness, "c1"); r != Failure || f.exec.count() != 1 {
		t.Fatalf("after start: result %v, %d probes; want Failure after 1", r, f.exec.count())
	}
}

func TestWorkerNewContainerResets(t *testing.T) {
	f := newFixture(t)
	pod := probePod(func(c *v1.Container) { c.LivenessProbe = execProbeSpec(0, 1, 1, 1) })
	f.status.set(pod.UID, running("c1", f.clk.Now(), true))
	w := newWorker(f.m, Liveness, pod, &pod.Spec.Containers[0])
	f.exec.set(1)
	w.doProbe(context.Background())
	if r, _ := f.m.Result(Liveness, "c1"); r != Failure {
		t.Fatalf("result %v, want Failure", r)
	}
	// The engine restarted the container: a new ID, probed again.
	f.status.set(pod.UID, running("c2", f.clk.Now(), true))
	f.exec.set(0)
	w.doProbe(context.Background())
	if _, known := f.m.Result(Liveness, "c1"); known {
		t.Error("result of the old container kept")
	}
	if r, _ := f.m.Result(Liveness, "c2"); r != Success || f.exec.count() != 2 {
		t.Errorf("new container: result %v after %d probes, want Success after 2", r, f.exec.count())
	}
}

func TestWorkerStops(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy v1.RestartPolicy
		status v1.PodStatus
		goOn   bool
	}{
		{"pod succeeded", v1.RestartPolicyAlways, v1.PodStatus{Phase: v1.PodSucceeded}, false},
		{"pod failed", v1.RestartPolicyAlways, v1.PodStatus{Phase: v1.PodFailed}, false},
		{"terminated, never restarted", v1.RestartPolicyNever, v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{
			Name: "app", ContainerID: "containerd://c1", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}}}}, false},
		{"terminated, never restarted, but the pod restarts all its containers", v1.RestartPolicyNever, v1.PodStatus{Phase: v1.PodRunning,
			Conditions: []v1.PodCondition{{Type: v1.AllContainersRestarting, Status: v1.ConditionTrue}},
			ContainerStatuses: []v1.ContainerStatus{{
				Name: "app", ContainerID: "containerd://c1", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}}}}, true},
		{"terminated, restarted later", v1.RestartPolicyAlways, v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{
			Name: "app", ContainerID: "containerd://c1", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}}}}, true},
		{"no container yet", v1.RestartPolicyAlways, v1.PodStatus{Phase: v1.PodPending}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			pod := probePod(func(c *v1.Container) { c.ReadinessProbe = execProbeSpec(0, 1, 1, 1) })
			pod.Spec.RestartPolicy = tc.policy
			f.status.set(pod.UID, tc.status)
			w := newWorker(f.m, Readiness, pod, &pod.Spec.Containers[0])
			if got := w.doProbe(context.Background()); got != tc.goOn {
				t.Errorf("doProbe = %v, want %v", got, tc.goOn)
			}
		})
	}
}

// waitFor is testutil.WaitFor.
var waitFor = testutil.WaitFor

func TestManagerWorkersTickAndStop(t *testing.T) {
	f := newFixture(t)
	pod := probePod(func(c *v1.Container) {
		c.ReadinessProbe = execProbeSpec(0, 10, 1, 3)
		c.LivenessProbe = execProbeSpec(0, 10, 1, 3)
	})
	f.status.set(pod.UID, running("c1", f.clk.Now(), true))
	f.m.AddPod(pod)
	f.m.AddPod(pod) // idempotent
	if n := f.m.Workers(); n != 2 {
		t.Fatalf("%d workers, want 2", n)
	}
	// The second AddPod asked the readiness worker to probe at once.
	waitFor(t, "readiness success", func() bool { r, _ := f.m.Result(Readiness, "c1"); return r == Success })
	waitFor(t, "a readiness update", func() bool {
		for _, u := range f.updates.all() {
			if u.Type == Readiness && u.Result == Success && u.PodUID == pod.UID && u.Container == "app" {
				return true
			}
		}
		return false
	})
	// Both workers probe once a period passes.
	before := f.exec.count()
	waitFor(t, "workers waiting on the clock", func() bool { return f.clk.HasWaiters() })
	f.clk.Step(11 * time.Second)
	waitFor(t, "periodic probes", func() bool { return f.exec.count() >= before+2 })
	if f.metrics.get("Readiness/successful") == 0 || f.metrics.get("Liveness/successful") == 0 {
		t.Errorf("metrics not counted: %v", f.metrics.counts)
	}
	// A failing probe records Unhealthy events.
	f.exec.set(1)
	f.clk.Step(10 * time.Second)
	waitFor(t, "an Unhealthy event", func() bool {
		select {
		case e := <-f.events.Events:
			return e == "Warning Unhealthy Readiness probe failed: out" || e == "Warning Unhealthy Liveness probe failed: out"
		default:
			return false
		}
	})
	f.m.RemovePod(pod.UID)
	if n := f.m.Workers(); n != 0 {
		t.Fatalf("%d workers after RemovePod", n)
	}
	waitFor(t, "results dropped", func() bool {
		_, r := f.m.Result(Readiness, "c1")
		_, l := f.m.Result(Liveness, "c1")
		return !r && !l
	})
}

func TestRanBeforeStart(t *testing.T) {
	f := newFixture(t)
	start := f.clk.Now() // the manager was made now
	for _, tc := range []struct {
		name      string
		startedAt time.Time
		want      bool
	}{
		{"long before", start.Add(-time.Hour), true},
		{"just over the grace before", start.Add(-restartGrace - time.Nanosecond), true},
		{"exactly the grace before", start.Add(-restartGrace), false},
		{"within the grace", start.Add(-time.Second), false},
		{"after the start", start.Add(time.Second), false},
		{"unknown start", time.Time{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := f.m.RanBeforeStart(tc.startedAt); got != tc.want {
				t.Errorf("RanBeforeStart(%v) = %v, want %v", tc.startedAt, got, tc.want)
			}
		})
	}
	// The manager's construction is the start, not the clock's now.
	f.clk.Step(time.Hour)
	if !f.m.RanBeforeStart(start.Add(-time.Minute)) || f.m.RanBeforeStart(start.Add(time.Minute)) {
		t.Error("RanBeforeStart moved with the clock")
	}
}

// TestWorkerFirstResultAfterRestart is the kubelet's worker.doProbe on a
// new container ID (ChangeContainerStatusOnKubeletRestart off): a
// container that ran before crivk started gets no initial result (its
// status stands until a probe settles one); a sidecar the status says
// started passed its startup probe.
func TestWorkerFirstResultAfterRestart(t *testing.T) {
	for _, tc := range []struct {
		name      string
		typ       ProbeType
		sidecar   bool
		before    bool // the container started before crivk
		started   bool // the published status says started
		want      Result
		wantKnown bool
	}{
		{name: "readiness, ran before crivk: none", typ: Readiness, before: true, started: true},
		{name: "startup, ran before crivk: none", typ: Startup, before: true, started: true},
		{name: "liveness, ran before crivk: none", typ: Liveness, before: true, started: true},
		{name: "readiness, started after crivk: Failure", typ: Readiness, started: true, want: Failure, wantKnown: true},
		{name: "startup, started after crivk: Unknown", typ: Startup, want: Unknown, wantKnown: true},
		{name: "liveness, started after crivk: Success", typ: Liveness, started: true, want: Success, wantKnown: true},
		{name: "sidecar startup, ran before crivk, started: Success", typ: Startup, sidecar: true, before: true, started: true,
			want: Success, wantKnown: true},
		{name: "sidecar startup, ran before crivk, not started: none", typ: Startup, sidecar: true, before: true},
		{name: "sidecar startup, started after crivk: Unknown", typ: Startup, sidecar: true, started: true,
			want: Unknown, wantKnown: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			// A probe that would settle Failure is never run here: the
			// first look only seeds (initial delay not passed, or the
			// container is started / not started as the type needs).
			f.exec.set(1)
			probe := execProbeSpec(3600, 10, 1, 1)
			pod := probePod(func(c *v1.Container) {
				switch tc.typ {
				case Liveness:
					c.LivenessProbe = probe
				case Readiness:
					c.ReadinessProbe = probe
				case Startup:
					c.StartupProbe = probe
				}
			})
			startedAt := f.clk.Now().Add(time.Second)
			if tc.before {
				startedAt = f.clk.Now().Add(-time.Minute)
			}
			st := running("c1", startedAt, tc.started)
			c := &pod.Spec.Containers[0]
			if tc.sidecar {
				always := v1.ContainerRestartPolicyAlways
				pod.Spec.InitContainers = []v1.Container{*c}
				pod.Spec.InitContainers[0].RestartPolicy = &always
				pod.Spec.Containers = []v1.Container{{Name: "main"}}
				c = &pod.Spec.InitContainers[0]
				st.InitContainerStatuses, st.ContainerStatuses = st.ContainerStatuses, nil
			}
			// The pod object says ready and started: nothing is seeded
			// from it any more (status generation reads it).
			pod.Status = *st.DeepCopy()
			f.status.set(pod.UID, st)
			w := newWorker(f.m, tc.typ, pod, c)
			if !w.doProbe(context.Background()) {
				t.Fatal("worker ended")
			}
			r, known := f.m.Result(tc.typ, "containerd://c1")
			if known != tc.wantKnown || (known && r != tc.want) {
				t.Errorf("result (%v, known %v), want (%v, known %v)", r, known, tc.want, tc.wantKnown)
			}
			if n := f.exec.count(); n != 0 {
				t.Errorf("%d probes ran, want none", n)
			}
		})
	}
}

func TestManagerStopLivenessAndStartupKeepsReadiness(t *testing.T) {
	f := newFixture(t)
	pod := probePod(func(c *v1.Container) {
		c.ReadinessProbe = execProbeSpec(0, 10, 1, 3)
		c.LivenessProbe = execProbeSpec(0, 10, 1, 3)
		c.StartupProbe = execProbeSpec(0, 10, 1, 3)
	})
	f.status.set(pod.UID, running("c1", f.clk.Now(), true))
	f.m.AddPod(pod)
	if n := f.m.Workers(); n != 3 {
		t.Fatalf("%d workers, want 3", n)
	}
	f.m.StopLivenessAndStartup(pod.UID)
	if n := f.m.Workers(); n != 1 {
		t.Fatalf("%d workers after StopLivenessAndStartup, want the readiness one", n)
	}
	f.m.mu.Lock()
	_, ok := f.m.workers[workerKey{uid: pod.UID, container: "app", typ: Readiness}]
	f.m.mu.Unlock()
	if !ok {
		t.Fatal("the readiness worker was stopped")
	}
	f.m.RemovePod(pod.UID)
	if n := f.m.Workers(); n != 0 {
		t.Fatalf("%d workers after RemovePod", n)
	}
}
