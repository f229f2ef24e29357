package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

// Runtime is what the engine needs of the runtime manager (*cri.Runtime).
type Runtime interface {
	GetPodStatus(ctx context.Context, ref cri.PodRef) (*cri.PodStatus, error)
	SyncPod(ctx context.Context, pod *v1.Pod, status *cri.PodStatus, plan cri.PodActions, b *cri.BackOffs, now time.Time) *cri.SyncResult
	KillPod(ctx context.Context, status *cri.PodStatus, grace int64) error
	RemovePod(ctx context.Context, status *cri.PodStatus) error
}

var _ Runtime = (*cri.Runtime)(nil)

// Config configures an Engine; NewEngine fills defaults and validates it.
type Config struct {
	Runtime     Runtime
	RuntimeName string // e.g. "containerd", for container IDs
	NodeIP      string
	Clock       clock.WithTicker
	// SyncInterval is how often a pod is resynced without a Kick (the PLEG
	// kicks a pod's worker as soon as the runtime changes for it).
	SyncInterval time.Duration
	// OnTerminated is called once a deleted pod's containers and sandbox are
	// gone and its final status was published. The provider deletes the API
	// object there. It may be called again after an error.
	OnTerminated func(ctx context.Context, pod *v1.Pod) error
	// Recorder receives kubelet-style events; nil drops them.
	Recorder record.EventRecorder
}

// Engine runs one worker per pod UID.
type Engine struct {
	cfg     Config
	backoff *cri.BackOffs

	mu      sync.Mutex
	workers map[types.UID]*worker // guarded by mu
	notify  func(*v1.Pod)         // guarded by mu
}

// Restart and pull back-off, the kubelet's constants.
const (
	backOffInitial = 10 * time.Second
	backOffMax     = 300 * time.Second
	// backOffPoll is how often a pod in back-off is looked at again.
	backOffPoll = time.Second
)

// NewEngine validates cfg and returns an engine with no pods.
func NewEngine(cfg Config) (*Engine, error) {
	if cfg.Runtime == nil {
		return nil, errors.New("lifecycle: no runtime")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = 10 * time.Second
	}
	if cfg.OnTerminated == nil {
		cfg.OnTerminated = func(context.Context, *v1.Pod) error { return nil }
	}
	restart := flowcontrol.NewBackOff(backOffInitial, backOffMax)
	pull := flowcontrol.NewBackOff(backOffInitial, backOffMax)
	return &Engine{
		cfg:     cfg,
		backoff: &cri.BackOffs{Restart: restart, Pull: pull},
		workers: map[types.UID]*worker{},
	}, nil
}

// NotifyPods registers the callback that receives every new pod status.
func (e *Engine) NotifyPods(cb func(*v1.Pod)) {
	e.mu.Lock()
	e.notify = cb
	e.mu.Unlock()
}

func (e *Engine) publish(pod *v1.Pod) {
	e.mu.Lock()
	cb := e.notify
	e.mu.Unlock()
	if cb != nil {
		cb(pod)
	}
}

// UpdatePod starts a worker for a new pod or hands a changed spec to its
// worker. It never blocks on the runtime.
func (e *Engine) UpdatePod(ctx context.Context, pod *v1.Pod) {
	e.dispatch(ctx, pod, false)
}

// dispatch hands pod to its worker, starting one if there is none; with
// kill the worker terminates the pod.
func (e *Engine) dispatch(ctx context.Context, pod *v1.Pod, kill bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	w, ok := e.workers[pod.UID]
	if !ok {
		w = newWorker(e, pod)
		e.workers[pod.UID] = w
	}
	// The request is recorded before a new worker starts, so that a worker
	// created only to clean up never syncs the pod first.
	if kill {
		w.kill(pod)
	} else {
		w.update(pod)
	}
	if !ok {
		// Workers outlive the call that started them; they end when
		// their pod is terminated.
		go w.run(context.WithoutCancel(ctx))
	}
}

// Kill asks the pod's worker to stop its containers and clean up. It
// returns false when the engine does not know the pod.
func (e *Engine) Kill(pod *v1.Pod) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	w, ok := e.workers[pod.UID]
	if !ok {
		return false
	}
	w.kill(pod)
	return true
}

// Pod returns the latest pod with its status, or nil.
func (e *Engine) Pod(uid types.UID) *v1.Pod {
	e.mu.Lock()
	w := e.workers[uid]
	e.mu.Unlock()
	if w == nil {
		return nil
	}
	return w.current()
}

// Pods returns every pod the engine runs, with its status.
func (e *Engine) Pods() []*v1.Pod {
	e.mu.Lock()
	ws := make([]*worker, 0, len(e.workers))
	for _, w := range e.workers {
		ws = append(ws, w)
	}
	e.mu.Unlock()
	out := make([]*v1.Pod, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.current())
	}
	return out
}

func (e *Engine) forget(w *worker) {
	e.mu.Lock()
	if e.workers[w.uid] == w {
		delete(e.workers, w.uid)
	}
	e.mu.Unlock()
	var names []string
	for _, c := range w.spec().Spec.InitContainers {
		names = append(names, c.Name)
	}
	for _, c := range w.spec().Spec.Containers {
		names = append(names, c.Name)
	}
	e.backoff.Forget(string(w.uid), names)
}

// worker owns one pod UID.
type worker struct {
	e   *Engine
	uid types.UID
	ref cri.PodRef

	kick chan struct{} // buffered 1: something changed

	mu     sync.Mutex
	pod    *v1.Pod      // latest spec; guarded by mu
	status v1.PodStatus // last published; guarded by mu
	state  WorkerState  // guarded by mu; changed only through setStateLocked
	// killGrace is the grace period of the termination under way and
	// cancelKill cancels its attempt in flight; both guarded by mu.
	killGrace  int64
	cancelKill context.CancelFunc

	// Only accessed from the worker goroutine:
	waiting map[string]cri.Waiting
	podIPs  []string
	stopped bool // a Finished pod's sandbox and containers are stopped
	// backingOff is set while a container waits for a restart or pull
	// back-off to run out.
	backingOff bool
}

func newWorker(e *Engine, pod *v1.Pod) *worker {
	return &worker{
		e:      e,
		uid:    pod.UID,
		ref:    cri.RefOf(pod),
		kick:   make(chan struct{}, 1),
		pod:    pod.DeepCopy(),
		status: *pod.Status.DeepCopy(),
	}
}

func (w *worker) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *worker) update(pod *v1.Pod) {
	w.mu.Lock()
	w.pod = pod.DeepCopy()
	w.mu.Unlock()
	w.poke()
}

// setStateLocked moves the worker to state to if the transition is allowed;
// a refused transition is logged, never a panic. Must hold w.mu.
func (w *worker) setStateLocked(to WorkerState) bool {
	if w.state == to {
		return true
	}
	if !canTransition(w.state, to) {
		log.L.WithField("pod", w.ref.String()).Errorf("refused worker transition %s -> %s", w.state, to)
		return false
	}
	w.state = to
	return true
}

func (w *worker) getState() WorkerState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state
}

// kill starts termination with pod's effective grace period. While
// terminating, a shorter grace period cancels the attempt in flight and
// restarts it with the shorter one; a longer one changes nothing.
func (w *worker) kill(pod *v1.Pod) {
	grace := cri.GracePeriod(pod, nil)
	w.mu.Lock()
	if w.state == WorkerTerminating && grace >= w.killGrace {
		w.mu.Unlock()
		return
	}
	if !w.setStateLocked(WorkerTerminating) {
		w.mu.Unlock()
		return
	}
	w.pod = pod.DeepCopy()
	w.killGrace = grace
	if w.cancelKill != nil {
		w.cancelKill()
	}
	w.mu.Unlock()
	w.poke()
}

func (w *worker) spec() *v1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod
}

func (w *worker) current() *v1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.pod.DeepCopy()
	p.Status = *w.status.DeepCopy()
	return p
}

func (w *worker) run(ctx context.Context) {
	ctx = log.WithLogger(ctx, log.G(ctx).WithFields(log.Fields{"pod": w.ref.Namespace + "/" + w.ref.Name, "uid": w.uid}))
	clk := w.e.cfg.Clock
	retry := flowcontrol.NewBackOff(500*time.Millisecond, 30*time.Second)
	for {
		w.mu.Lock()
		pod, state, grace := w.pod, w.state, w.killGrace
		killCtx, cancel := context.WithCancel(ctx)
		w.cancelKill = cancel
		w.mu.Unlock()

		var wait time.Duration
		if state == WorkerTerminating {
			err := w.terminate(killCtx, pod, grace)
			shortened := killCtx.Err() != nil && ctx.Err() == nil
			cancel()
			switch {
			case err == nil:
				w.mu.Lock()
				w.setStateLocked(WorkerTerminated)
				w.cancelKill = nil
				w.mu.Unlock()
				w.e.forget(w)
				return
			case shortened:
				log.G(ctx).Info("grace period shortened: restarting termination")
				continue
			default:
				log.G(ctx).WithError(err).Warn("terminating pod failed, retrying")
				retry.Next("kill", clk.Now())
				wait = retry.Get("kill")
			}
		} else {
			cancel()
			if err := w.sync(ctx, pod); err != nil {
				log.G(ctx).WithError(err).Warn("sync failed")
			}
			wait = w.e.cfg.SyncInterval
			if w.backingOff && wait > backOffPoll {
				// A restart or pull waits for its back-off to run out;
				// no runtime event will announce that.
				wait = backOffPoll
			}
			if state == WorkerFinished && w.stopped {
				wait = time.Hour // nothing changes any more until the pod is deleted
			}
		}
		t := clk.NewTimer(wait)
		select {
		case <-w.kick:
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return
		}
		t.Stop()
	}
}

// sync brings the runtime to the pod's spec once and publishes its status.
func (w *worker) sync(ctx context.Context, pod *v1.Pod) error {
	rt := w.e.cfg.Runtime
	st, err := rt.GetPodStatus(ctx, w.ref)
	if err != nil {
		return err
	}
	var syncErr error
	if w.getState() == WorkerSyncing {
		plan := cri.ComputePodActions(pod, st)
		if plan.CreateSandbox || plan.KillPod || plan.NextInit >= 0 || len(plan.ContainersToStart) > 0 || len(plan.ContainersToKill) > 0 {
			log.G(ctx).WithField("plan", plan.String()).Debug("syncing pod")
			res := rt.SyncPod(ctx, pod, st, plan, w.e.backoff, w.e.cfg.Clock.Now())
			w.recordSync(pod, res)
			syncErr = res.Error()
			// Read back at once, so a change reaches the API without waiting
			// for the next poll.
			if st, err = rt.GetPodStatus(ctx, w.ref); err != nil {
				return err
			}
		} else {
			w.backingOff = false
		}
	}
	if ips := st.IPs(); len(ips) > 0 {
		w.podIPs = ips
	}
	status := w.generate(pod, st, false)
	finished := false
	if status.Phase == v1.PodSucceeded || status.Phase == v1.PodFailed {
		w.mu.Lock()
		switch w.state {
		case WorkerSyncing:
			finished = w.setStateLocked(WorkerFinished) // no more plans for this pod
		case WorkerFinished:
			finished = true
		}
		// Terminating: a kill arrived during this sync; it takes over.
		w.mu.Unlock()
	}
	w.publish(pod, status)
	if finished && !w.stopped {
		// The kubelet stops a finished pod's sandbox but keeps its
		// containers (and logs) until the pod is deleted. Retried at the
		// next sync until it succeeds.
		if err := rt.KillPod(ctx, st, cri.GracePeriod(pod, nil)); err != nil {
			return errors.Join(syncErr, err)
		}
		w.stopped = true
	}
	return syncErr
}

func (w *worker) recordSync(pod *v1.Pod, res *cri.SyncResult) {
	w.waiting = res.Waiting
	w.backingOff = false
	for _, wt := range res.Waiting {
		if wt.Reason == cri.ReasonCrashLoopBackOff || wt.Reason == cri.ReasonImagePullBackOff || wt.Reason == cri.ReasonErrImagePull {
			w.backingOff = true
		}
	}
	r := w.e.cfg.Recorder
	if r == nil {
		return
	}
	if res.DNSWarning != "" {
		r.Eventf(pod, v1.EventTypeWarning, "MissingClusterDNS", "%s", res.DNSWarning)
	}
	if res.SandboxErr != nil {
		r.Eventf(pod, v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", res.SandboxErr)
	}
	for name, wt := range res.Waiting {
		switch wt.Reason {
		case cri.ReasonCrashLoopBackOff:
			r.Eventf(pod, v1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s in pod %s", name, pod.Name)
		case cri.ReasonImagePullBackOff:
			r.Eventf(pod, v1.EventTypeNormal, "BackOff", "%s", wt.Message)
		default:
			r.Eventf(pod, v1.EventTypeWarning, "Failed", "Error: %s", wt.Reason+": "+wt.Message)
		}
	}
	for _, name := range res.Started {
		r.Eventf(pod, v1.EventTypeNormal, "Started", "Started container %s", name)
	}
}

func (w *worker) generate(pod *v1.Pod, st *cri.PodStatus, deleted bool) v1.PodStatus {
	w.mu.Lock()
	prev := *w.status.DeepCopy()
	w.mu.Unlock()
	return GenerateStatus(statusInput{
		Pod:         pod,
		Previous:    prev,
		Runtime:     st,
		Waiting:     w.waiting,
		RuntimeName: w.e.cfg.RuntimeName,
		NodeIP:      w.e.cfg.NodeIP,
		PodIPs:      w.podIPs,
		Deleted:     deleted,
		Now:         w.e.cfg.Clock.Now(),
	})
}

// publish hands a changed status to the notifier.
func (w *worker) publish(pod *v1.Pod, status v1.PodStatus) {
	w.mu.Lock()
	changed := !equality.Semantic.DeepEqual(w.status, status)
	w.status = status
	w.mu.Unlock()
	if !changed {
		return
	}
	p := pod.DeepCopy()
	p.Status = *status.DeepCopy()
	w.e.publish(p)
}

// terminate stops the pod's containers with its grace period, publishes the
// final status, removes everything from the runtime and reports the pod
// terminated. Any error leaves the pod to be terminated again.
func (w *worker) terminate(ctx context.Context, pod *v1.Pod, grace int64) error {
	rt := w.e.cfg.Runtime
	st, err := rt.GetPodStatus(ctx, w.ref)
	if err != nil {
		return err
	}
	if st.Running() && w.e.cfg.Recorder != nil {
		for _, c := range st.Containers {
			if c.State == cri.StateRunning {
				w.e.cfg.Recorder.Eventf(pod, v1.EventTypeNormal, "Killing", "Stopping container %s", c.Name)
			}
		}
	}
	if err := rt.KillPod(ctx, st, grace); err != nil {
		return fmt.Errorf("killing pod %s: %w", w.ref, err)
	}
	if st, err = rt.GetPodStatus(ctx, w.ref); err != nil {
		return err
	}
	if st.Running() {
		return fmt.Errorf("pod %s still has running containers after kill", w.ref)
	}
	w.publish(pod, w.generate(pod, st, true))
	if err := rt.RemovePod(ctx, st); err != nil {
		return err
	}
	return w.e.cfg.OnTerminated(ctx, w.current())
}

// PodByName returns the newest pod the engine knows under namespace/name,
// with its status, or nil.
func (e *Engine) PodByName(namespace, name string) *v1.Pod {
	e.mu.Lock()
	var found []*worker
	for _, w := range e.workers {
		if w.ref.Namespace == namespace && w.ref.Name == name {
			found = append(found, w)
		}
	}
	e.mu.Unlock()
	var best *v1.Pod
	for _, w := range found {
		p := w.current()
		if best == nil || best.CreationTimestamp.Before(&p.CreationTimestamp) {
			best = p
		}
	}
	return best
}

// KillUnknown starts a worker for a pod the engine does not run (deleted
// while nobody watched) just to clean it up from the runtime.
func (e *Engine) KillUnknown(ctx context.Context, pod *v1.Pod) {
	e.dispatch(ctx, pod, true)
}

// Kick makes the worker of pod uid re-read the runtime now (the PLEG saw a
// change). Unknown UIDs are ignored.
func (e *Engine) Kick(uid types.UID) {
	e.mu.Lock()
	w := e.workers[uid]
	e.mu.Unlock()
	if w != nil {
		w.poke()
	}
}
