package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/podutil"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
)

// UpdateType says why a pod is handed to its worker.
type UpdateType int

const (
	// SyncPodSync is a periodic or event-driven resync.
	SyncPodSync UpdateType = iota
	// SyncPodUpdate is a changed spec from the API.
	SyncPodUpdate
	// SyncPodCreate is a pod seen for the first time.
	SyncPodCreate
	// SyncPodKill asks the worker to terminate the pod (deletion, eviction,
	// preemption, or a runtime pod nobody wants).
	SyncPodKill
)

func (t UpdateType) String() string {
	switch t {
	case SyncPodSync:
		return "sync"
	case SyncPodUpdate:
		return "update"
	case SyncPodCreate:
		return "create"
	case SyncPodKill:
		return "kill"
	default:
		return fmt.Sprintf("UpdateType(%d)", int(t))
	}
}

// PodWorkerState is the kind of work a pod's worker does next. A worker
// only moves forward: Sync -> Terminating -> Terminated, then finished (the
// worker goroutine exits; the pod's record is dropped by SyncKnownPods once
// the pod is no longer desired).
//
// The timeline of one pod, and which predicate holds when (the kubelet's):
//
//	UpdatePod(create)
//	   │  SyncPodWork: SyncPod repeated (each resync, PLEG event, spec change)
//	   │        until the pod is terminal or termination is requested
//	   v
//	terminatingAt set ── IsPodTerminationRequested and
//	   │                  shouldPodContainersBeTerminating = true from here
//	   │  TerminatingPodWork: SyncTerminatingPod repeated until every container
//	   │        is stopped; a shorter grace period cancels the attempt in
//	   │        flight (its context) and restarts with the shorter one
//	   v        couldHaveRunningContainers = true until here
//	terminatedAt set ── IsPodKnownTerminated and shouldPodRuntimeBeRemoved
//	   │                from here; shouldPodContentBeRemoved once also
//	   │                deleted; kill requests' completion channels closed
//	   │  TerminatedPodWork: SyncTerminatedPod once (final status, release
//	   v        resources)
//	finished ── IsPodFinished (the worker goroutine exited)
//	   │
//	   v
//	SyncKnownPods without the pod: record removed (UID reuse may start again)
//
// For a UID the workers do not know, the should* predicates are true (its
// containers must not run and may be removed), the others false.
type PodWorkerState int

const (
	// SyncPodWork: the pod should be running.
	SyncPodWork PodWorkerState = iota
	// TerminatingPodWork: the pod's containers must be stopped.
	TerminatingPodWork
	// TerminatedPodWork: containers stopped; release what the pod holds.
	TerminatedPodWork
)

func (s PodWorkerState) String() string {
	switch s {
	case SyncPodWork:
		return "sync"
	case TerminatingPodWork:
		return "terminating"
	case TerminatedPodWork:
		return "terminated"
	default:
		return fmt.Sprintf("PodWorkerState(%d)", int(s))
	}
}

// workerTransitions is the one table of allowed state changes between two
// pieces of work; canTransition reads it. Staying in a state is allowed.
var workerTransitions = map[PodWorkerState][]PodWorkerState{
	SyncPodWork:        {TerminatingPodWork},
	TerminatingPodWork: {TerminatedPodWork},
	TerminatedPodWork:  nil,
}

func canTransition(from, to PodWorkerState) bool {
	if from == to {
		return true
	}
	for _, s := range workerTransitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// PodStatusFunc is the status a kill asks for (an eviction's Failed, reason
// and message, for example), the kubelet's KillPodOptions.PodStatusFunc.
// As the kubelet's, it is laid over the previous status, and the phase the
// stopped containers give can still win (SyncTerminatingPod).
type PodStatusFunc func(*v1.PodStatus)

// KillPodOptions go with a SyncPodKill update.
type KillPodOptions struct {
	// CompletedCh is closed once the pod's containers are stopped (or at
	// once when they already are).
	CompletedCh chan<- struct{}
	// Evict marks the termination as an eviction.
	Evict bool
	// PodStatusFunc is the status the kill asks for (SyncTerminatingPod).
	PodStatusFunc PodStatusFunc
	// PodTerminationGracePeriodSecondsOverride shortens the grace period.
	PodTerminationGracePeriodSecondsOverride *int64
}

// UpdatePodOptions is one update for a pod's worker.
type UpdatePodOptions struct {
	UpdateType UpdateType
	// StartTime is when the update was first seen (kept across coalesced
	// updates).
	StartTime time.Time
	// Pod is the pod; nil only for a runtime pod (RunningPod set).
	Pod *v1.Pod
	// RunningPod is a pod found in the runtime that no API pod matches; only
	// with SyncPodKill and Pod nil.
	RunningPod *cri.PodStatus
	// KillPodOptions go with SyncPodKill; for other updates they are
	// ignored (a CompletedCh is closed at once).
	KillPodOptions *KillPodOptions
	// Parent is the span of the call that asked for this update (the
	// provider's CreatePod, UpdatePod or DeletePod inside virtual-kubelet's
	// createOrUpdatePod or deletePod), the parent of the sync's span
	// (--tracing); none for the engine's own updates. A coalesced update
	// without one keeps the pending update's.
	Parent cri.SpanRef
}

// podSyncer is the work a pod worker calls: the engine implements it.
type podSyncer interface {
	// SyncPod brings the runtime to the pod's spec once and publishes its
	// status; it returns isTerminal when the pod has reached Succeeded or
	// Failed and must not be synced again.
	SyncPod(ctx context.Context, updateType UpdateType, pod *v1.Pod, podStatus *cri.PodStatus) (isTerminal bool, err error)
	// SyncTerminatingPod stops every container with the grace period; nil
	// only once none is running. ctx is cancelled when a shorter grace
	// period arrives. podStatus is the latest cached one, possibly older
	// than the last sync: the syncer must read the runtime again before it
	// stops anything.
	SyncTerminatingPod(ctx context.Context, pod *v1.Pod, podStatus *cri.PodStatus, gracePeriod int64, podStatusFn PodStatusFunc) error
	// SyncTerminatingRuntimePod stops a pod known only from the runtime.
	SyncTerminatingRuntimePod(ctx context.Context, runningPod *cri.PodStatus) error
	// SyncTerminatedPod publishes the final status and releases what the
	// pod holds. It runs again after an error.
	SyncTerminatedPod(ctx context.Context, pod *v1.Pod, podStatus *cri.PodStatus) error
}

// podStatusCache is what the workers read before each piece of work.
type podStatusCache interface {
	Get(uid types.UID) (*cri.PodStatus, error)
	GetNewerThan(ctx context.Context, uid types.UID, minTime time.Time) (*cri.PodStatus, error)
	// Modified is when the read behind uid's entry started.
	Modified(uid types.UID) (time.Time, bool)
}

// ErrNetworkNotReady is wrapped by sync errors that come from a runtime
// whose network is not ready yet; such pods are retried after a second.
var ErrNetworkNotReady = errors.New("network is not ready")

// Requeue periods (the kubelet's).
const (
	// backOffOnTransientError: retry after the network is not ready.
	backOffOnTransientError = time.Second
	resyncJitterFactor      = 0.5
	backOffJitterFactor     = 0.5
)

// PodWorkersConfig configures NewPodWorkers.
type PodWorkersConfig struct {
	Syncer podSyncer
	Cache  podStatusCache
	Queue  *WorkQueue
	Clock  clock.Clock
	// ResyncInterval is how long after a successful sync a pod is synced
	// again (with jitter) when nothing else happens.
	ResyncInterval time.Duration
	// BackOffPeriod is how long after a failed sync a pod is retried,
	// unless the error carries its own back-off (BackOffError).
	BackOffPeriod time.Duration
	// ObserveSync, if set, is told each sync's operation and duration:
	// the update type for SyncPod (create, update, sync), "kill" for a
	// terminating sync, "terminated" for the final one (the kubelet's
	// kubelet_pod_worker_duration_seconds).
	ObserveSync func(operation string, took time.Duration)
}

// BackOffError is a sync error that knows when to try again (a container in
// CrashLoopBackOff or an image in ImagePullBackOff).
type BackOffError struct {
	Err   error
	Until time.Time
}

func (e *BackOffError) Error() string { return e.Err.Error() }
func (e *BackOffError) Unwrap() error { return e.Err }

// podSyncStatus is everything the workers know of one UID. Guarded by
// PodWorkers.mu.
type podSyncStatus struct {
	// ctx is the context of the work in flight; cancelFn cancels it when
	// termination starts or its grace period shrinks.
	ctx      context.Context
	cancelFn context.CancelFunc
	fullname string

	// working is true while an update is pending or in flight.
	working bool
	// pendingUpdate is the next update (newer ones replace it); activeUpdate
	// is the last one the worker started, requeued on phase transitions.
	pendingUpdate *UpdatePodOptions
	activeUpdate  *UpdatePodOptions

	syncedAt      time.Time
	startedAt     time.Time
	terminatingAt time.Time
	terminatedAt  time.Time
	// gracePeriod is the effective grace period of the termination; it only
	// shrinks.
	gracePeriod int64
	// notifyPostTerminating are closed once containers are stopped;
	// statusPostTerminating adjust the status while terminating (the last
	// one wins).
	notifyPostTerminating []chan<- struct{}
	statusPostTerminating []PodStatusFunc

	startedTerminating bool
	deleted            bool
	evicted            bool
	finished           bool
	// restartRequested: a create for this UID arrived after termination
	// started; SyncKnownPods drops the record so the pod can start again.
	restartRequested bool
	// observedRuntime: the pod was seen in the runtime without a spec.
	observedRuntime bool
	// lastWork is the kind of the last work started (valid once hasWorked),
	// checked against workerTransitions. The first work may be of any kind:
	// a pod can be seen first terminal, or only in the runtime.
	lastWork  PodWorkerState
	hasWorked bool
}

func (s *podSyncStatus) IsStarted() bool              { return !s.startedAt.IsZero() }
func (s *podSyncStatus) IsTerminationRequested() bool { return !s.terminatingAt.IsZero() }
func (s *podSyncStatus) IsTerminated() bool           { return !s.terminatedAt.IsZero() }
func (s *podSyncStatus) IsFinished() bool             { return s.finished }

// WorkType is the work the pod's state calls for.
func (s *podSyncStatus) WorkType() PodWorkerState {
	switch {
	case s.IsTerminated():
		return TerminatedPodWork
	case s.IsTerminationRequested():
		return TerminatingPodWork
	default:
		return SyncPodWork
	}
}

// PodWorkers runs one goroutine per pod UID that carries the pod through
// sync, terminating and terminated, calling the podSyncer, and never runs
// two pods of the same namespace/name at once.
//
// Who calls what: the engine calls UpdatePod for every spec change, PLEG
// event, due work-queue entry and kill; SyncKnownPods from housekeeping with
// the desired pods; the predicates from wherever a decision depends on the
// pod's phase of life (clean-up, status). Each worker calls the podSyncer
// and, after each piece of work, enqueues its pod in the WorkQueue.
type PodWorkers struct {
	ctx    context.Context // bounds every worker goroutine
	cfg    PodWorkersConfig
	syncer podSyncer

	mu sync.Mutex
	// podSyncStatuses is every UID with a worker record; guarded by mu.
	podSyncStatuses map[types.UID]*podSyncStatus
	// podUpdates wakes each worker goroutine (buffered 1, written under mu);
	// closed when the worker must exit. Guarded by mu.
	podUpdates map[types.UID]chan struct{}
	// startedByFullname: the UID that holds each namespace/name; another
	// UID with the same name waits until that one is finished. Guarded by mu.
	startedByFullname map[string]types.UID
}

// NewPodWorkers validates cfg. ctx bounds every worker goroutine.
func NewPodWorkers(ctx context.Context, cfg PodWorkersConfig) (*PodWorkers, error) {
	if cfg.Syncer == nil || cfg.Cache == nil || cfg.Queue == nil {
		return nil, errors.New("lifecycle: pod workers need a syncer, a cache and a work queue")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.ResyncInterval <= 0 {
		cfg.ResyncInterval = time.Minute
	}
	if cfg.BackOffPeriod <= 0 {
		cfg.BackOffPeriod = 10 * time.Second
	}
	return &PodWorkers{
		ctx:               ctx,
		cfg:               cfg,
		syncer:            cfg.Syncer,
		podSyncStatuses:   map[types.UID]*podSyncStatus{},
		podUpdates:        map[types.UID]chan struct{}{},
		startedByFullname: map[string]types.UID{},
	}, nil
}

func fullName(namespace, name string) string { return name + "_" + namespace }

// runtimePodAsAPIPod is the minimal API pod that stands for a runtime pod.
func runtimePodAsAPIPod(rp *cri.PodStatus) *v1.Pod {
	p := &v1.Pod{}
	p.UID, p.Namespace, p.Name = rp.Ref.UID, rp.Ref.Namespace, rp.Ref.Name
	return p
}

// UpdatePod hands an update to the pod's worker, starting one if needed. It
// never blocks on the runtime. A newer update replaces a pending one; an
// update that requests termination (kill, deletion, terminal phase) or
// shortens the grace period cancels the work in flight.
// Its checks run in the kubelet's podWorkers.UpdatePod order (finished, UID
// reuse, termination, grace shortening), the contract the timeline above
// PodWorkerState draws; the steps that change the podSyncStatus are its
// methods, all called under p.mu. What is left here is that order, which
// is read whole.
func (p *PodWorkers) UpdatePod(options UpdatePodOptions) {
	uid, ns, name, isRuntimePod, ok := updateIdentity(&options)
	if !ok {
		return
	}

	p.mu.Lock()
	defer p.mu.Unlock()

	now := p.cfg.Clock.Now()
	status, ok := p.podSyncStatuses[uid]
	firstTime := !ok
	if !ok {
		status = &podSyncStatus{syncedAt: now, fullname: fullName(ns, name)}
		// A pod already terminal in the API whose runtime state has nothing
		// running (crivk restarted): nothing to run or stop, only the
		// terminated work remains.
		if options.Pod != nil && isTerminalPhase(options.Pod.Status.Phase) {
			if st, err := p.cfg.Cache.Get(uid); err == nil && !st.Running() {
				status.terminatingAt, status.terminatedAt = now, now
				status.startedTerminating = true
			}
		}
		p.podSyncStatuses[uid] = status
	}

	pod := options.Pod
	if isRuntimePod {
		status.observedRuntime = true
		pod = status.knownSpec(&options)
	}

	// A create for a UID already terminating: the pod was re-added (UID
	// reuse); it starts again once SyncKnownPods dropped the old record.
	if !firstTime && status.IsTerminationRequested() && options.UpdateType == SyncPodCreate {
		status.restartRequested = true
		closeKillChannel(options.KillPodOptions)
		return
	}
	if status.IsFinished() {
		closeKillChannel(options.KillPodOptions)
		return
	}

	becameTerminating := status.requestTermination(pod, &options, isRuntimePod, now)

	shortened := false
	switch {
	case status.IsTerminated():
		// Containers are stopped already: a kill has nothing left to wait for.
		if isRuntimePod {
			return
		}
		closeKillChannel(options.KillPodOptions)
		options.KillPodOptions = nil
	case status.IsTerminationRequested():
		shortened = status.takeKillOptions(pod, &options)
	default:
		closeKillChannel(options.KillPodOptions)
		options.KillPodOptions = nil
	}

	ch, exists := p.podUpdates[uid]
	if !exists {
		ch = make(chan struct{}, 1)
		p.podUpdates[uid] = ch
		go p.podWorkerLoop(uid, ch)
	}
	// Coalesced updates keep the earliest start time, and the pending
	// update's span if they bring none.
	if pu := status.pendingUpdate; pu != nil && !pu.StartTime.IsZero() && pu.StartTime.Before(options.StartTime) {
		options.StartTime = pu.StartTime
	}
	if pu := status.pendingUpdate; pu != nil && options.Parent.IsZero() {
		options.Parent = pu.Parent
	}
	status.pendingUpdate = &options
	status.working = true
	signal(ch)

	if (becameTerminating || shortened) && status.cancelFn != nil {
		status.cancelFn()
	}
}

// updateIdentity is the pod an update is about: its spec's, else the
// runtime pod's, which only a kill may carry (a runtime pod has no spec to
// run). ok is false, and the update logged and ignored, otherwise.
func updateIdentity(options *UpdatePodOptions) (uid types.UID, ns, name string, isRuntimePod, ok bool) {
	switch {
	case options.Pod != nil:
		options.RunningPod = nil
		return options.Pod.UID, options.Pod.Namespace, options.Pod.Name, false, true
	case options.RunningPod != nil:
		if options.UpdateType != SyncPodKill {
			log.L.WithField("uid", options.RunningPod.Ref.UID).Error("runtime pod update that is not a kill, ignored")
			return "", "", "", false, false
		}
		ref := options.RunningPod.Ref
		return ref.UID, ref.Namespace, ref.Name, true, true
	default:
		log.L.Error("pod update without a pod, ignored")
		return "", "", "", false, false
	}
}

// knownSpec is the pod a runtime pod's kill is about: the spec the worker
// knows (its pending update's, else its active one's), which then replaces
// the runtime pod in options, else the runtime's stand-in. Must hold p.mu.
func (s *podSyncStatus) knownSpec(options *UpdatePodOptions) *v1.Pod {
	switch {
	case s.pendingUpdate != nil && s.pendingUpdate.Pod != nil:
		options.Pod, options.RunningPod = s.pendingUpdate.Pod, nil
		return options.Pod
	case s.activeUpdate != nil && s.activeUpdate.Pod != nil:
		options.Pod, options.RunningPod = s.activeUpdate.Pod, nil
		return options.Pod
	default:
		return runtimePodAsAPIPod(options.RunningPod)
	}
}

// requestTermination marks the pod terminating at now when this update is
// the first to ask for it (a runtime pod, a deletion, a terminal phase, a
// kill, an eviction's kill) and reports whether it did; a deletion seen
// after termination was requested is still recorded. Must hold p.mu.
func (s *podSyncStatus) requestTermination(pod *v1.Pod, options *UpdatePodOptions, isRuntimePod bool, now time.Time) bool {
	if s.IsTerminationRequested() {
		if pod.DeletionTimestamp != nil {
			s.deleted = true
		}
		return false
	}
	switch {
	case isRuntimePod, pod.DeletionTimestamp != nil:
		s.deleted = true
	case isTerminalPhase(pod.Status.Phase):
	case options.UpdateType == SyncPodKill:
		if options.KillPodOptions != nil && options.KillPodOptions.Evict {
			s.evicted = true
		}
	default:
		return false
	}
	s.terminatingAt = now
	return true
}

// takeKillOptions records, for a pod whose termination was requested, the
// kill's completion channel and status function, and sets the grace period
// in force (effectiveGracePeriod) as the update's override. It reports
// whether the grace period was shortened. Must hold p.mu.
func (s *podSyncStatus) takeKillOptions(pod *v1.Pod, options *UpdatePodOptions) (shortened bool) {
	if options.KillPodOptions == nil {
		options.KillPodOptions = &KillPodOptions{}
	}
	if ch := options.KillPodOptions.CompletedCh; ch != nil {
		s.notifyPostTerminating = append(s.notifyPostTerminating, ch)
	}
	if fn := options.KillPodOptions.PodStatusFunc; fn != nil {
		s.statusPostTerminating = append(s.statusPostTerminating, fn)
	}
	var grace int64
	grace, shortened = effectiveGracePeriod(s, pod, options.KillPodOptions)
	s.gracePeriod = grace
	ko := *options.KillPodOptions
	ko.PodTerminationGracePeriodSecondsOverride = &grace
	options.KillPodOptions = &ko
	return shortened
}

func closeKillChannel(o *KillPodOptions) {
	if o != nil && o.CompletedCh != nil {
		close(o.CompletedCh)
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func isTerminalPhase(p v1.PodPhase) bool { return p == v1.PodSucceeded || p == v1.PodFailed }

// effectiveGracePeriod is the kubelet's rule: the shortest of the grace
// period in force, the deletion's and the kill's override; the pod spec's
// (default 30 s) when none is set; at least 1 s. It reports whether a grace
// period in force was changed (only ever shortened).
func effectiveGracePeriod(status *podSyncStatus, pod *v1.Pod, o *KillPodOptions) (int64, bool) {
	grace := status.gracePeriod
	overridden := false
	shorter := func(v *int64) {
		if v != nil && (grace == 0 || *v < grace) {
			grace = *v
			overridden = true
		}
	}
	shorter(pod.DeletionGracePeriodSeconds)
	if o != nil {
		shorter(o.PodTerminationGracePeriodSecondsOverride)
	}
	if !overridden && grace == 0 {
		grace = v1.DefaultTerminationGracePeriodSeconds
		if pod.Spec.TerminationGracePeriodSeconds != nil {
			grace = *pod.Spec.TerminationGracePeriodSeconds
		}
	}
	if grace < 1 {
		grace = 1
	}
	return grace, status.gracePeriod != 0 && status.gracePeriod != grace
}

// podWork is one piece of work a worker takes.
type podWork struct {
	WorkType PodWorkerState
	Options  UpdatePodOptions
}

// startPodSync takes the pending update of uid. ok=false: nothing to do
// (or the record is gone: the worker exits when its channel closes).
// canStart=false: the pod must wait for another pod of the same name.
func (p *PodWorkers) startPodSync(uid types.UID) (ctx context.Context, work podWork, canStart, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	status, ok := p.podSyncStatuses[uid]
	if !ok || status.pendingUpdate == nil {
		if ok {
			status.working = false
		}
		return nil, work, false, false
	}
	work.WorkType = status.WorkType()
	if status.hasWorked && !canTransition(status.lastWork, work.WorkType) {
		// Cannot happen: the timestamps behind WorkType only move forward.
		log.L.WithField("uid", uid).Errorf("refused pod worker transition %s -> %s", status.lastWork, work.WorkType)
		status.pendingUpdate, status.working = nil, false
		return nil, work, false, false
	}
	status.lastWork, status.hasWorked = work.WorkType, true
	work.Options = *status.pendingUpdate
	status.pendingUpdate = nil
	if status.ctx == nil || status.ctx.Err() != nil {
		status.ctx, status.cancelFn = context.WithCancel(p.ctx)
	}
	ctx = status.ctx

	if status.IsStarted() || (work.Options.RunningPod != nil && work.WorkType == TerminatingPodWork) {
		status.activeUpdate = &work.Options
		return ctx, work, true, true
	}
	if work.Options.Pod == nil {
		// A runtime pod can only be terminated, never started.
		status.activeUpdate = &work.Options
		return ctx, work, false, true
	}
	if work.WorkType == SyncPodWork {
		if holder, held := p.startedByFullname[status.fullname]; held && holder != uid {
			// Wait for the other pod of this name to finish.
			status.pendingUpdate = &work.Options
			status.working = false
			p.cfg.Queue.Enqueue(uid, wait.Jitter(p.cfg.BackOffPeriod, backOffJitterFactor))
			return ctx, work, false, true
		}
	}
	if _, held := p.startedByFullname[status.fullname]; !held {
		p.startedByFullname[status.fullname] = uid
	}
	// else: killed before it started (a static pod whose manifest changed
	// again while the old pod still terminates): nothing of it ever ran,
	// it terminates without taking the name from the pod that holds it,
	// so that the next pod of the name still waits for that one (the
	// kubelet's cleanupUnstartedPod never holds the name either).
	status.startedAt = p.cfg.Clock.Now()
	status.activeUpdate = &work.Options
	return ctx, work, true, true
}

// podWorkerLoop is the goroutine of one UID: it takes updates until the pod
// is finished (or its record is dropped and its channel closed).
// It stays one function, as the kubelet's podWorkerLoop: one iteration
// takes the pending update, waits for the cache, runs the sync of the
// worker's state and completes the work, and the steps share the update.
func (p *PodWorkers) podWorkerLoop(uid types.UID, updates <-chan struct{}) {
	var lastSyncTime time.Time
	for range updates {
		ctx, work, canStart, ok := p.startPodSync(uid)
		if !ok || !canStart {
			continue
		}
		pod := work.Options.Pod
		if pod == nil {
			pod = runtimePodAsAPIPod(work.Options.RunningPod)
		}
		ctx = log.WithLogger(ctx, log.G(ctx).WithFields(log.Fields{"pod": pod.Namespace + "/" + pod.Name, "uid": uid}))

		var isTerminal bool
		workStart := p.cfg.Clock.Now()
		err := func() error {
			var status *cri.PodStatus
			switch {
			case work.Options.RunningPod != nil:
			case work.WorkType == TerminatingPodWork:
				// A kill does not wait for the next relist: the syncer
				// reads the runtime itself before it stops containers
				// (podSyncer.SyncTerminatingPod), so the latest entry will do.
				status, _ = p.cfg.Cache.Get(uid)
			default:
				var err error
				if status, err = p.cfg.Cache.GetNewerThan(ctx, uid, lastSyncTime); err != nil {
					return fmt.Errorf("determining status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
				}
			}
			var err error
			syncStart := p.cfg.Clock.Now()
			op := work.Options.UpdateType.String()
			switch work.WorkType {
			case TerminatedPodWork:
				op = "terminated"
			case TerminatingPodWork:
				op = SyncPodKill.String()
			}
			if p.cfg.ObserveSync != nil {
				defer func() { p.cfg.ObserveSync(op, p.cfg.Clock.Since(syncStart)) }()
			}
			// One span per sync (--tracing): the CRI calls it makes are
			// its children; it is the child of the call that asked for
			// the update, if any (virtual-kubelet's createOrUpdatePod or
			// deletePod), though that call has returned by now.
			ctx, span := cri.StartSpanFrom(ctx, work.Options.Parent, "podWorker."+op)
			ctx = span.WithFields(ctx, log.Fields{"pod": pod.Namespace + "/" + pod.Name, "uid": string(uid)})
			defer func() { span.SetStatus(err); span.End() }()
			switch work.WorkType {
			case TerminatedPodWork:
				err = p.syncer.SyncTerminatedPod(ctx, pod, status)
			case TerminatingPodWork:
				// A pod that ended on its own has no kill options: its
				// spec's grace period applies.
				grace, _ := effectiveGracePeriod(&podSyncStatus{}, pod, nil)
				if o := work.Options.KillPodOptions; o != nil && o.PodTerminationGracePeriodSecondsOverride != nil {
					grace = *o.PodTerminationGracePeriodSecondsOverride
				}
				statusFn := p.acknowledgeTerminating(uid)
				if work.Options.RunningPod != nil {
					err = p.syncer.SyncTerminatingRuntimePod(ctx, work.Options.RunningPod)
				} else {
					err = p.syncer.SyncTerminatingPod(ctx, pod, status, grace, statusFn)
				}
			default:
				isTerminal, err = p.syncer.SyncPod(ctx, work.Options.UpdateType, pod, status)
			}
			lastSyncTime = p.cfg.Clock.Now()
			// The syncer reads the runtime back right after it acted (and
			// fails when it cannot): an entry read after this work started
			// reflects it, so the next work need not wait for a relist.
			if t, ok := p.cfg.Cache.Modified(uid); err == nil && ok && !t.Before(workStart) {
				lastSyncTime = t.Add(-time.Nanosecond)
			}
			return err
		}()

		transition := false
		switch {
		case errors.Is(err, context.Canceled):
			// Cancelled by a kill or a shorter grace period: that update is
			// pending already.
			log.G(ctx).WithField("work", work.WorkType).Debug("pod work cancelled")
		case err != nil:
			log.G(ctx).WithError(err).WithField("work", work.WorkType).Warn("pod sync failed")
		case work.WorkType == TerminatedPodWork:
			p.completeTerminated(uid)
			return
		case work.WorkType == TerminatingPodWork && work.Options.RunningPod != nil:
			p.completeTerminatingRuntimePod(uid)
			return
		case work.WorkType == TerminatingPodWork:
			p.completeTerminating(uid)
			transition = true
		case isTerminal:
			p.completeSync(uid)
			transition = true
		}
		p.completeWork(uid, transition, err)
	}
}

// acknowledgeTerminating marks that the terminating work has begun and
// returns the status adjustment to apply, if any.
func (p *PodWorkers) acknowledgeTerminating(uid types.UID) PodStatusFunc {
	p.mu.Lock()
	defer p.mu.Unlock()
	status, ok := p.podSyncStatuses[uid]
	if !ok {
		return nil
	}
	if status.IsTerminationRequested() {
		status.startedTerminating = true
	}
	if n := len(status.statusPostTerminating); n > 0 {
		return status.statusPostTerminating[n-1]
	}
	return nil
}

// completeSync: the pod reached a terminal phase; terminate it.
func (p *PodWorkers) completeSync(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	status, ok := p.podSyncStatuses[uid]
	if !ok {
		return
	}
	if !status.IsTerminationRequested() {
		status.terminatingAt = p.cfg.Clock.Now()
	}
	status.startedTerminating = true
	p.requeueLastPodUpdate(uid, status)
}

// completeTerminating: containers are stopped; tell the kill requesters and
// move on to the terminated work.
func (p *PodWorkers) completeTerminating(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	status, ok := p.podSyncStatuses[uid]
	if !ok {
		return
	}
	status.terminatedAt = p.cfg.Clock.Now()
	for _, ch := range status.notifyPostTerminating {
		close(ch)
	}
	status.notifyPostTerminating, status.statusPostTerminating = nil, nil
	p.requeueLastPodUpdate(uid, status)
}

// completeTerminatingRuntimePod: a runtime pod is stopped; nothing else
// remains of it.
func (p *PodWorkers) completeTerminatingRuntimePod(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if status := p.finish(uid); status != nil {
		status.terminatedAt = p.cfg.Clock.Now()
		delete(p.podSyncStatuses, uid)
	}
}

// completeTerminated: the pod is finished; its worker exits.
func (p *PodWorkers) completeTerminated(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finish(uid)
}

// finish ends the worker of uid: its channel is closed (its goroutine
// exits), its record says finished and not working, and the pod's
// namespace/name is free for another pod to start. It returns the record,
// nil if there is none. Must hold p.mu.
func (p *PodWorkers) finish(uid types.UID) *podSyncStatus {
	p.cleanupPodUpdates(uid)
	status, ok := p.podSyncStatuses[uid]
	if !ok {
		return nil
	}
	status.finished, status.working = true, false
	p.releaseFullname(uid, status)
	return status
}

// releaseFullname lets another pod of uid's namespace/name start, if uid
// held it. Must hold p.mu.
func (p *PodWorkers) releaseFullname(uid types.UID, status *podSyncStatus) {
	if p.startedByFullname[status.fullname] == uid {
		delete(p.startedByFullname, status.fullname)
	}
}

// completeWork requeues the pod: at once after a phase transition, after
// the resync interval on success, after a second when the network is not
// ready, at the back-off's end or after BackOffPeriod on error.
func (p *PodWorkers) completeWork(uid types.UID, transition bool, err error) {
	q, cfg := p.cfg.Queue, p.cfg
	var be *BackOffError
	switch {
	case transition:
		q.Enqueue(uid, 0)
	case err == nil:
		q.Enqueue(uid, wait.Jitter(cfg.ResyncInterval, resyncJitterFactor))
	case errors.Is(err, ErrNetworkNotReady):
		q.Enqueue(uid, wait.Jitter(backOffOnTransientError, backOffJitterFactor))
	case errors.As(err, &be):
		d := be.Until.Sub(cfg.Clock.Now())
		if d < 0 {
			d = 0
		}
		if d > cfg.ResyncInterval {
			d = cfg.ResyncInterval
		}
		q.Enqueue(uid, d)
	default:
		q.Enqueue(uid, wait.Jitter(cfg.BackOffPeriod, backOffJitterFactor))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if status, ok := p.podSyncStatuses[uid]; ok {
		if status.pendingUpdate != nil {
			signal(p.podUpdates[uid])
		} else {
			status.working = false
		}
	}
}

// requeueLastPodUpdate makes the last update pending again (for the next
// phase), unless a newer one is pending; the next phase follows from the
// last update's cause, so a pending update without a span takes the last
// one's (--tracing: a kill's terminated work stays in deletePod's trace).
// Must hold p.mu.
func (p *PodWorkers) requeueLastPodUpdate(uid types.UID, status *podSyncStatus) {
	if status.activeUpdate == nil {
		return
	}
	if pu := status.pendingUpdate; pu != nil {
		if pu.Parent.IsZero() {
			pu.Parent = status.activeUpdate.Parent
		}
		return
	}
	u := *status.activeUpdate
	status.pendingUpdate = &u
	status.working = true
	if ch, ok := p.podUpdates[uid]; ok {
		signal(ch)
	}
}

// cleanupPodUpdates closes and forgets the worker's channel so that its
// goroutine exits. Must hold p.mu.
func (p *PodWorkers) cleanupPodUpdates(uid types.UID) {
	if ch, ok := p.podUpdates[uid]; ok {
		close(ch)
		delete(p.podUpdates, uid)
	}
}

// PodWorkerSync is what SyncKnownPods reports of one worker.
type PodWorkerSync struct {
	State PodWorkerState
	// Orphan: the pod is not in the desired set.
	Orphan bool
	// HasConfig: the worker has the pod's spec (false for a runtime pod).
	HasConfig bool
}

// SyncKnownPods drops the records of finished pods that are no longer
// desired (or were re-created with the same UID), starts the termination of
// started pods that are no longer desired, and reports every remaining
// worker.
func (p *PodWorkers) SyncKnownPods(desired []*v1.Pod) map[types.UID]PodWorkerSync {
	known := make(map[types.UID]bool, len(desired))
	for _, pod := range desired {
		known[pod.UID] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[types.UID]PodWorkerSync{}
	for uid, status := range p.podSyncStatuses {
		orphan := !known[uid]
		if (status.restartRequested || orphan) && p.removeTerminatedWorker(uid, status, orphan) {
			continue
		}
		s := PodWorkerSync{State: status.WorkType(), Orphan: orphan}
		switch {
		case status.activeUpdate != nil:
			s.HasConfig = status.activeUpdate.Pod != nil
		case status.pendingUpdate != nil:
			s.HasConfig = status.pendingUpdate.Pod != nil
		}
		out[uid] = s
	}
	return out
}

// removeTerminatedWorker drops a finished pod's record. An orphan that is
// not finished is made to terminate (grace period of its spec, or 1 s for a
// runtime pod) and kept. Must hold p.mu.
func (p *PodWorkers) removeTerminatedWorker(uid types.UID, status *podSyncStatus, orphan bool) bool {
	if !status.finished {
		if !orphan {
			return false
		}
		status.deleted = true
		switch {
		case !status.IsStarted() && !status.observedRuntime:
			// Never started: nothing can be running, drop it.
		case !status.IsTerminationRequested():
			status.terminatingAt = p.cfg.Clock.Now()
			status.gracePeriod = 1
			if status.activeUpdate != nil && status.activeUpdate.Pod != nil {
				status.gracePeriod, _ = effectiveGracePeriod(status, status.activeUpdate.Pod, nil)
			}
			p.requeueLastPodUpdate(uid, status)
			return false
		default:
			p.requeueLastPodUpdate(uid, status)
			return false
		}
	}
	delete(p.podSyncStatuses, uid)
	p.cleanupPodUpdates(uid)
	p.releaseFullname(uid, status)
	return true
}

// The predicates: what other parts of the engine may do with a pod, by the
// worker's state. An unknown UID gets the answer that is safe for a pod that
// was never started.

// known reports, under p.mu, what the record of uid says (known: whether
// there is one; f is only called when there is).
func (p *PodWorkers) known(uid types.UID, unknown bool, f func(*podSyncStatus) bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.podSyncStatuses[uid]
	if !ok {
		return unknown
	}
	return f(s)
}

// IsPodKnownTerminated: the worker has finished the pod.
func (p *PodWorkers) IsPodKnownTerminated(uid types.UID) bool {
	return p.known(uid, false, (*podSyncStatus).IsTerminated)
}

// couldHaveRunningContainers: the pod may still have running containers
// (known and not yet terminated).
func (p *PodWorkers) couldHaveRunningContainers(uid types.UID) bool {
	return p.known(uid, false, func(s *podSyncStatus) bool { return !s.IsTerminated() })
}

// IsPodTerminationRequested: the pod is terminating or terminated.
func (p *PodWorkers) IsPodTerminationRequested(uid types.UID) bool {
	return p.known(uid, false, (*podSyncStatus).IsTerminationRequested)
}

// shouldPodContainersBeTerminating: containers must not run (termination
// requested, or the pod is unknown).
func (p *PodWorkers) shouldPodContainersBeTerminating(uid types.UID) bool {
	return p.known(uid, true, (*podSyncStatus).IsTerminationRequested)
}

// shouldPodRuntimeBeRemoved: the sandbox may be removed (terminated, or the
// pod is unknown).
func (p *PodWorkers) shouldPodRuntimeBeRemoved(uid types.UID) bool {
	return p.known(uid, true, (*podSyncStatus).IsTerminated)
}

// shouldPodContentBeRemoved: containers, logs and data may be removed
// (terminated and deleted, or unknown).
func (p *PodWorkers) shouldPodContentBeRemoved(uid types.UID) bool {
	return p.known(uid, true, func(s *podSyncStatus) bool { return s.IsTerminated() && s.deleted })
}

// IsPodFinished: the worker is done with the pod (its goroutine exited).
func (p *PodWorkers) IsPodFinished(uid types.UID) bool {
	return p.known(uid, false, (*podSyncStatus).IsFinished)
}

// IsKnown reports whether uid has a worker record.
func (p *PodWorkers) IsKnown(uid types.UID) bool {
	return p.known(uid, false, func(*podSyncStatus) bool { return true })
}

// isWorking reports whether uid has work pending or in flight (tests wait
// on it).
func (p *PodWorkers) isWorking(uid types.UID) bool {
	return p.known(uid, false, func(s *podSyncStatus) bool { return s.working })
}

// WorkingPod is one pod with a worker record, as the kubelet counts them
// for kubelet_working_pods.
type WorkingPod struct {
	UID  types.UID
	Work PodWorkerState
	// RuntimeOnly: the pod was only ever seen in the runtime (no spec).
	RuntimeOnly bool
	// Static: the spec of its active update (else its pending one) is a
	// static pod's (podutil.IsStaticPod), as the kubelet's
	// PodWorkerSync.Static.
	Static bool
}

// isStatic: the spec the worker holds, its active update's else its
// pending one's, is a static pod's (the kubelet's SyncKnownPods rule).
// Must hold p.mu.
func (s *podSyncStatus) isStatic() bool {
	switch {
	case s.activeUpdate != nil:
		return s.activeUpdate.Pod != nil && podutil.IsStaticPod(s.activeUpdate.Pod)
	case s.pendingUpdate != nil:
		return s.pendingUpdate.Pod != nil && podutil.IsStaticPod(s.pendingUpdate.Pod)
	}
	return false
}

// WorkingPods lists every pod with a worker record and the work its state
// calls for.
func (p *PodWorkers) WorkingPods() []WorkingPod {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]WorkingPod, 0, len(p.podSyncStatuses))
	for uid, s := range p.podSyncStatuses {
		out = append(out, WorkingPod{UID: uid, Work: s.WorkType(), RuntimeOnly: s.observedRuntime, Static: s.isStatic()})
	}
	return out
}
