package prober

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// parkWorker puts a worker in the manager without its goroutine, so a test
// sees exactly which triggers AddPod sends it.
func parkWorker(f *fixture, typ ProbeType, pod *v1.Pod, c *v1.Container) *worker {
	w := newWorker(f.m, typ, pod, c)
	f.m.mu.Lock()
	f.m.workers[w.key()] = w
	f.m.mu.Unlock()
	return w
}

func triggered(w *worker) bool {
	select {
	case <-w.trigger:
		return true
	default:
		return false
	}
}

// TestAddPodTriggersOnlyReadiness: a sync (AddPod) asks for an immediate
// probe only of a readiness worker whose container is started and not
// ready, as the kubelet's UpdatePodStatus; liveness and startup probe on
// their period only.
func TestAddPodTriggersOnlyReadiness(t *testing.T) {
	for _, tc := range []struct {
		name    string
		typ     ProbeType
		started bool
		result  *Result // the container's stored result; nil: none yet
		want    bool
	}{
		{name: "startup, new container", typ: Startup, want: false},
		{name: "startup, unknown so far", typ: Startup, result: ptr(Unknown), want: false},
		{name: "liveness, new started container", typ: Liveness, started: true, want: false},
		{name: "liveness, success", typ: Liveness, started: true, result: ptr(Success), want: false},
		{name: "readiness, not started", typ: Readiness, result: ptr(Failure), want: false},
		{name: "readiness, started, no result", typ: Readiness, started: true, want: true},
		{name: "readiness, started, not ready", typ: Readiness, started: true, result: ptr(Failure), want: true},
		{name: "readiness, started, ready", typ: Readiness, started: true, result: ptr(Success), want: false},
	} {
		for _, sidecar := range []bool{false, true} {
			name := tc.name
			if sidecar {
				name += ", sidecar"
			}
			t.Run(name, func(t *testing.T) {
				f := newFixture(t)
				probe := execProbeSpec(0, 10, 1, 3)
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
				st := running("c1", f.clk.Now(), tc.started)
				c := &pod.Spec.Containers[0]
				if sidecar {
					always := v1.ContainerRestartPolicyAlways
					pod.Spec.InitContainers = []v1.Container{*c}
					pod.Spec.InitContainers[0].RestartPolicy = &always
					pod.Spec.Containers = []v1.Container{{Name: "main"}}
					c = &pod.Spec.InitContainers[0]
					st.InitContainerStatuses, st.ContainerStatuses = st.ContainerStatuses, nil
				}
				f.status.set(pod.UID, st)
				if tc.result != nil {
					f.m.results.seed(tc.typ, "c1", *tc.result)
				}
				w := parkWorker(f, tc.typ, pod, c)
				f.m.AddPod(pod)
				if got := triggered(w); got != tc.want {
					t.Errorf("triggered = %v, want %v", got, tc.want)
				}
			})
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestSidecarStartupProbeGetsItsPeriods replays the node e2e spec "should
// launch restartable init containers serially considering the startup
// probe": a sidecar whose startup probe (the API's defaults: period 10 s,
// failureThreshold 3) passes only once the container touched a file 10 s
// after it started, in a pod synced several times in its first second.
// The kubelet gives it 3 × 10 s; crivk killed it within the first second
// because each sync triggered a startup probe.
func TestSidecarStartupProbeGetsItsPeriods(t *testing.T) {
	f := newFixture(t)
	always := v1.ContainerRestartPolicyAlways
	sidecar := v1.Container{
		Name: "restartable-init-1", RestartPolicy: &always,
		StartupProbe: &v1.Probe{
			ProbeHandler:   v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"test", "-f", "started"}}},
			TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
		},
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "restartable-init-containers-start-serially", Namespace: "ns", UID: "uid-1"},
		Spec: v1.PodSpec{
			RestartPolicy:  v1.RestartPolicyNever,
			InitContainers: []v1.Container{sidecar},
			Containers:     []v1.Container{{Name: "regular-1"}},
		},
	}
	start := f.clk.Now()
	notStarted := false
	f.status.set(pod.UID, v1.PodStatus{Phase: v1.PodPending, InitContainerStatuses: []v1.ContainerStatus{{
		Name: sidecar.Name, ContainerID: "containerd://c1", Started: &notStarted,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(start)}},
	}}})
	w := parkWorker(f, Startup, pod, &pod.Spec.InitContainers[0])
	ctx := context.Background()

	runTriggered := func() {
		if triggered(w) {
			w.doProbe(ctx)
		}
	}
	fileAt := start.Add(10*time.Second + 500*time.Millisecond)
	setExec := func() {
		if f.clk.Now().Before(fileAt) {
			f.exec.set(1)
		} else {
			f.exec.set(0)
		}
	}
	failed := func(when string) {
		t.Helper()
		if r, _ := f.m.Result(Startup, "c1"); r == Failure {
			t.Fatalf("%s: startup probe set to Failure after %d probes, %v after the start", when, f.exec.count(), f.clk.Since(start))
		}
	}
	// The worker's loop, driven by hand: a probe at its start, then one
	// per pending trigger or tick.
	setExec()
	w.doProbe(ctx)
	failed("at the start")
	// Syncs in the first second (PLEG events, status updates, the kick
	// of the initial result).
	for i := 0; i < 5; i++ {
		f.clk.Step(200 * time.Millisecond)
		setExec()
		f.m.AddPod(pod)
		runTriggered()
		failed("after the first second's syncs")
	}
	// Ticks every period.
	for i := 0; i < 2; i++ {
		f.clk.Step(10 * time.Second)
		setExec()
		f.m.AddPod(pod)
		runTriggered()
		w.doProbe(ctx)
		failed("after a tick")
	}
	if r, _ := f.m.Result(Startup, "c1"); r != Success {
		t.Fatalf("startup result %v after %v, want Success (the file exists since 10.5 s)", r, f.clk.Since(start))
	}
	if n := f.exec.count(); n != 3 {
		t.Errorf("%d probes, want 3 (at the start and at two ticks)", n)
	}
}

// seed stores res only if nothing is known of the container yet, without
// calling onChange (tests set a settled result with it).
func (r *results) seed(t ProbeType, id string, res Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.m[t][id]; !ok {
		r.m[t][id] = res
	}
}
