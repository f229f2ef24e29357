package prober

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// MetricLabels identify a probe in prober_probe_total.
type MetricLabels struct {
	ProbeType, Container, Pod, Namespace, PodUID string
}

// Metrics counts probe runs by result ("successful" or "failed"), the
// kubelet's prober_probe_total, and times the successful ones
// (prober_probe_duration_seconds). Forget drops a stopped worker's series.
type Metrics interface {
	Observe(l MetricLabels, result string, took time.Duration)
	Forget(l MetricLabels)
}

// Config configures a Manager; NewManager validates it and fills defaults.
type Config struct {
	// Exec runs exec probes (cri.Runtime).
	Exec Execer
	// Status returns the pod status the engine last published: workers
	// read the container's ID, state, start time and started flag from it.
	Status func(uid types.UID) (v1.PodStatus, bool)
	// OnChange is called when a container's result changes, from the
	// worker's goroutine; it must not block for long.
	OnChange func(Update)
	// Recorder receives Unhealthy and ProbeWarning events; nil drops them.
	Recorder record.EventRecorder
	// Metrics counts probe runs; nil counts nothing.
	Metrics Metrics
	Clock   clock.WithTicker
}

// Manager keeps a worker per container and probe type of every pod it was
// given, and the results they settle on.
type Manager struct {
	cfg     Config
	ctx     context.Context
	started time.Time
	results *results

	mu sync.Mutex
	// workers guarded by mu; a worker removes itself when it ends.
	workers map[workerKey]*worker
}

// NewManager returns a manager with no workers; ctx bounds the workers.
func NewManager(ctx context.Context, cfg Config) (*Manager, error) {
	if cfg.Exec == nil {
		return nil, errors.New("prober: no Exec runtime")
	}
	if cfg.Status == nil {
		return nil, errors.New("prober: no Status source")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Manager{
		cfg:     cfg,
		ctx:     ctx,
		started: cfg.Clock.Now(),
		results: newResults(cfg.OnChange),
		workers: map[workerKey]*worker{},
	}, nil
}

// AddPod starts the workers the pod's containers' probes need and are not
// running yet, and asks the readiness workers of started containers that
// are not ready to probe now (maybeTrigger). It is idempotent; the engine
// calls it at every sync. What a container that ran before crivk started
// reports until its probes run is status generation's (RanBeforeStart).
func (m *Manager) AddPod(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx.Err() != nil {
		return
	}
	for _, c := range probedContainers(pod) {
		for _, t := range []ProbeType{Startup, Readiness, Liveness} {
			if probeOf(c, t) == nil {
				continue
			}
			k := workerKey{uid: pod.UID, container: c.Name, typ: t}
			if w, ok := m.workers[k]; ok {
				m.maybeTrigger(w)
				continue
			}
			w := newWorker(m, t, pod.DeepCopy(), c)
			m.workers[k] = w
			go w.run(m.ctx)
		}
	}
}

// probedContainers are the containers whose probes run: the regular ones
// and the sidecars (restartable init containers), as the kubelet's
// prober manager.
func probedContainers(pod *v1.Pod) []*v1.Container {
	var out []*v1.Container
	for i := range pod.Spec.InitContainers {
		if podutil.IsSidecar(&pod.Spec.InitContainers[i]) {
			out = append(out, &pod.Spec.InitContainers[i])
		}
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

// maybeTrigger asks a readiness worker to probe now when its container
// runs, is started and is not ready, as the kubelet's UpdatePodStatus does
// at every status update. Liveness and startup workers are never triggered
// by a sync: they probe on their own period only, so that their
// failureThreshold counts periods, not syncs (a sidecar whose startup probe
// was triggered at each of a few syncs in its first second was killed
// after failureThreshold failures in that second, where the kubelet gives
// it failureThreshold × periodSeconds). Called with mu held.
func (m *Manager) maybeTrigger(w *worker) {
	if w.typ != Readiness {
		return
	}
	st, ok := m.cfg.Status(w.pod.UID)
	if !ok {
		return
	}
	statuses := st.ContainerStatuses
	if w.sidecar {
		statuses = st.InitContainerStatuses
	}
	for _, cs := range statuses {
		if cs.Name != w.container.Name || cs.State.Running == nil || cs.Started == nil || !*cs.Started {
			continue
		}
		if r, known := m.results.get(w.typ, trimRuntime(cs.ContainerID)); !known || r != Success {
			w.triggerNow()
		}
	}
}

// triggerPod asks the pod's readiness workers to probe now: a container
// just passed its startup probe, and the kubelet's next status update
// triggers the readiness probe of every started container that is not
// ready (liveness waits for its period).
func (m *Manager) triggerPod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, w := range m.workers {
		if k.uid == uid && k.typ == Readiness {
			w.triggerNow()
		}
	}
}

func probeOf(c *v1.Container, t ProbeType) *v1.Probe {
	switch t {
	case Liveness:
		return c.LivenessProbe
	case Readiness:
		return c.ReadinessProbe
	default:
		return c.StartupProbe
	}
}

// RemovePod stops the pod's workers (the pod is terminated or gone).
func (m *Manager) RemovePod(uid types.UID) {
	m.stop(uid, func(ProbeType) bool { return true })
}

// StopLivenessAndStartup stops the liveness and startup workers of a pod
// that is terminating: its containers are being stopped and must not be
// restarted, while readiness goes on being probed (a container that stops
// being ready during its grace period is reported so), as the kubelet.
func (m *Manager) StopLivenessAndStartup(uid types.UID) {
	m.stop(uid, func(t ProbeType) bool { return t != Readiness })
}

func (m *Manager) stop(uid types.UID, which func(ProbeType) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, w := range m.workers {
		if k.uid == uid && which(k.typ) {
			close(w.stop)
			delete(m.workers, k)
		}
	}
}

// workerDone forgets a worker that ended and its results.
func (m *Manager) workerDone(w *worker) {
	m.mu.Lock()
	if cur, ok := m.workers[w.key()]; ok && cur == w {
		delete(m.workers, w.key())
	}
	m.mu.Unlock()
	if w.containerID != "" {
		m.results.remove(w.typ, w.containerID)
	}
	if m.cfg.Metrics != nil {
		m.cfg.Metrics.Forget(w.labels())
	}
}

func (m *Manager) observe(l MetricLabels, result string, took time.Duration) {
	if m.cfg.Metrics != nil {
		m.cfg.Metrics.Observe(l, result, took)
	}
}

// restartGrace is the kubelet's kubeletRestartGracePeriod: a container
// that started more than this before the manager was made ran before the
// agent (re)started.
const restartGrace = 10 * time.Second

// RanBeforeStart reports whether a container that started at startedAt was
// already running before this agent started (the kubelet's
// kubeletRestartGracePeriod, counted from the manager's construction). Its
// workers do not seed their initial result, so until a probe settles one
// the container keeps what the API said of it (status.probedState).
func (m *Manager) RanBeforeStart(startedAt time.Time) bool {
	return !startedAt.IsZero() && startedAt.Before(m.started.Add(-restartGrace))
}

// Result returns the settled result of the container's probe of type t.
func (m *Manager) Result(t ProbeType, containerID string) (Result, bool) {
	return m.results.get(t, trimRuntime(containerID))
}

// Workers returns how many workers run (for tests and metrics).
func (m *Manager) Workers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.workers)
}
