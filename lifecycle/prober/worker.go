package prober

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/crivk/crivk/podutil"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// worker probes one container of one pod with one probe type, from its own
// goroutine, until stopped. Its fields below stop are owned by that
// goroutine.
type worker struct {
	m         *Manager
	typ       ProbeType
	pod       *v1.Pod
	container v1.Container
	spec      *v1.Probe
	initial   Result
	// sidecar: the container is a restartable init container (its status
	// is among the init containers', it is always restarted).
	sidecar bool

	// stop is closed by the manager to end the worker; trigger asks for a
	// probe now (buffered, 1).
	stop    chan struct{}
	trigger chan struct{}

	containerID string // the container being probed ("" before one runs)
	lastResult  Result
	resultRun   int
	// onHold: a liveness or startup failure was set; nothing is probed
	// until the container is replaced.
	onHold bool
}

func newWorker(m *Manager, typ ProbeType, pod *v1.Pod, c *v1.Container) *worker {
	w := &worker{
		m: m, typ: typ, pod: pod, container: *c,
		stop: make(chan struct{}), trigger: make(chan struct{}, 1),
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == c.Name {
			w.sidecar = true
		}
	}
	switch typ {
	case Liveness:
		w.spec, w.initial = c.LivenessProbe, Success
	case Readiness:
		w.spec, w.initial = c.ReadinessProbe, Failure
	case Startup:
		w.spec, w.initial = c.StartupProbe, Unknown
	}
	return w
}

func (w *worker) key() workerKey {
	return workerKey{uid: w.pod.UID, container: w.container.Name, typ: w.typ}
}

func (w *worker) labels() MetricLabels {
	return MetricLabels{ProbeType: w.typ.String(), Container: w.container.Name, Pod: w.pod.Name, Namespace: w.pod.Namespace, PodUID: string(w.pod.UID)}
}

func period(p *v1.Probe) time.Duration {
	if p.PeriodSeconds <= 0 {
		return 10 * time.Second
	}
	return time.Duration(p.PeriodSeconds) * time.Second
}

func timeout(p *v1.Probe) time.Duration {
	if p.TimeoutSeconds <= 0 {
		return time.Second
	}
	return time.Duration(p.TimeoutSeconds) * time.Second
}

func threshold(n int32, def int) int {
	if n <= 0 {
		return def
	}
	return int(n)
}

// run probes every period until the worker is stopped or doProbe says the
// container will never run again.
func (w *worker) run(ctx context.Context) {
	clk := w.m.cfg.Clock
	defer w.m.workerDone(w)
	// Right after crivk starts, every worker starts at once: spread their
	// first probes over a period, as the kubelet does.
	if clk.Since(w.m.started) < period(w.spec) {
		select {
		case <-clk.After(time.Duration(rand.Float64() * float64(period(w.spec)))):
		case <-w.trigger:
		case <-w.stop:
			return
		case <-ctx.Done():
			return
		}
	}
	t := clk.NewTicker(period(w.spec))
	defer func() { t.Stop() }()
	for w.doProbe(ctx) {
		select {
		case <-t.C():
		case <-w.trigger:
			// As the kubelet: the next periodic probe is a period after
			// this manual one.
			t.Stop()
			t = clk.NewTicker(period(w.spec))
		case <-w.stop:
			return
		case <-ctx.Done():
			return
		}
	}
}

// triggerNow asks the worker to probe at once (without blocking: one
// pending request is enough).
func (w *worker) triggerNow() {
	select {
	case w.trigger <- struct{}{}:
	default:
	}
}

// doProbe probes once if the container is due and returns whether the
// worker should go on.
// It stays one function, as the kubelet's worker.doProbe: each early
// return is one of its documented cases, in the kubelet's order.
func (w *worker) doProbe(ctx context.Context) bool {
	st, ok := w.m.cfg.Status(w.pod.UID)
	if !ok {
		// Not published yet, or already forgotten.
		return true
	}
	if st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed {
		return false
	}
	var cs *v1.ContainerStatus
	statuses := st.ContainerStatuses
	if w.sidecar {
		statuses = st.InitContainerStatuses
	}
	for i := range statuses {
		if statuses[i].Name == w.container.Name {
			cs = &statuses[i]
		}
	}
	if cs == nil || cs.ContainerID == "" {
		return true
	}
	id := trimRuntime(cs.ContainerID)
	if id != w.containerID {
		if w.containerID != "" {
			w.m.results.remove(w.typ, w.containerID)
		}
		w.containerID = id
		// As the kubelet (ChangeContainerStatusOnKubeletRestart off): a
		// container that ran before crivk started gets no initial result,
		// so it keeps its API status until a probe settles one; a sidecar
		// the status says started passed its startup probe (the plan's
		// gate on what follows it reads that result).
		if w.sidecar && w.typ == Startup && cs.Started != nil && *cs.Started {
			w.m.results.set(w.update(Success))
		}
		if cs.State.Running == nil || !w.m.RanBeforeStart(cs.State.Running.StartedAt.Time) {
			w.m.results.set(w.update(w.initial))
		}
		w.onHold, w.lastResult, w.resultRun = false, Unknown, 0
	}
	if w.onHold {
		return true
	}
	if cs.State.Running == nil {
		w.m.results.set(w.update(Failure))
		// A container that terminated and is never restarted (its own
		// restartPolicy and rules, else the pod's) is done, unless the
		// pod restarts all its containers in place (the kubelet's
		// ShouldAllContainersRestart on the status); a sidecar is always
		// restarted.
		return cs.State.Terminated == nil || w.sidecar ||
			podutil.ContainerShouldRestart(&w.container, &w.pod.Spec, cs.State.Terminated.ExitCode) ||
			podutil.AllContainersRestarting(&w.pod.Spec, &st)
	}
	started := cs.Started != nil && *cs.Started
	if w.typ == Startup && started {
		return true
	}
	if w.typ != Startup && !started {
		return true
	}
	if w.m.cfg.Clock.Since(cs.State.Running.StartedAt.Time) < time.Duration(w.spec.InitialDelaySeconds)*time.Second {
		return true
	}

	start := w.m.cfg.Clock.Now()
	out, output, err := w.probe(ctx, st.PodIP)
	took := w.m.cfg.Clock.Since(start)
	if err != nil {
		// The prober's own error (as the kubelet): the result is thrown
		// away and not counted.
		log.G(ctx).WithError(err).WithField("pod", w.pod.Namespace+"/"+w.pod.Name).WithField("uid", w.pod.UID).
			WithField("container", w.container.Name).WithField("probe", w.typ.String()).Warn("probe errored")
		w.event(v1.EventTypeWarning, "Unhealthy", "%s probe errored and resulted in unknown state: %v", w.typ, err)
		return true
	}
	result := Success
	switch out {
	case outcomeFailure:
		result = Failure
		w.m.observe(w.labels(), "failed", took)
		w.event(v1.EventTypeWarning, "Unhealthy", "%s probe failed: %s", w.typ, output)
	case outcomeWarning:
		w.m.observe(w.labels(), "successful", took)
		w.event(v1.EventTypeWarning, "ProbeWarning", "%s probe warning: %s", w.typ, output)
	default:
		w.m.observe(w.labels(), "successful", took)
	}
	if w.lastResult == result {
		w.resultRun++
	} else {
		w.lastResult, w.resultRun = result, 1
	}
	if (result == Failure && w.resultRun < threshold(w.spec.FailureThreshold, 3)) ||
		(result == Success && w.resultRun < threshold(w.spec.SuccessThreshold, 1)) {
		return true
	}
	w.m.results.set(w.update(result))
	if result == Failure && (w.typ == Liveness || w.typ == Startup) {
		// The engine restarts the container; probe the new one only.
		w.onHold, w.resultRun = true, 0
	}
	if result == Success && w.typ == Startup {
		// Readiness waits for the container to be started: probe it now
		// (the status was republished by the update above).
		w.m.triggerPod(w.pod.UID)
	}
	return true
}

func (w *worker) update(r Result) Update {
	return Update{Type: w.typ, ContainerID: w.containerID, Container: w.container.Name, PodUID: w.pod.UID, Result: r}
}

// probe runs the probe's handler once, bounded by its timeout.
func (w *worker) probe(ctx context.Context, podIP string) (outcome, string, error) {
	p := w.spec
	to := timeout(p)
	ctx, cancel := context.WithTimeout(ctx, to+time.Second)
	defer cancel()
	switch {
	case p.Exec != nil:
		return execProbe(ctx, w.m.cfg.Exec, w.containerID, p.Exec.Command, to)
	case p.HTTPGet != nil:
		u, headers, err := httpURL(p.HTTPGet, &w.container, podIP)
		if err != nil {
			return outcomeFailure, "", err
		}
		return httpProbe(ctx, u, headers, to)
	case p.TCPSocket != nil:
		port, err := podutil.ResolvePort(p.TCPSocket.Port, &w.container)
		if err != nil {
			return outcomeFailure, "", err
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = podIP
		}
		return tcpProbe(ctx, host, port, to)
	case p.GRPC != nil:
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
		}
		return grpcProbe(ctx, podIP, int(p.GRPC.Port), service, to)
	}
	return outcomeFailure, "", fmt.Errorf("missing probe handler for %s:%s", w.pod.Namespace+"/"+w.pod.Name, w.container.Name)
}

// event records an event on the container, as the kubelet's prober does.
func (w *worker) event(typ, reason, format string, args ...any) {
	if w.m.cfg.Recorder == nil {
		return
	}
	ref := &v1.ObjectReference{
		Kind: "Pod", APIVersion: "v1", Namespace: w.pod.Namespace, Name: w.pod.Name, UID: w.pod.UID,
		FieldPath: fieldPath(w.sidecar, w.container.Name),
	}
	w.m.cfg.Recorder.Eventf(ref, typ, reason, format, args...)
}

// fieldPath is the container's field path in events.
func fieldPath(initContainer bool, name string) string {
	if initContainer {
		return fmt.Sprintf("spec.initContainers{%s}", name)
	}
	return fmt.Sprintf("spec.containers{%s}", name)
}

// trimRuntime drops the "<runtime>://" prefix of an API container ID.
func trimRuntime(id string) string {
	if i := strings.Index(id, "://"); i >= 0 {
		return id[i+3:]
	}
	return id
}

type workerKey struct {
	uid       types.UID
	container string
	typ       ProbeType
}
