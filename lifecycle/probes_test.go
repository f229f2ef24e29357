package lifecycle

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

// fakeProbeRuntime answers exec probes with a settable exit code; the
// containers a failed liveness or startup probe condemns are stopped by
// the plan, in the fake runtime (KillContainer events).
type fakeProbeRuntime struct {
	mu    sync.Mutex
	code  int32
	execs int
}

func (f *fakeProbeRuntime) ExecSync(context.Context, string, []string, time.Duration) ([]byte, []byte, int32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.execs++
	return []byte("probe output"), nil, f.code, nil
}

func (f *fakeProbeRuntime) setCode(c int32) {
	f.mu.Lock()
	f.code = c
	f.mu.Unlock()
}

// newProbeFixture is newEngineFixture with probes and an event recorder.
func newProbeFixture(t *testing.T) (*engineFixture, *fakeProbeRuntime, *record.FakeRecorder) {
	t.Helper()
	rec := record.NewFakeRecorder(1000)
	pr := &fakeProbeRuntime{}
	f := newEngineFixture(t, func(c *Config) { c.ProbeRuntime, c.Recorder = pr, rec })
	return f, pr, rec
}

func execProbe(period, failure int32) *v1.Probe {
	return &v1.Probe{
		ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/health"}}},
		PeriodSeconds: period, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: failure,
	}
}

func podCondition(p *v1.Pod, t v1.PodConditionType) v1.ConditionStatus {
	if p == nil {
		return ""
	}
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// stepUntil polls until cond holds, for at most 10s of real time,
// relisting at every poll and moving the fake clock a second (firing the
// probe workers' tickers) every 20 polls, at most 120 times.
func (f *engineFixture) stepUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for polls, steps := 0, 0; !cond(); polls++ {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		if polls%20 == 0 && steps < 120 {
			f.step(time.Second)
			steps++
		}
		f.relist()
		time.Sleep(time.Millisecond) // let probe goroutines run; the condition is what is waited on
	}
}

func TestEngineReadinessProbeFlipsReady(t *testing.T) {
	f, pr, _ := newProbeFixture(t)
	pod := enginePod("uid-r", "ready", v1.RestartPolicyAlways)
	pod.Spec.Containers[0].ReadinessProbe = execProbe(1, 2)
	pr.setCode(1)
	f.startRunning(t, pod)
	if got := podCondition(f.lastPublished(pod.UID), v1.PodReady); got != v1.ConditionFalse {
		t.Fatalf("Ready = %q before any successful probe, want False", got)
	}
	pr.setCode(0)
	f.stepUntil(t, "Ready True", func() bool { return podCondition(f.lastPublished(pod.UID), v1.PodReady) == v1.ConditionTrue })
	p := f.lastPublished(pod.UID)
	if !p.Status.ContainerStatuses[0].Ready || podCondition(p, v1.ContainersReady) != v1.ConditionTrue {
		t.Errorf("container ready %v, ContainersReady %q", p.Status.ContainerStatuses[0].Ready, podCondition(p, v1.ContainersReady))
	}
	pr.setCode(1)
	f.stepUntil(t, "Ready False again", func() bool { return podCondition(f.lastPublished(pod.UID), v1.PodReady) == v1.ConditionFalse })
	if n := f.rt.count(pod.UID, "KillPod"); n != 0 || f.rt.count(pod.UID, "KillContainer") != 0 {
		t.Errorf("a failing readiness probe stopped containers")
	}
}

func TestEngineLivenessFailureRestartsContainer(t *testing.T) {
	f, pr, rec := newProbeFixture(t)
	pod := enginePod("uid-l", "live", v1.RestartPolicyAlways)
	pod.Spec.Containers[0].LivenessProbe = execProbe(1, 1)
	pod.Spec.Containers[0].LivenessProbe.TerminationGracePeriodSeconds = ptr.To[int64](5)
	pr.setCode(0)
	f.startRunning(t, pod)
	pr.setCode(1)
	f.stepUntil(t, "the container restarted", func() bool {
		p := f.lastPublished(pod.UID)
		return p != nil && p.Status.ContainerStatuses[0].RestartCount >= 1 && p.Status.ContainerStatuses[0].State.Running != nil
	})
	kills := f.rt.ops(pod.UID, "KillContainer")
	if len(kills) == 0 || kills[0].grace != 5 {
		t.Errorf("KillContainer %+v, want the probe's grace 5 first", kills)
	}
	var message string
	for _, ev := range f.rt.ops(pod.UID, "SyncPod") {
		for _, k := range ev.plan.ContainersToKill {
			message = k.Message
		}
	}
	if message != "Container a failed liveness probe, will be restarted" {
		t.Errorf("the plan's Killing message %q", message)
	}
	if f.rt.count(pod.UID, "KillPod") != 0 {
		t.Error("the whole pod was killed for one container's liveness failure")
	}
	var unhealthy bool
	for len(rec.Events) > 0 {
		e := <-rec.Events
		unhealthy = unhealthy || strings.HasPrefix(e, "Warning Unhealthy Liveness probe failed: probe output")
	}
	if !unhealthy {
		t.Error("no Unhealthy event")
	}
}

func TestEngineStartupProbeGatesLiveness(t *testing.T) {
	f, pr, _ := newProbeFixture(t)
	pod := enginePod("uid-s", "startup", v1.RestartPolicyAlways)
	pod.Spec.Containers[0].StartupProbe = execProbe(1, 100)
	pod.Spec.Containers[0].LivenessProbe = execProbe(1, 1)
	pr.setCode(1) // both would fail: only startup runs until it succeeds
	f.startRunning(t, pod)
	for i := 0; i < 5; i++ {
		f.step(time.Second)
	}
	p := f.lastPublished(pod.UID)
	if st := p.Status.ContainerStatuses[0]; st.Started == nil || *st.Started || st.Ready {
		t.Fatalf("started %v ready %v before the startup probe succeeded", st.Started, st.Ready)
	}
	if f.rt.count(pod.UID, "KillContainer") != 0 {
		t.Fatal("liveness ran before the startup probe succeeded")
	}
	pr.setCode(0)
	f.stepUntil(t, "started", func() bool {
		p := f.lastPublished(pod.UID)
		s := p.Status.ContainerStatuses[0].Started
		return s != nil && *s
	})
	if !f.lastPublished(pod.UID).Status.ContainerStatuses[0].Ready {
		t.Error("started container without a readiness probe is not ready")
	}
}

// TestEngineSidecarProbes: a sidecar's readiness probe gates the pod's
// Ready and ContainersReady, and its liveness failure restarts it.
func TestEngineSidecarProbes(t *testing.T) {
	f, pr, _ := newProbeFixture(t)
	pod := enginePod("uid-sp", "sidecar-probes", v1.RestartPolicyAlways)
	always := v1.ContainerRestartPolicyAlways
	pod.Spec.InitContainers = []v1.Container{{Name: "sc", Image: "busybox", RestartPolicy: &always,
		ReadinessProbe: execProbe(1, 1), LivenessProbe: execProbe(1, 1)}}
	pr.setCode(1) // readiness and liveness fail until told otherwise
	f.e.UpdatePod(context.Background(), pod)
	ready := func(p *v1.Pod) (sidecar, pod bool) {
		for _, cs := range p.Status.InitContainerStatuses {
			if cs.Name == "sc" {
				sidecar = cs.Ready
			}
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady {
				pod = c.Status == v1.ConditionTrue
			}
		}
		return
	}
	f.stepUntil(t, "the sidecar restarted by its liveness probe", func() bool {
		p := f.lastPublished(pod.UID)
		if p == nil || len(p.Status.InitContainerStatuses) == 0 {
			return false
		}
		return p.Status.InitContainerStatuses[0].RestartCount >= 1
	})
	if p := f.lastPublished(pod.UID); p != nil {
		if sc, ok := ready(p); sc || ok {
			t.Errorf("sidecar ready %v, pod ready %v while the sidecar's readiness probe fails", sc, ok)
		}
	}
	pr.setCode(0)
	f.stepUntil(t, "the pod ready once the sidecar's probe succeeds", func() bool {
		p := f.lastPublished(pod.UID)
		if p == nil {
			return false
		}
		sc, ok := ready(p)
		return sc && ok
	})
}
