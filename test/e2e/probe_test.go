package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
)

func execProbe(cmd string, initialDelay, period, failure int32) *v1.Probe {
	return &v1.Probe{
		ProbeHandler:        v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", cmd}}},
		InitialDelaySeconds: initialDelay, PeriodSeconds: period, TimeoutSeconds: 1,
		SuccessThreshold: 1, FailureThreshold: failure,
	}
}

func podCondition(p *v1.Pod, t v1.PodConditionType) v1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// A container whose liveness probe fails is killed with the kubelet's
// events and restarted, counted in restartCount.
func TestProbeLivenessRestartsContainer(t *testing.T) {
	ns := newNamespace(t)
	pod := busyboxPod("liveness", v1.RestartPolicyAlways, "touch /tmp/healthy; sleep 3; rm -f /tmp/healthy; sleep 600")
	pod.Spec.Containers[0].LivenessProbe = execProbe("cat /tmp/healthy", 1, 1, 1)
	grace := int64(1)
	pod.Spec.Containers[0].LivenessProbe.TerminationGracePeriodSeconds = &grace
	pod = createPod(t, ns, pod)
	p := waitPod(t, ns, pod.Name, 90*time.Second, "restartCount 1 and running again", func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1 &&
			p.Status.ContainerStatuses[0].State.Running != nil
	})
	cs := p.Status.ContainerStatuses[0]
	if cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 137 {
		t.Errorf("last termination %+v, want exit code 137 (killed)", cs.LastTerminationState.Terminated)
	}
	for _, e := range []v1.Event{
		waitEvent(t, ns, pod.Name, v1.EventTypeWarning, "Unhealthy", "Liveness probe failed: cat: can't open '/tmp/healthy'"),
		waitEvent(t, ns, pod.Name, v1.EventTypeNormal, "Killing", "Container c failed liveness probe, will be restarted"),
	} {
		if e.InvolvedObject.FieldPath != "spec.containers{c}" {
			t.Errorf("%s event on %q, want the container spec.containers{c}", e.Reason, e.InvolvedObject.FieldPath)
		}
	}
}

// Readiness follows the probe both ways: Ready turns True once the probe
// succeeds and False again when it fails, and the container is never
// restarted for it.
func TestProbeReadinessFlipsReady(t *testing.T) {
	ns := newNamespace(t)
	pod := busyboxPod("readiness", v1.RestartPolicyAlways, "sleep 2; touch /tmp/ready; sleep 6; rm -f /tmp/ready; sleep 600")
	pod.Spec.Containers[0].ReadinessProbe = execProbe("cat /tmp/ready", 0, 1, 1)
	pod = createPod(t, ns, pod)
	p := waitPod(t, ns, pod.Name, 30*time.Second, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	if podCondition(p, v1.PodReady) == v1.ConditionTrue {
		t.Fatalf("Ready before the readiness probe succeeded")
	}
	waitPod(t, ns, pod.Name, 30*time.Second, "Ready True", func(p *v1.Pod) bool {
		return podCondition(p, v1.PodReady) == v1.ConditionTrue && podCondition(p, v1.ContainersReady) == v1.ConditionTrue &&
			p.Status.ContainerStatuses[0].Ready
	})
	p = waitPod(t, ns, pod.Name, 30*time.Second, "Ready False again", func(p *v1.Pod) bool {
		return podCondition(p, v1.PodReady) == v1.ConditionFalse && !p.Status.ContainerStatuses[0].Ready
	})
	if n := p.Status.ContainerStatuses[0].RestartCount; n != 0 {
		t.Errorf("restartCount %d after readiness failures, want 0", n)
	}
	waitEvent(t, ns, pod.Name, v1.EventTypeWarning, "Unhealthy", "Readiness probe failed:")
}

// An httpGet readiness probe by named port against busybox's httpd, and a
// tcpSocket liveness probe against the same port.
func TestProbeHTTPAndTCP(t *testing.T) {
	ns := newNamespace(t)
	pod := busyboxPod("http", v1.RestartPolicyAlways, "mkdir -p /www && echo ok > /www/healthz && exec httpd -f -p 8080 -h /www")
	c := &pod.Spec.Containers[0]
	c.Ports = []v1.ContainerPort{{Name: "web", ContainerPort: 8080}}
	c.ReadinessProbe = &v1.Probe{
		ProbeHandler:  v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("web")}},
		PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3,
	}
	c.LivenessProbe = &v1.Probe{
		ProbeHandler:  v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt(8080)}},
		PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1,
	}
	pod = createPod(t, ns, pod)
	waitPod(t, ns, pod.Name, 30*time.Second, "Running and Ready", isRunningReady)
	// Stays healthy for several liveness periods: checked at every poll.
	deadline := time.Now().Add(5 * time.Second)
	ctx := testContext(t, 15*time.Second)
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if !isRunningReady(p) || p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Fatalf("healthy httpd: ready %v, restartCount %d", isRunningReady(p), p.Status.ContainerStatuses[0].RestartCount)
		}
		return time.Now().After(deadline), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A startup probe holds liveness back: the liveness probe would fail until
// the container created its file, yet the container is not restarted, and
// is started (and ready) only once the startup probe succeeded.
func TestProbeStartupDelaysLiveness(t *testing.T) {
	ns := newNamespace(t)
	pod := busyboxPod("startup", v1.RestartPolicyAlways, "sleep 6; touch /tmp/started; sleep 600")
	c := &pod.Spec.Containers[0]
	c.StartupProbe = execProbe("cat /tmp/started", 0, 1, 60)
	c.LivenessProbe = execProbe("cat /tmp/started", 0, 1, 1)
	pod = createPod(t, ns, pod)
	p := waitPod(t, ns, pod.Name, 30*time.Second, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	if cs := p.Status.ContainerStatuses[0]; cs.Started == nil || *cs.Started || cs.Ready {
		t.Errorf("at first: started %v ready %v, want not started, not ready", cs.Started, cs.Ready)
	}
	p = waitPod(t, ns, pod.Name, 60*time.Second, "started and ready", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses[0]
		return cs.Started != nil && *cs.Started && cs.Ready
	})
	if n := p.Status.ContainerStatuses[0].RestartCount; n != 0 {
		t.Errorf("restartCount %d: liveness ran before the startup probe succeeded", n)
	}
}

// The probe counters are served at /metrics/probes of the node, as the
// kubelet's (reached here through the API server's node proxy).
func TestProbeMetricsEndpoint(t *testing.T) {
	ns := newNamespace(t)
	pod := busyboxPod("metrics", v1.RestartPolicyAlways, "touch /tmp/ok; sleep 600")
	pod.Spec.Containers[0].ReadinessProbe = execProbe("cat /tmp/ok", 0, 1, 3)
	pod = createPod(t, ns, pod)
	waitPod(t, ns, pod.Name, 30*time.Second, "Running and Ready", isRunningReady)
	want := `prober_probe_total{container="c",namespace="` + ns + `",pod="metrics",pod_uid="` + string(pod.UID) + `",probe_type="Readiness",result="successful"}`
	var body string
	ctx := testContext(t, 30*time.Second)
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		b, err := client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", nodeName, "proxy/metrics/probes").DoRaw(ctx)
		if err != nil {
			body = err.Error()
			return false, nil
		}
		body = string(b)
		return strings.Contains(body, want), nil
	})
	if err != nil {
		t.Fatalf("/metrics/probes lacks %s; last answer:\n%s", want, body)
	}
}

// A container that was ready stays ready across a restart of crivk until a
// probe says otherwise, as with the kubelet: every status the API holds
// from before the restart until the first readiness probe of the new crivk
// has Ready True. The kubelet keeps it only for a container that started
// more than 10 s before the agent (prober_manager.go's
// kubeletRestartGracePeriod; a younger one counts as new, not ready until
// probed), so the restart waits until the container is 12 s old.
func TestProbeReadyAcrossCrivkRestart(t *testing.T) {
	ns := newNamespace(t)
	pod := busyboxPod("steady", v1.RestartPolicyAlways, "touch /tmp/ok; exec sleep 3600")
	pod.Spec.Containers[0].ReadinessProbe = execProbe("cat /tmp/ok", 0, 3, 1)
	pod = createPod(t, ns, pod)
	p := waitPod(t, ns, pod.Name, 60*time.Second, "Running and Ready", isRunningReady)
	if r := p.Status.ContainerStatuses[0].State.Running; r != nil {
		// The kubelet's restart grace is wall-clock time: nothing to poll.
		<-time.After(time.Until(r.StartedAt.Add(12 * time.Second)))
	}
	// The watch below starts from the pod as it is now.
	pod, err := client.CoreV1().Pods(ns).Get(context.Background(), pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading pod %s again before the restart: %v", p.Name, err)
	}

	ctx := testContext(t, 3*time.Minute)
	w, err := client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + pod.Name, ResourceVersion: pod.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	notReady := make(chan string, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if q, ok := ev.Object.(*v1.Pod); ok && podCondition(q, v1.PodReady) != v1.ConditionTrue {
				notReady <- fmt.Sprintf("%s: Ready %q, container ready %v", ev.Type, podCondition(q, v1.PodReady), q.Status.ContainerStatuses[0].Ready)
			}
		}
	}()

	if err := stopCrivkFor(t); err != nil {
		t.Fatalf("crivk did not stop cleanly on SIGTERM: %v", err)
	}
	if err = startCrivkFor(t); err != nil {
		t.Fatalf("restarting crivk: %v", err)
	}
	// The new crivk probed the container (its counter starts at zero).
	want := `pod="steady",pod_uid="` + string(pod.UID) + `",probe_type="Readiness",result="successful"}`
	err = wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		b, err := client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", nodeName, "proxy/metrics/probes").DoRaw(ctx)
		return err == nil && strings.Contains(string(b), want), nil
	})
	if err != nil {
		t.Fatalf("the restarted crivk never probed the container: %v", err)
	}
	waitPod(t, ns, pod.Name, 30*time.Second, "Running and Ready after the restart", isRunningReady)
	w.Stop()
	<-done
	close(notReady)
	for s := range notReady {
		t.Errorf("the pod was reported not ready across the restart: %s", s)
	}
}

// TestSidecarProbes: a sidecar's readiness probe gates the pod's Ready
// (it turns Ready once the probe's file appears), and its liveness probe
// restarts it when it fails, with the Killing event on the init
// container. The probes' files are changed through exec.
func TestSidecarProbes(t *testing.T) {
	t.Parallel() // pods of its own namespace only: runs beside TestVolumeTokenRefresh's 8-minute wait
	ns := newNamespace(t)
	pod := busyboxPod("sidecar-probes", v1.RestartPolicyAlways, "sleep 3600")
	always := v1.ContainerRestartPolicyAlways
	probe := func(file string) *v1.Probe {
		return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", file}}},
			PeriodSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1, TimeoutSeconds: 1}
	}
	pod.Spec.InitContainers = []v1.Container{{
		Name: "sidecar", Image: busybox, ImagePullPolicy: v1.PullIfNotPresent, RestartPolicy: &always,
		Command:        []string{"sh", "-c", "touch /tmp/alive; sleep 3600"},
		ReadinessProbe: probe("/tmp/ready"),
		LivenessProbe:  probe("/tmp/alive"),
	}}
	createPod(t, ns, pod)
	sidecar := func(p *v1.Pod) *v1.ContainerStatus {
		for i := range p.Status.InitContainerStatuses {
			if p.Status.InitContainerStatuses[i].Name == "sidecar" {
				return &p.Status.InitContainerStatuses[i]
			}
		}
		return nil
	}
	podReady := func(p *v1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady {
				return c.Status == v1.ConditionTrue
			}
		}
		return false
	}
	// Running, but not Ready: the sidecar's readiness probe fails.
	waitPod(t, ns, pod.Name, 60*time.Second, "the main container running", func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	})
	// For three probe periods the pod never turns Ready.
	ctx := testContext(t, 2*time.Minute)
	errReady := errors.New("Ready while the sidecar's readiness probe fails")
	err := wait.PollUntilContextTimeout(ctx, poll, 3*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && (podReady(p) || (sidecar(p) != nil && sidecar(p).Ready)) {
			return false, errReady
		}
		return false, nil
	})
	if errors.Is(err, errReady) {
		t.Fatal(err)
	}
	if _, stderr, err := execIn(ctx, ns, pod.Name, "sidecar", "touch", "/tmp/ready"); err != nil {
		t.Fatalf("exec into the sidecar: %v %s", err, stderr)
	}
	start := time.Now()
	waitPod(t, ns, pod.Name, 20*time.Second, "Ready once the sidecar's readiness probe succeeds", func(p *v1.Pod) bool {
		return podReady(p) && sidecar(p) != nil && sidecar(p).Ready
	})
	t.Logf("pod Ready %s after the sidecar's readiness file appeared", time.Since(start).Round(time.Millisecond))

	if _, stderr, err := execIn(ctx, ns, pod.Name, "sidecar", "rm", "/tmp/alive"); err != nil {
		t.Fatalf("exec into the sidecar: %v %s", err, stderr)
	}
	p := waitPod(t, ns, pod.Name, 60*time.Second, "the sidecar restarted by its liveness probe", func(p *v1.Pod) bool {
		s := sidecar(p)
		return s != nil && s.RestartCount >= 1 && s.State.Running != nil
	})
	if n := p.Status.ContainerStatuses[0].RestartCount; n != 0 {
		t.Errorf("the main container restarted %d times; only the sidecar should", n)
	}
	waitObjectEvent(t, ns, "Pod", pod.Name, v1.EventTypeNormal, "Killing", "Init container sidecar failed liveness probe")
}

// TestReadinessGateTakesEffectAtOnce: another writer sets a readiness
// gate's condition True; the pod turns Ready within 2 s (crivk watches
// the pod's conditions, not only its spec).
func TestReadinessGateTakesEffectAtOnce(t *testing.T) {
	ns := newNamespace(t)
	pod := busyboxPod("gated", v1.RestartPolicyAlways, "sleep 3600")
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/ready"}}
	createPod(t, ns, pod)
	waitPod(t, ns, pod.Name, 60*time.Second, "ContainersReady", func(p *v1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == v1.ContainersReady && c.Status == v1.ConditionTrue {
				return true
			}
		}
		return false
	})
	ctx := testContext(t, time.Minute)
	p, err := client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
			t.Fatal("Ready before its readiness gate is set")
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: "example.com/ready", Status: v1.ConditionTrue, LastTransitionTime: metav1.Now()})
	if _, err := client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("setting the readiness gate: %v", err)
	}
	set := time.Now()
	waitPod(t, ns, pod.Name, 15*time.Second, "Ready", func(p *v1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady {
				return c.Status == v1.ConditionTrue
			}
		}
		return false
	})
	took := time.Since(set)
	t.Logf("Ready %s after the readiness gate was set", took.Round(time.Millisecond))
	if took > 2*time.Second {
		t.Errorf("Ready %s after the readiness gate was set, want within 2s", took)
	}
}

// TestSidecarStartupProbeGatesMainContainers: a sidecar whose startup
// probe succeeds only after 5 s holds the pod's regular container back
// until then, as the kubelet does (conformance: "Probing restartable init
// container should be ready immediately after startupProbe succeeds").
func TestSidecarStartupProbeGatesMainContainers(t *testing.T) {
	ns := newNamespace(t)
	pod := busyboxPod("sidecar-startup", v1.RestartPolicyAlways, "sleep 3600")
	always := v1.ContainerRestartPolicyAlways
	pod.Spec.InitContainers = []v1.Container{{
		Name: "sidecar", Image: busybox, ImagePullPolicy: v1.PullIfNotPresent, RestartPolicy: &always,
		Command: []string{"sh", "-c", "sleep 5; touch /tmp/started; sleep 3600"},
		StartupProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/started"}}},
			PeriodSeconds: 1, FailureThreshold: 60, TimeoutSeconds: 1},
	}}
	p := runningPod(t, ns, pod)
	if len(p.Status.InitContainerStatuses) != 1 || p.Status.InitContainerStatuses[0].State.Running == nil ||
		len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
		t.Fatalf("statuses %+v %+v", p.Status.InitContainerStatuses, p.Status.ContainerStatuses)
	}
	sidecarStart := p.Status.InitContainerStatuses[0].State.Running.StartedAt.Time
	mainStart := p.Status.ContainerStatuses[0].State.Running.StartedAt.Time
	gap := mainStart.Sub(sidecarStart)
	t.Logf("sidecar started %s, regular container %s later", sidecarStart.Format(time.RFC3339), gap)
	if gap < 5*time.Second {
		t.Errorf("the regular container started %s after the sidecar, before its startup probe could succeed (>= 5 s)", gap)
	}
}
