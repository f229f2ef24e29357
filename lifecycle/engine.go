package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/lifecycle/admission"
	"github.com/crivk/crivk/lifecycle/prober"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

// Runtime is what the engine needs of the runtime manager (*cri.Runtime).
type Runtime interface {
	GetPodStatus(ctx context.Context, ref cri.PodRef) (*cri.PodStatus, error)
	ListPods(ctx context.Context) ([]cri.PodRef, error)
	SyncPod(ctx context.Context, pod *v1.Pod, status *cri.PodStatus, plan cri.PodActions, b *cri.BackOffs, now time.Time) *cri.SyncResult
	// KillPod runs preStop hooks and stops containers; pod is nil for a
	// pod only the runtime knows.
	KillPod(ctx context.Context, pod *v1.Pod, status *cri.PodStatus, grace int64) error
	RemovePod(ctx context.Context, status *cri.PodStatus) error
	// RemoveInterrupted removes containers a previous agent created but
	// never started (cri.Runtime.RemoveInterrupted).
	RemoveInterrupted(ctx context.Context, status *cri.PodStatus) (bool, error)
}

var _ Runtime = (*cri.Runtime)(nil)

// Config configures an Engine; NewEngine fills defaults and validates it.
type Config struct {
	Runtime     Runtime
	RuntimeName string // e.g. "containerd", for container IDs
	NodeIP      string
	Clock       clock.WithTicker
	// Cache is the runtime status cache the PLEG fills; NewEngine makes one
	// when nil (then only the engine's own reads fill it).
	Cache *Cache
	// SyncInterval is how long after a successful sync a pod is synced again
	// when nothing happens to it (the PLEG and spec changes sync it at once).
	SyncInterval time.Duration
	// HousekeepingInterval is how often finished and orphaned pods are
	// cleaned up (default 2s, the kubelet's).
	HousekeepingInterval time.Duration
	// OnTerminated is called once a deleted pod's containers are stopped,
	// its volumes are gone and its final status was handed on (before its
	// stopped containers and sandbox are removed, as the kubelet). The
	// provider deletes the API object there. It is called again after an
	// error, so it must be idempotent.
	OnTerminated func(ctx context.Context, pod *v1.Pod) error
	// Recorder receives kubelet-style events; nil drops them.
	Recorder record.EventRecorder
	// APIPod, when set, returns the API's current copy of a pod (an informer
	// lister): virtual-kubelet forwards spec changes only, so conditions
	// other writers set (readiness gates) are read from it at each sync.
	APIPod func(namespace, name string) *v1.Pod
	// NetworkError, when set, reports the runtime's network as not ready;
	// pods not on the host network then wait (retried every second), as
	// with the kubelet.
	NetworkError func() error
	// Objects reads the API objects pods reference (ConfigMaps, Secrets,
	// Services, tokens); nil: none can be read.
	Objects Objects
	// Volumes prepares and tears down pod volumes; nil: pods get no
	// volume mounts.
	Volumes Volumes
	// RootDir is crivk's state directory (--root-dir); pod directories live
	// under <RootDir>/pods/<uid>.
	RootDir string
	// NodeAllocatable is the node's allocatable resources: the downward
	// API's value of a limit a container does not set (envvars.go).
	NodeAllocatable v1.ResourceList
	// ClusterDomain names pods with a subdomain in their /etc/hosts.
	ClusterDomain string
	// Node returns the node as the API has it (labels, taints,
	// allocatable) for admission (admit.go); nil: every pod is admitted.
	Node func() *v1.Node
	// ObserveSync, if set, is told every pod sync's operation and
	// duration (PodWorkersConfig.ObserveSync).
	ObserveSync func(operation string, took time.Duration)
	// ObservePodStart, if set, is told how long after the engine first
	// saw a pod it turned Running (the kubelet's
	// kubelet_pod_start_duration_seconds): once per pod, for pods the API
	// had Pending (not those adopted running after a restart).
	ObservePodStart func(took time.Duration)
	// Sysctls is the node's sysctl allowlist for admission; nil: pod
	// sysctls are not checked (the runtime decides).
	Sysctls *admission.Sysctls
	// ProbeRuntime runs liveness, readiness and startup probes (probes.go);
	// nil: nothing is probed. ProbeMetrics counts probe runs (may be nil).
	ProbeRuntime ProbeRuntime
	ProbeMetrics prober.Metrics
	// PodCgroups keeps the pod cgroups (lifecycle/cm); nil: pods get
	// none (the runtime's default cgroup parent).
	PodCgroups PodCgroups
}

// PodCgroups is the pod cgroup tree as the engine uses it (lifecycle/cm's
// Manager): created or updated before a pod's sandbox, removed once its
// containers are stopped, listed for the orphan sweep.
type PodCgroups interface {
	EnsurePod(pod *v1.Pod) error
	RemovePod(uid types.UID) error
	PodUIDs() ([]types.UID, error)
}

// Engine is crivk's kubelet core: a pod manager (the pods virtual-kubelet
// gave it), the pod workers, the sync loop that feeds them and the podSyncer
// they call, which plans and acts through the Runtime and publishes through
// the StatusManager.
type Engine struct {
	cfg     Config
	backoff *cri.BackOffs
	cache   *Cache
	queue   *WorkQueue
	workers *PodWorkers
	status  *StatusManager
	probes  probeManager // nil without Config.ProbeRuntime
	// housekeeping serialises Housekeeping runs.
	housekeeping sync.Mutex
	// mountEvents throttles FailedMount events (volumes.go).
	mountEvents mountEvents

	mu sync.Mutex
	// pods is the desired set: every pod handed to the engine, until its
	// API object was deleted after termination. Guarded by mu.
	pods map[types.UID]*v1.Pod
	// rejected holds the pods admission refused (admit.go): never given
	// to the workers. Guarded by mu.
	rejected map[types.UID]*v1.Pod
	// admitMu serialises admission decisions with the insertion of the
	// admitted pod into pods.
	admitMu sync.Mutex
	// waiting: per pod, why containers the last sync wanted started are
	// not running. podIPs: the pod IPs once known. Guarded by mu.
	waiting map[types.UID]map[string]cri.Waiting
	podIPs  map[types.UID][]string
	// firstSeen: when each pod was first given to the engine, until it
	// runs (ObservePodStart). Guarded by mu.
	firstSeen map[types.UID]time.Time
	notify    func(*v1.Pod) // guarded by mu
	// desired lists the API's pods for this node once the informer is
	// synced; until then no runtime pod is taken for an orphan. Guarded by mu.
	desired func() ([]*v1.Pod, error)
}

// Restart and pull back-off, the kubelet's constants.
const (
	backOffInitial = 10 * time.Second
	backOffMax     = 300 * time.Second
	// backOffPoll is how soon a pod whose container waits for a back-off is
	// synced again; no runtime event announces the end of a back-off.
	backOffPoll = time.Second
	// workQueuePoll is how often due pods are taken from the work queue.
	workQueuePoll = time.Second
	// finalStatusTimeout bounds the wait for a terminated pod's final
	// status to be handed on before its API object is deleted.
	finalStatusTimeout = 5 * time.Second
)

// NewEngine validates cfg and returns an engine with no pods. ctx bounds
// the pod workers' goroutines (they outlive the calls that start them);
// Run starts the sync loop.
func NewEngine(ctx context.Context, cfg Config) (*Engine, error) {
	if cfg.Runtime == nil {
		return nil, errors.New("lifecycle: no runtime")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = 10 * time.Second
	}
	if cfg.HousekeepingInterval <= 0 {
		cfg.HousekeepingInterval = 2 * time.Second
	}
	if cfg.OnTerminated == nil {
		cfg.OnTerminated = func(context.Context, *v1.Pod) error { return nil }
	}
	if cfg.Cache == nil {
		cfg.Cache = NewCache()
	}
	e := &Engine{
		cfg: cfg,
		backoff: &cri.BackOffs{
			Restart: flowcontrol.NewBackOff(backOffInitial, backOffMax),
			Pull:    flowcontrol.NewBackOff(backOffInitial, backOffMax),
		},
		cache:     cfg.Cache,
		queue:     NewWorkQueue(cfg.Clock),
		pods:      map[types.UID]*v1.Pod{},
		rejected:  map[types.UID]*v1.Pod{},
		waiting:   map[types.UID]map[string]cri.Waiting{},
		podIPs:    map[types.UID][]string{},
		firstSeen: map[types.UID]time.Time{},
	}
	var err error
	if e.status, err = NewStatusManager(StatusManagerConfig{Clock: cfg.Clock, Notify: e.publish}); err != nil {
		return nil, err
	}
	e.workers, err = NewPodWorkers(ctx, PodWorkersConfig{
		Syncer:         (*engineSyncer)(e),
		Cache:          e.cache,
		Queue:          e.queue,
		Clock:          cfg.Clock,
		ResyncInterval: cfg.SyncInterval,
		ObserveSync:    cfg.ObserveSync,
	})
	if err != nil {
		return nil, err
	}
	if err := e.startProber(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// Run delivers statuses and runs the sync loop until ctx ends: every
// second the due pods of the work queue are synced; every housekeeping
// interval finished pods are forgotten and orphans terminated.
func (e *Engine) Run(ctx context.Context) {
	go e.status.Run(ctx)
	work := e.cfg.Clock.NewTicker(workQueuePoll)
	defer work.Stop()
	house := e.cfg.Clock.NewTicker(e.cfg.HousekeepingInterval)
	defer house.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-work.C():
			e.syncDue()
		case <-house.C():
			e.Housekeeping(ctx)
		}
	}
}

// syncDue hands the due pods of the work queue to their workers.
func (e *Engine) syncDue() {
	// Pods past their active deadline are synced at once (the kubelet checks
	// every second too), whatever their place in the queue.
	now := e.cfg.Clock.Now()
	e.mu.Lock()
	var late []types.UID
	for uid, p := range e.pods {
		if p.Spec.ActiveDeadlineSeconds == nil || p.DeletionTimestamp != nil {
			continue
		}
		if st, ok := e.status.GetPodStatus(uid); ok && !isTerminalPhase(st.Phase) && pastActiveDeadline(p, st.StartTime, now) {
			late = append(late, uid)
		}
	}
	e.mu.Unlock()
	for _, uid := range late {
		if !e.workers.IsPodTerminationRequested(uid) {
			e.queue.Enqueue(uid, 0)
		}
	}
	for _, uid := range e.queue.GetWork() {
		if pod := e.desiredPod(uid); pod != nil {
			e.workers.UpdatePod(UpdatePodOptions{UpdateType: SyncPodSync, Pod: pod, StartTime: e.cfg.Clock.Now()})
		}
	}
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

// SetDesiredPods gives the engine the API's pods for this node (a synced
// informer). From then on housekeeping terminates every runtime pod whose
// UID is neither among them nor known to the engine.
func (e *Engine) SetDesiredPods(list func() ([]*v1.Pod, error)) {
	e.mu.Lock()
	e.desired = list
	e.mu.Unlock()
}

func (e *Engine) desiredPod(uid types.UID) *v1.Pod {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pods[uid]
}

// UpdatePod hands a new or changed pod to its worker. It never blocks on
// the runtime.
func (e *Engine) UpdatePod(_ context.Context, pod *v1.Pod) {
	e.admitMu.Lock()
	e.mu.Lock()
	_, known := e.pods[pod.UID]
	_, rejected := e.rejected[pod.UID]
	e.mu.Unlock()
	if rejected || (!known && !e.admitNew(pod)) {
		e.admitMu.Unlock()
		return
	}
	e.mu.Lock()
	e.pods[pod.UID] = pod.DeepCopy()
	if !known {
		e.firstSeen[pod.UID] = e.cfg.Clock.Now()
	}
	e.mu.Unlock()
	e.admitMu.Unlock()
	t := SyncPodUpdate
	if !known {
		t = SyncPodCreate
	}
	e.workers.UpdatePod(UpdatePodOptions{UpdateType: t, Pod: pod, StartTime: e.cfg.Clock.Now()})
}

// Kill asks the pod's worker to stop its containers with the pod's
// deletion grace period, then clean up and call OnTerminated. It returns
// false when the engine does not know the pod.
func (e *Engine) Kill(ctx context.Context, pod *v1.Pod) bool {
	if e.rejectedPod(pod.UID) != nil {
		e.deleteRejected(ctx, pod)
		return true
	}
	pod = e.markDeleted(pod)
	e.mu.Lock()
	_, known := e.pods[pod.UID]
	if known {
		e.pods[pod.UID] = pod.DeepCopy()
	}
	e.mu.Unlock()
	if !known {
		return false
	}
	if e.workers.IsPodFinished(pod.UID) {
		// Finished already (Succeeded/Failed): housekeeping removes what is
		// left now that the pod is deleted.
		return true
	}
	e.workers.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: pod, StartTime: e.cfg.Clock.Now()})
	return true
}

// KillUnknown terminates a pod the engine was never given (deleted from
// the API while crivk was down): whatever the runtime holds of it is
// stopped and removed, then OnTerminated is called.
func (e *Engine) KillUnknown(_ context.Context, pod *v1.Pod) {
	pod = e.markDeleted(pod)
	e.mu.Lock()
	e.pods[pod.UID] = pod.DeepCopy()
	e.mu.Unlock()
	e.workers.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: pod, StartTime: e.cfg.Clock.Now()})
}

// markDeleted returns pod with a deletion timestamp: Kill and KillUnknown
// mean the pod is being deleted, even when the caller's copy (virtual-
// kubelet hands over the provider's own copy once the object is gone)
// does not say so.
func (e *Engine) markDeleted(pod *v1.Pod) *v1.Pod {
	if pod.DeletionTimestamp != nil {
		return pod
	}
	p := pod.DeepCopy()
	now := metav1.NewTime(e.cfg.Clock.Now())
	p.DeletionTimestamp = &now
	return p
}

// Kick syncs the pod uid now (the PLEG saw a change). Unknown UIDs are
// ignored: housekeeping takes care of runtime pods nobody wants.
func (e *Engine) Kick(uid types.UID) {
	if pod := e.desiredPod(uid); pod != nil {
		e.workers.UpdatePod(UpdatePodOptions{UpdateType: SyncPodSync, Pod: pod, StartTime: e.cfg.Clock.Now()})
	}
}

// Pod returns the pod with its latest status, or nil.
func (e *Engine) Pod(uid types.UID) *v1.Pod {
	pod := e.desiredPod(uid)
	if pod == nil {
		return nil
	}
	return e.withStatus(pod)
}

func (e *Engine) withStatus(pod *v1.Pod) *v1.Pod {
	p := pod.DeepCopy()
	if st, ok := e.status.GetPodStatus(pod.UID); ok {
		p.Status = st
	}
	return p
}

// Pods returns every pod the engine runs, with its status.
func (e *Engine) Pods() []*v1.Pod {
	e.mu.Lock()
	pods := make([]*v1.Pod, 0, len(e.pods))
	for _, p := range e.pods {
		pods = append(pods, p)
	}
	e.mu.Unlock()
	out := make([]*v1.Pod, 0, len(pods))
	for _, p := range pods {
		out = append(out, e.withStatus(p))
	}
	return out
}

// PodByName returns the newest pod the engine knows under namespace/name,
// with its status, or nil.
func (e *Engine) PodByName(namespace, name string) *v1.Pod {
	e.mu.Lock()
	var best *v1.Pod
	for _, set := range []map[types.UID]*v1.Pod{e.pods, e.rejected} {
		for _, p := range set {
			if p.Namespace == namespace && p.Name == name && (best == nil || best.CreationTimestamp.Before(&p.CreationTimestamp)) {
				best = p
			}
		}
	}
	e.mu.Unlock()
	if best == nil {
		return nil
	}
	return e.withStatus(best)
}

// Housekeeping forgets finished pods that are gone, removes what is left of
// finished pods that were deleted, and terminates runtime pods nobody wants.
// Run calls it every housekeeping interval; tests call it directly.
func (e *Engine) Housekeeping(ctx context.Context) {
	e.housekeeping.Lock()
	defer e.housekeeping.Unlock()
	// Deleted pods whose worker finished before the deletion (Succeeded or
	// Failed pods): their containers were kept for their logs until now.
	e.mu.Lock()
	var done []*v1.Pod
	for uid, p := range e.pods {
		if p.DeletionTimestamp != nil && e.workers.IsPodFinished(uid) {
			done = append(done, p)
		}
	}
	e.mu.Unlock()
	for _, p := range done {
		if err := e.removeDeleted(ctx, p); err != nil {
			log.G(ctx).WithError(err).WithField("pod", p.Namespace+"/"+p.Name).WithField("uid", p.UID).Warn("cleaning up deleted pod failed, will retry")
		}
	}

	e.mu.Lock()
	desiredPods := make([]*v1.Pod, 0, len(e.pods))
	for _, p := range e.pods {
		desiredPods = append(desiredPods, p)
	}
	listDesired := e.desired
	e.mu.Unlock()
	e.workers.SyncKnownPods(desiredPods)

	if listDesired != nil {
		if err := e.cleanupOrphans(ctx, listDesired); err != nil {
			log.G(ctx).WithError(err).Warn("cleaning up orphaned pods failed")
		}
	}
}

// cleanupOrphans terminates the runtime pods and removes the pod
// directories of pods that are neither in the API for this node nor known
// to the engine or its workers: one listing of the API's pods serves both.
// The runtime is listed before the API's pods, so a sandbox created after
// the listing for a new pod is never taken for an orphan.
func (e *Engine) cleanupOrphans(ctx context.Context, listDesired func() ([]*v1.Pod, error)) error {
	refs, err := e.cfg.Runtime.ListPods(ctx)
	if err != nil {
		return fmt.Errorf("listing runtime pods: %w", err)
	}
	desired, err := listDesired()
	if err != nil {
		return fmt.Errorf("listing the API's pods of the node: %w", err)
	}
	inAPI := map[types.UID]bool{}
	for _, p := range desired {
		inAPI[p.UID] = true
	}
	wanted := func(uid types.UID) bool {
		return inAPI[uid] || e.desiredPod(uid) != nil || e.workers.IsKnown(uid)
	}
	rerr := e.terminateRuntimeOrphans(ctx, refs, wanted)
	derr := e.cleanupPodDirs(ctx, wanted)
	cerr := e.cleanupPodCgroups(ctx, refs, wanted)
	return errors.Join(rerr, derr, cerr)
}

// cleanupPodCgroups removes the cgroups of pods nobody wants and the
// runtime does not have (a pod deleted while crivk was down whose runtime
// pod is already gone): a runtime pod's cgroup goes when its termination
// is done (SyncTerminatingRuntimePod), after its containers stopped.
func (e *Engine) cleanupPodCgroups(ctx context.Context, refs []cri.PodRef, wanted func(types.UID) bool) error {
	pc := e.cfg.PodCgroups
	if pc == nil {
		return nil
	}
	uids, err := pc.PodUIDs()
	if err != nil {
		return fmt.Errorf("listing pod cgroups: %w", err)
	}
	inRuntime := map[types.UID]bool{}
	for _, r := range refs {
		inRuntime[r.UID] = true
	}
	var errs []error
	for _, uid := range uids {
		if inRuntime[uid] || wanted(uid) {
			continue
		}
		log.G(ctx).WithField("uid", uid).Info("removing the cgroup of a pod that no longer exists")
		errs = append(errs, pc.RemovePod(uid))
	}
	return errors.Join(errs...)
}

// terminateRuntimeOrphans hands every runtime pod in refs that is not
// wanted to the runtime-pod path.
func (e *Engine) terminateRuntimeOrphans(ctx context.Context, refs []cri.PodRef, wanted func(types.UID) bool) error {
	for _, ref := range refs {
		if wanted(ref.UID) {
			continue
		}
		st, err := e.cfg.Runtime.GetPodStatus(ctx, ref)
		if err != nil {
			return err
		}
		log.G(ctx).WithField("pod", ref.String()).Info("terminating orphaned runtime pod: no pod in the API has its UID")
		e.workers.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, RunningPod: st, StartTime: e.cfg.Clock.Now()})
	}
	return nil
}

// removeDeleted calls OnTerminated for a terminated, deleted pod, then
// removes its containers, sandbox and files and forgets it.
func (e *Engine) removeDeleted(ctx context.Context, pod *v1.Pod) error {
	// The containers are stopped and the volumes gone: as the kubelet's
	// status manager, hand on the final status and delete the API object
	// now; removing the stopped containers, sandbox and logs does not delay
	// the deletion (a crash in between leaves a runtime orphan, which
	// housekeeping removes).
	wctx, cancel := context.WithTimeout(ctx, finalStatusTimeout)
	err := e.status.WaitDelivered(wctx, pod.UID)
	cancel()
	if err != nil && ctx.Err() == nil {
		log.G(ctx).WithField("pod", pod.Namespace+"/"+pod.Name).WithField("uid", pod.UID).Warn("final status not delivered in time; deleting the pod anyway")
	}
	if err := e.cfg.OnTerminated(ctx, e.withStatus(pod)); err != nil {
		return err
	}
	st, err := e.cfg.Runtime.GetPodStatus(ctx, cri.RefOf(pod))
	if err != nil {
		return err
	}
	if err := e.cfg.Runtime.RemovePod(ctx, st); err != nil {
		return err
	}
	if err := e.removePodFiles(string(pod.UID)); err != nil {
		return err
	}
	e.forget(pod)
	return nil
}

// forget drops everything the engine holds of a pod whose API object is
// gone; SyncKnownPods then drops its worker record.
func (e *Engine) forget(pod *v1.Pod) {
	e.mu.Lock()
	delete(e.pods, pod.UID)
	delete(e.firstSeen, pod.UID)
	delete(e.waiting, pod.UID)
	delete(e.podIPs, pod.UID)
	e.mu.Unlock()
	e.status.RemovePod(pod.UID)
	e.removeProbes(pod.UID)
	e.cache.Delete(pod.UID)
	var names []string
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	e.backoff.Forget(string(pod.UID), names)
}

// refresh reads the pod's runtime state right after the engine acted on it
// and stores it in the cache with the time before the read, so the status
// published next reflects the action without waiting for a relist.
func (e *Engine) refresh(ctx context.Context, ref cri.PodRef) (*cri.PodStatus, error) {
	t := e.cfg.Clock.Now()
	st, err := e.cfg.Runtime.GetPodStatus(ctx, ref)
	if err != nil {
		return nil, err
	}
	e.cache.Set(ref.UID, st, nil, t)
	return st, nil
}

// generate builds the API status from the runtime state and what the
// engine knows of the pod.
func (e *Engine) generate(pod *v1.Pod, st *cri.PodStatus, deleted bool) v1.PodStatus {
	prev, ok := e.status.GetPodStatus(pod.UID)
	if !ok {
		prev = *pod.Status.DeepCopy()
	}
	// Conditions the node does not own (readiness gates, PodScheduled,
	// DisruptionTarget) are the API's.
	prev.Conditions = WithForeignConditions(pod.Status.Conditions, prev.Conditions)
	e.mu.Lock()
	if ips := st.IPs(); len(ips) > 0 {
		e.podIPs[pod.UID] = ips
	}
	ips := e.podIPs[pod.UID]
	if pod.Spec.HostNetwork && len(ips) == 0 && e.cfg.NodeIP != "" {
		// A host-network pod has the node's IP, as the kubelet reports it.
		ips = []string{e.cfg.NodeIP}
	}
	waiting := e.waiting[pod.UID]
	e.mu.Unlock()
	status := GenerateStatus(statusInput{
		Pod:         pod,
		Previous:    prev,
		Runtime:     st,
		Waiting:     waiting,
		RuntimeName: e.cfg.RuntimeName,
		NodeIP:      e.cfg.NodeIP,
		PodIPs:      ips,
		Deleted:     deleted,
		Now:         e.cfg.Clock.Now(),
		Probes:      e.probeResultsOrNil(),
	})
	if pastActiveDeadline(pod, status.StartTime, e.cfg.Clock.Now()) {
		// The kubelet's active deadline handler: the pod fails, its
		// containers are stopped.
		status.Phase = v1.PodFailed
		status.Reason = reasonDeadlineExceeded
		status.Message = messageDeadlineExceeded
	}
	return status
}

// The kubelet's words for a pod past spec.activeDeadlineSeconds.
const (
	reasonDeadlineExceeded  = "DeadlineExceeded"
	messageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// pastActiveDeadline reports whether pod, started at start, has run longer
// than its spec.activeDeadlineSeconds.
func pastActiveDeadline(pod *v1.Pod, start *metav1.Time, now time.Time) bool {
	d := pod.Spec.ActiveDeadlineSeconds
	if d == nil || start == nil {
		return false
	}
	return now.Sub(start.Time) >= time.Duration(*d)*time.Second
}

// engineSyncer is the Engine seen as the pod workers' podSyncer.
type engineSyncer Engine

var _ podSyncer = (*engineSyncer)(nil)

// errBackingOff is returned by SyncPod while a container waits for a
// restart or pull back-off.
var errBackingOff = errors.New("a container is waiting for a back-off")

// SyncPod publishes the pod's status from the runtime state it was given;
// unless the pod is terminal, plans and carries out one round of actions,
// reads the runtime back at once and publishes again.
func (s *engineSyncer) SyncPod(ctx context.Context, _ UpdateType, pod *v1.Pod, st *cri.PodStatus) (bool, error) {
	e := (*Engine)(s)
	if e.cfg.APIPod != nil {
		if cur := e.cfg.APIPod(pod.Namespace, pod.Name); cur != nil && cur.UID == pod.UID {
			p := pod.DeepCopy()
			p.Status = *cur.Status.DeepCopy()
			pod = p
		}
	}
	status := e.generate(pod, st, false)
	e.setRunningStatus(pod, status)
	if isTerminalPhase(status.Phase) {
		return true, nil
	}
	e.addProbes(pod)
	if ne := e.cfg.NetworkError; ne != nil && !pod.Spec.HostNetwork {
		if err := ne(); err != nil {
			if e.cfg.Recorder != nil {
				e.cfg.Recorder.Eventf(pod, v1.EventTypeWarning, "NetworkNotReady", "%s: %v", ErrNetworkNotReady, err)
			}
			return false, fmt.Errorf("%w: %v", ErrNetworkNotReady, err)
		}
	}
	// The pod cgroup exists with its class's values before the sandbox is
	// created in it (the kubelet's EnsureExists in SyncPod).
	if pc := e.cfg.PodCgroups; pc != nil {
		if err := pc.EnsurePod(pod); err != nil {
			if e.cfg.Recorder != nil {
				e.cfg.Recorder.Eventf(pod, v1.EventTypeWarning, "FailedToCreatePodContainer", "unable to ensure pod container exists: %v", err)
			}
			return false, fmt.Errorf("failed to ensure that the pod %s cgroups exist and are correctly applied: %w", cri.RefOf(pod), err)
		}
	}
	// Volumes are set up (or refreshed: live updates) before any container
	// may start; until they are, the pod stays in ContainerCreating.
	if err := e.mountVolumes(ctx, pod); err != nil {
		return false, err
	}
	// A container a killed predecessor created but never started is
	// removed, not replaced: its attempt is made again, no restart counted.
	if removed, err := e.cfg.Runtime.RemoveInterrupted(ctx, st); err != nil {
		return false, err
	} else if removed {
		log.G(ctx).WithField("pod", cri.RefOf(pod).String()).Info("removed containers created but never started by a previous crivk")
		if st, err = e.refresh(ctx, cri.RefOf(pod)); err != nil {
			return false, err
		}
	}
	now := e.cfg.Clock.Now()
	plan := cri.ComputePodActions(pod, st, cri.PlanInputs{Started: e.startupPassed, Failed: e.failedProbe, BackOff: e.backoff.View(now)})
	if plan.Empty() {
		e.mu.Lock()
		delete(e.waiting, pod.UID)
		e.mu.Unlock()
		return false, nil
	}
	log.G(ctx).WithField("plan", plan.String()).Debug("syncing pod")
	res := e.cfg.Runtime.SyncPod(ctx, pod, st, plan, e.backoff, now)
	backingOff := e.recordSync(pod, res)
	syncErr := res.Error()
	if after, err := e.refresh(ctx, cri.RefOf(pod)); err == nil {
		e.setRunningStatus(pod, e.generate(pod, after, false))
		e.addProbes(pod) // the new containers' workers probe now
	} else {
		syncErr = errors.Join(syncErr, err)
	}
	if syncErr == nil && backingOff {
		syncErr = errBackingOff
	}
	if backingOff {
		return false, &BackOffError{Err: syncErr, Until: e.cfg.Clock.Now().Add(backOffPoll)}
	}
	return false, syncErr
}

// SyncTerminatingPod stops the pod's containers with the grace period and
// publishes the status with the containers stopped.
// setRunningStatus hands a sync's status to the status manager; the first
// time a pod the API had Pending is Running, its start duration since the
// engine first saw it is observed (ObservePodStart).
func (e *Engine) setRunningStatus(pod *v1.Pod, status v1.PodStatus) {
	if e.cfg.ObservePodStart != nil && status.Phase == v1.PodRunning &&
		(pod.Status.Phase == "" || pod.Status.Phase == v1.PodPending) {
		e.mu.Lock()
		seen, ok := e.firstSeen[pod.UID]
		delete(e.firstSeen, pod.UID)
		e.mu.Unlock()
		if ok {
			e.cfg.ObservePodStart(e.cfg.Clock.Since(seen))
		}
	}
	e.status.SetPodStatus(pod, status)
}

func (s *engineSyncer) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, _ *cri.PodStatus, grace int64, statusFn PodStatusFunc) error {
	e := (*Engine)(s)
	e.stopLivenessAndStartup(pod.UID)
	// The cached status may predate the last sync (a container it started):
	// read the runtime now rather than wait for a relist.
	st, err := e.refresh(ctx, cri.RefOf(pod))
	if err != nil {
		return err
	}
	deleted := pod.DeletionTimestamp != nil
	status := e.generate(pod, st, deleted)
	if statusFn != nil {
		statusFn(&status)
	}
	e.status.SetPodStatus(pod, status)
	// The runtime manager records Killing per container, runs preStop.
	if err := e.cfg.Runtime.KillPod(ctx, pod, st, grace); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("killing pod %s: %w", cri.RefOf(pod), err)
	}
	after, err := e.refresh(ctx, cri.RefOf(pod))
	if err != nil {
		return err
	}
	if after.Running() {
		return fmt.Errorf("pod %s still has running containers after kill", cri.RefOf(pod))
	}
	status = e.generate(pod, after, true)
	if statusFn != nil {
		statusFn(&status)
	}
	e.status.SetPodStatus(pod, status)
	return nil
}

// SyncTerminatingRuntimePod stops and removes a pod only the runtime knows.
func (s *engineSyncer) SyncTerminatingRuntimePod(ctx context.Context, rp *cri.PodStatus) error {
	e := (*Engine)(s)
	if err := e.cfg.Runtime.KillPod(ctx, nil, rp, 1); err != nil {
		return fmt.Errorf("killing runtime pod %s: %w", rp.Ref, err)
	}
	st, err := e.cfg.Runtime.GetPodStatus(ctx, rp.Ref)
	if err != nil {
		return err
	}
	if err := e.cfg.Runtime.RemovePod(ctx, st); err != nil {
		return err
	}
	if err := e.removePodFiles(string(rp.Ref.UID)); err != nil {
		return err
	}
	if pc := e.cfg.PodCgroups; pc != nil {
		if err := pc.RemovePod(rp.Ref.UID); err != nil {
			return fmt.Errorf("removing the cgroup of runtime pod %s: %w", rp.Ref, err)
		}
	}
	e.cache.Delete(rp.Ref.UID)
	return e.unmountVolumes(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: rp.Ref.UID, Namespace: rp.Ref.Namespace, Name: rp.Ref.Name}})
}

// SyncTerminatedPod publishes the final status. A deleted pod's containers
// and sandbox are removed and OnTerminated is called; a pod that finished
// on its own keeps its containers (and logs) until it is deleted.
func (s *engineSyncer) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, st *cri.PodStatus) error {
	e := (*Engine)(s)
	// The pod may have been deleted since its worker took this work.
	if cur := e.desiredPod(pod.UID); cur != nil {
		pod = cur
	}
	e.removeProbes(pod.UID)
	e.status.SetPodStatus(pod, e.generate(pod, st, pod.DeletionTimestamp != nil))
	e.status.TerminatePod(pod)
	// No container of the pod can run any more: its volumes go.
	if err := e.unmountVolumes(ctx, pod); err != nil {
		return err
	}
	// Nor does any run in its cgroup: it goes too (the kubelet's
	// SyncTerminatedPod), whatever leaked into it is killed.
	if pc := e.cfg.PodCgroups; pc != nil {
		if err := pc.RemovePod(pod.UID); err != nil {
			return fmt.Errorf("removing the cgroup of pod %s: %w", cri.RefOf(pod), err)
		}
	}
	if pod.DeletionTimestamp == nil {
		return nil
	}
	return e.removeDeleted(ctx, pod)
}

// recordSync keeps the sync's waiting reasons for the status, records
// kubelet-style events and reports whether a container waits for a
// back-off.
func (e *Engine) recordSync(pod *v1.Pod, res *cri.SyncResult) (backingOff bool) {
	e.mu.Lock()
	e.waiting[pod.UID] = res.Waiting
	e.mu.Unlock()
	for _, wt := range res.Waiting {
		if wt.Reason == cri.ReasonCrashLoopBackOff || wt.Reason == cri.ReasonImagePullBackOff || wt.Reason == cri.ReasonErrImagePull {
			backingOff = true
		}
	}
	r := e.cfg.Recorder
	if r == nil {
		return backingOff
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
		case cri.ReasonErrImagePull, cri.ReasonErrImageNeverPull, cri.ReasonInvalidImageName, cri.ReasonImageInspectError:
			// The kubelet's image errors name only the reason here; the
			// cause is in the Failed/ErrImageNeverPull event before.
			r.Eventf(pod, v1.EventTypeWarning, "Failed", "Error: %s", wt.Reason)
		case cri.ReasonPostStartHookError:
			// FailedPostStartHook was recorded with the hook's output.
		default:
			r.Eventf(pod, v1.EventTypeWarning, "Failed", "Error: %s", wt.Message)
		}
	}
	// Created, Started, Pulling, Pulled and the hook events come from the
	// runtime manager, in the order things happen.
	return backingOff
}
