package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/lifecycle/admission"
	"github.com/crivk/crivk/lifecycle/allocation"
	"github.com/crivk/crivk/lifecycle/pleg"
	"github.com/crivk/crivk/lifecycle/prober"
	"github.com/crivk/crivk/lifecycle/status"
	"github.com/crivk/crivk/podutil"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcev1client "k8s.io/client-go/kubernetes/typed/resource/v1"
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
	// RecursiveReadOnlyMountsSupported reports whether pod's runtime
	// handler supports recursive read-only mounts, from the runtime state
	// last read (no call): the container statuses' volumeMounts say it.
	RecursiveReadOnlyMountsSupported(pod *v1.Pod) bool
	// PodCgroupResizing reports whether the pod cgroup's CPU or memory
	// values, as last written, differ from those pod (allocated) asks for
	// (cri.Runtime.PodCgroupResizing): the plan then resizes it, and a
	// resize is in progress.
	PodCgroupResizing(pod *v1.Pod) bool
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
	Cache *pleg.Cache
	// SyncInterval is how long after a successful sync a pod is synced again
	// when nothing happens to it (the PLEG and spec changes sync it at once).
	SyncInterval time.Duration
	// HousekeepingInterval is how often finished and orphaned pods are
	// cleaned up (default 2s, the kubelet's).
	HousekeepingInterval time.Duration
	// MaxContainerRestartPeriod caps the crash-loop back-off (0: 300s), the
	// KubeletConfiguration's crashLoopBackOff.maxContainerRestartPeriod
	// (feature KubeletCrashLoopBackOffMax, beta and on in v1.35): the
	// first delay is 10s, or this when it is shorter, as the kubelet's
	// newCrashLoopBackOff. The image pull back-off keeps 10s to 300s.
	MaxContainerRestartPeriod time.Duration
	// OnTerminated is called once a deleted pod's containers are stopped,
	// its volumes are gone and its final status was handed on (before its
	// stopped containers and sandbox are removed, as the kubelet). The
	// provider deletes the API object there. It is called again after an
	// error, so it must be idempotent.
	OnTerminated func(ctx context.Context, pod *v1.Pod) error
	// Recorder receives kubelet-style events; nil drops them.
	Recorder record.EventRecorder
	// APIPods lists the API's pods for this node (an informer's lister) and
	// APIPodsSynced reports whether that informer has synced: from then on
	// housekeeping terminates every runtime pod whose UID is neither among
	// them nor known to the engine (deleted while crivk was down, or left
	// by a crash). nil: runtime pods are never taken for orphans.
	APIPods       func() ([]*v1.Pod, error)
	APIPodsSynced func() bool
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
	// ResourceClaims reads the ResourceClaims of pods with
	// spec.resourceClaims (dra.go); nil: none can be read, and a pod that
	// needs a claim does not start.
	ResourceClaims resourcev1client.ResourceClaimsGetter
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
	// ObservePodStartSLI, if set, is told, once per pod it observes
	// starting, how long after the pod's creation it turned Running
	// without the time spent pulling its images (first pull start to last
	// pull end), the kubelet's kubelet_pod_start_sli_duration_seconds.
	ObservePodStartSLI func(took time.Duration)
	// Pressure refuses pods while the node is under resource pressure
	// (the eviction manager's admission, the kubelet's first; evict.go);
	// nil: none.
	Pressure PodAdmitter
	// Sysctls is the node's sysctl allowlist for admission; nil: pod
	// sysctls are not checked (the runtime decides).
	Sysctls *admission.Sysctls
	// AppArmor is the node's AppArmor admission; nil: this machine's,
	// probed once (admission.HostAppArmor).
	AppArmor *admission.AppArmor
	// Host is the admission of what the nodes of one process share on
	// this machine (internal/fleet.HostPorts: its host ports); nil: a
	// single node, nothing shared. Its Lock replaces the engine's own
	// admission lock, so that every node's decisions are serialised with
	// each other's insertion of the admitted pod; its Admit runs after the
	// node's predicates (admit.go).
	Host HostAdmitter
	// ProbeRuntime runs liveness, readiness and startup probes (probes.go);
	// nil: nothing is probed. ProbeMetrics counts probe runs (may be nil).
	ProbeRuntime ProbeRuntime
	ProbeMetrics prober.Metrics
	// PodCgroups keeps the pod cgroups (package cm); nil: pods get
	// none (the runtime's default cgroup parent).
	PodCgroups PodCgroups
	// UserNamespaces holds the pods' user namespace ID ranges (package
	// userns; cri allocates them): released when a pod's containers are
	// gone, and by the orphan sweep; nil: none kept.
	UserNamespaces UserNamespaces
	// MaxDeadPerContainer is the container GC's
	// --maximum-dead-containers-per-container: every sync leaves at most
	// max(it, 1) dead instances of each container
	// (cri.PlanInputs.MaxDeadPerContainer).
	MaxDeadPerContainer int
	// ObservePreemption, if set, is told each pod evicted to admit a
	// critical pod, with the first resource it lacked (the kubelet's
	// kubelet_preemptions{preemption_signal}).
	ObservePreemption func(resource string)
	// Devices is the device plugin manager (devicemanager):
	// admission allocates a pod's devices (admit.go) and each container's
	// CRI config gets what the plugins answered (runoptions.go); nil: no
	// device plugins.
	Devices Devices
}

// Devices is the device plugin manager as the engine uses it
// (devicemanager's Manager, the kubelet's devicemanager).
type Devices interface {
	// Allocate allocates the devices of every container of pod; active
	// are the other pods holding resources (the devices of the others are
	// freed). An error rejects the pod.
	Allocate(ctx context.Context, pod *v1.Pod, active []*v1.Pod) error
	// InUse is, when pod has devices, the count of devices in use of each
	// device plugin resource (nil otherwise): admission raises the node's
	// allocatable to it (the kubelet's sanitizeNodeAllocatable).
	InUse(pod *v1.Pod) v1.ResourceList
	// ContainerOptions is what the plugins add to container c's CRI
	// config (nil: nothing); an error is a CreateContainerConfigError.
	ContainerOptions(ctx context.Context, pod *v1.Pod, c *v1.Container) (*cri.RunContainerOptions, error)
}

// UserNamespaces is the user namespace allocator as the engine uses it
// (package userns's Manager, the kubelet's UsernsManager).
type UserNamespaces interface {
	// Release frees the pod's range: none of its containers runs.
	Release(uid types.UID)
	// CleanupOrphans frees the range of every pod keep does not want.
	CleanupOrphans(keep func(types.UID) bool) error
}

// PodCgroups is the pod cgroup tree as the engine uses it (package cm's
// Manager): created or updated before a pod's sandbox, removed once its
// containers are stopped, listed for the orphan sweep, read for the pod
// status' resources.
type PodCgroups interface {
	EnsurePod(pod *v1.Pod) error
	RemovePod(uid types.UID) error
	PodUIDs() ([]types.UID, error)
	// PodCgroupConfig reads the CPU shares, CFS quota (-1: none) and
	// period and the memory limit (0: none) the pod's cgroup has now (the
	// kubelet's GetPodCgroupConfig).
	PodCgroupConfig(pod *v1.Pod) (cpuShares, cpuQuota, cpuPeriod, memoryLimit int64, err error)
}

// Engine is crivk's kubelet core, the kubelet's syncLoop and housekeeping:
// it admits the pods virtual-kubelet hands it into the pod manager
// (podmanager.go), feeds the pod workers (podworkers.go) from the pod
// manager, the PLEG's kicks and the work queue, and every housekeeping
// interval forgets finished pods and terminates orphans. The workers call
// the syncer (syncer.go), which plans and acts through the Runtime and
// publishes through the status manager (lifecycle/status).
type Engine struct {
	cfg     Config
	pods    *podManager
	sync    *syncer
	cache   *pleg.Cache
	queue   *WorkQueue
	workers *PodWorkers
	status  *status.Manager
	// alloc keeps the pods' allocated resources and decides in-place
	// resizes (admit.go, admit_resize.go).
	alloc *allocation.Manager
	// housekeeping serialises Housekeeping runs.
	housekeeping sync.Mutex
	// admitMu serialises admission decisions with the insertion of the
	// admitted pod into the pod manager: the engine's own, or Config.Host
	// (shared by the nodes of one process).
	admitMu sync.Locker

	mu     sync.Mutex
	notify func(*v1.Pod) // guarded by mu

	// loopEntry is when Run last entered its loop, in Unix nanoseconds (0:
	// never), the kubelet's syncLoopMonitor; written by Run only.
	loopEntry atomic.Int64
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
		cfg.Cache = pleg.NewCache()
	}
	e := &Engine{
		cfg:     cfg,
		pods:    newPodManager(),
		cache:   cfg.Cache,
		queue:   NewWorkQueue(cfg.Clock),
		admitMu: &sync.Mutex{},
	}
	if cfg.Host != nil {
		e.admitMu = cfg.Host
	}
	var err error
	if e.status, err = status.NewManager(status.ManagerConfig{Clock: cfg.Clock, Notify: e.publish,
		// A terminal phase waits for the pod's termination (the kubelet's
		// PodCouldHaveRunningContainers); e.workers is set below, before Run.
		CouldHaveRunningContainers: func(uid types.UID) bool {
			return e.workers != nil && e.workers.couldHaveRunningContainers(uid)
		},
	}); err != nil {
		return nil, err
	}
	restartInitial, restartMax := crashLoopBackOff(cfg.MaxContainerRestartPeriod)
	checkpoint := ""
	if cfg.RootDir != "" {
		checkpoint = filepath.Join(cfg.RootDir, allocation.CheckpointFile)
	}
	if e.alloc, err = allocation.New(allocation.Config{Path: checkpoint, Clock: cfg.Clock}); err != nil {
		return nil, err
	}
	e.sync = newSyncer(cfg, e.pods, e.status, &cri.BackOffs{
		Restart: flowcontrol.NewBackOff(restartInitial, restartMax),
		Pull:    flowcontrol.NewBackOff(backOffInitial, backOffMax),
	})
	e.sync.alloc = e.alloc
	e.sync.resize = e.handleResize
	e.sync.requeue = e.Kick
	e.workers, err = NewPodWorkers(ctx, PodWorkersConfig{
		Syncer:         e.sync,
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

// crashLoopBackOff returns the restart back-off's first and longest delay
// for a configured longest (0: the default 300s), as the kubelet's
// newCrashLoopBackOff: a longest delay below 10s is also the first.
func crashLoopBackOff(maxPeriod time.Duration) (initial, longest time.Duration) {
	if maxPeriod <= 0 {
		return backOffInitial, backOffMax
	}
	return min(backOffInitial, maxPeriod), maxPeriod
}

// Run delivers statuses and runs the sync loop until ctx ends: every
// second the due pods of the work queue are synced; every housekeeping
// interval finished pods are forgotten and orphans terminated.
func (e *Engine) Run(ctx context.Context) {
	go e.status.Run(ctx)
	go e.runResizeRetries(ctx)
	work := e.cfg.Clock.NewTicker(workQueuePoll)
	defer work.Stop()
	house := e.cfg.Clock.NewTicker(e.cfg.HousekeepingInterval)
	defer house.Stop()
	for {
		e.loopEntry.Store(e.cfg.Clock.Now().UnixNano())
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

// LatestLoopEntryTime is when the sync loop (Run) last began an iteration,
// zero before Run. The loop wakes every second, so it stays about that
// recent unless a sync or housekeeping step hangs (the kubelet's
// LatestLoopEntryTime, which its syncloop health check reads).
func (e *Engine) LatestLoopEntryTime() time.Time {
	if ns := e.loopEntry.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// syncDue hands the due pods of the work queue to their workers.
func (e *Engine) syncDue() {
	// Pods past their active deadline are synced at once (the kubelet checks
	// every second too), whatever their place in the queue.
	now := e.cfg.Clock.Now()
	var late []types.UID
	for _, p := range e.pods.list() {
		if p.Spec.ActiveDeadlineSeconds == nil || p.DeletionTimestamp != nil {
			continue
		}
		if st, ok := e.status.GetPodStatus(p.UID); ok && !isTerminalPhase(st.Phase) && pastActiveDeadline(p, st.StartTime, now) {
			late = append(late, p.UID)
		}
	}
	for _, uid := range late {
		if !e.workers.IsPodTerminationRequested(uid) {
			e.queue.Enqueue(uid, 0)
		}
	}
	for _, uid := range e.queue.GetWork() {
		if pod := e.pods.pod(uid); pod != nil {
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

// UpdatePod hands a new or changed pod to its worker. It never blocks on
// the runtime, but for a new critical pod admitted by preempting others: it
// returns once they are stopped (admitCritical). ctx's span (--tracing) becomes the parent of the sync's.
//
// A static pod killed (its manifest removed) and handed again with the
// same UID (written again with the same content) is re-added, as the
// kubelet's ADD after a REMOVE: a create, which the pod worker keeps
// (restartRequested) until the termination completed, and Housekeeping
// then starts the pod again. Its containers are kept meanwhile (the pod is
// not deleted any more), so restartCount counts on. Only a static pod
// (podutil.IsStaticPod) is re-added so: an API pod's deletion is never
// undone, whatever copy of it arrives late.
func (e *Engine) UpdatePod(ctx context.Context, pod *v1.Pod) {
	e.admitMu.Lock()
	known, rejected := e.pods.known(pod.UID)
	if rejected || (!known && !e.admitNew(ctx, pod)) {
		e.admitMu.Unlock()
		return
	}
	readded := false
	if prev := e.pods.pod(pod.UID); prev != nil {
		readded = prev.DeletionTimestamp != nil && pod.DeletionTimestamp == nil && podutil.IsStaticPod(pod)
	}
	e.pods.add(pod, e.cfg.Clock.Now())
	e.admitMu.Unlock()
	t := SyncPodUpdate
	if !known || readded {
		t = SyncPodCreate
	}
	e.workers.UpdatePod(UpdatePodOptions{UpdateType: t, Pod: pod, StartTime: e.cfg.Clock.Now(), Parent: cri.SpanRefFrom(ctx)})
}

// Kill asks the pod's worker to stop its containers with the pod's
// deletion grace period, then clean up and call OnTerminated. It returns
// false when the engine does not know the pod. ctx's span (--tracing)
// becomes the parent of the kill's.
func (e *Engine) Kill(ctx context.Context, pod *v1.Pod) bool {
	if e.pods.rejectedPod(pod.UID) != nil {
		e.deleteRejected(ctx, pod)
		return true
	}
	pod = e.markDeleted(pod)
	if !e.pods.replace(pod) {
		return false
	}
	if e.workers.IsPodFinished(pod.UID) {
		// Finished already (Succeeded/Failed): housekeeping removes what is
		// left now that the pod is deleted.
		return true
	}
	e.workers.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: pod, StartTime: e.cfg.Clock.Now(), Parent: cri.SpanRefFrom(ctx)})
	return true
}

// KillUnknown terminates a pod the engine was never given (deleted from
// the API while crivk was down): whatever the runtime holds of it is
// stopped and removed, then OnTerminated is called.
func (e *Engine) KillUnknown(ctx context.Context, pod *v1.Pod) {
	pod = e.markDeleted(pod)
	e.pods.put(pod)
	e.workers.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: pod, StartTime: e.cfg.Clock.Now(), Parent: cri.SpanRefFrom(ctx)})
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
	if pod := e.pods.pod(uid); pod != nil {
		e.workers.UpdatePod(UpdatePodOptions{UpdateType: SyncPodSync, Pod: pod, StartTime: e.cfg.Clock.Now()})
	}
}

// ReconcileStatus hands the API's newest copy of a pod to the status
// manager (status.Manager.Reconcile, the kubelet's needsReconcile): a
// condition the node owns that another writer overwrote in the API is
// written back with the status last delivered. periodic is set for the
// pod informer's resync, where a difference counts whatever its time.
func (e *Engine) ReconcileStatus(pod *v1.Pod, periodic bool) { e.status.Reconcile(pod, periodic) }

// Pod returns the pod with its latest status, or nil.
func (e *Engine) Pod(uid types.UID) *v1.Pod {
	pod := e.pods.pod(uid)
	if pod == nil {
		return nil
	}
	return e.sync.withStatus(pod)
}

// PublishedPod returns the pod with the status the engine published of it,
// or nil while it published none (a static pod's status waits for its
// mirror pod right after a restart: syncer.holdStaticStatus).
func (e *Engine) PublishedPod(uid types.UID) *v1.Pod {
	pod := e.pods.pod(uid)
	if pod == nil {
		return nil
	}
	st, ok := e.status.GetPodStatus(uid)
	if !ok {
		return nil
	}
	p := pod.DeepCopy()
	p.Status = st
	return p
}

// Pods returns every pod the engine runs, with its status.
func (e *Engine) Pods() []*v1.Pod {
	pods := e.pods.list()
	out := make([]*v1.Pod, 0, len(pods))
	for _, p := range pods {
		out = append(out, e.sync.withStatus(p))
	}
	return out
}

// PodByName returns the newest pod the engine knows under namespace/name,
// with its status, or nil.
func (e *Engine) PodByName(namespace, name string) *v1.Pod {
	best := e.pods.byName(namespace, name)
	if best == nil {
		return nil
	}
	return e.sync.withStatus(best)
}

// Housekeeping forgets finished pods that are gone, removes what is left of
// finished pods that were deleted, and terminates runtime pods nobody wants.
// Run calls it every housekeeping interval; tests call it directly.
func (e *Engine) Housekeeping(ctx context.Context) {
	e.housekeeping.Lock()
	defer e.housekeeping.Unlock()
	// Deleted pods whose worker finished before the deletion (Succeeded or
	// Failed pods): their containers were kept for their logs until now.
	desiredPods := e.pods.list()
	for _, p := range desiredPods {
		if p.DeletionTimestamp == nil || !e.workers.IsPodFinished(p.UID) {
			continue
		}
		if err := e.sync.removeDeleted(ctx, p); err != nil {
			log.G(ctx).WithError(err).WithField("pod", p.Namespace+"/"+p.Name).WithField("uid", p.UID).Warn("cleaning up deleted pod failed, will retry")
		}
	}

	known := e.workers.SyncKnownPods(e.pods.list())
	e.restartReused(known)
	// Back-offs of earlier container specs (an image changed) age out.
	e.sync.backoff.GC()

	if listDesired := e.cfg.APIPods; listDesired != nil && (e.cfg.APIPodsSynced == nil || e.cfg.APIPodsSynced()) {
		if err := e.cleanupOrphans(ctx, listDesired); err != nil {
			log.G(ctx).WithError(err).Warn("cleaning up orphaned pods failed")
		}
	}
}

// restartReused starts again the desired pods the workers no longer know:
// a static pod re-added with the same UID while it terminated, whose
// worker record SyncKnownPods just dropped (the kubelet's
// HandlePodCleanups: "Pod will be restarted because it is in the desired
// set and not known to the pod workers (likely due to UID reuse)"). A
// deleted pod is not desired: it is never started again.
func (e *Engine) restartReused(known map[types.UID]PodWorkerSync) {
	for _, p := range e.pods.list() {
		if _, ok := known[p.UID]; ok || p.DeletionTimestamp != nil {
			continue
		}
		log.L.WithField("pod", p.Namespace+"/"+p.Name).WithField("uid", p.UID).
			Info("pod will be restarted because it is in the desired set and not known to the pod workers (likely due to UID reuse)")
		e.workers.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: p, StartTime: e.cfg.Clock.Now()})
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
		return inAPI[uid] || e.pods.pod(uid) != nil || e.workers.IsKnown(uid)
	}
	rerr := e.terminateRuntimeOrphans(ctx, refs, wanted)
	// What the runtime still has keeps its directory (its volumes) and its
	// user namespace range, orphan or not: a runtime orphan's go with its
	// termination (SyncTerminatingRuntimePod), after its containers
	// stopped, also when handing it over above failed (the kubelet's
	// cleanupOrphanedPodDirs and CleanupOrphanedPodUsernsAllocations skip
	// the running pods too).
	inRuntime := map[types.UID]bool{}
	for _, r := range refs {
		inRuntime[r.UID] = true
	}
	keep := func(uid types.UID) bool { return inRuntime[uid] || wanted(uid) }
	derr := e.sync.cleanupPodDirs(ctx, keep)
	cerr := e.cleanupPodCgroups(keep)
	uerr := e.cleanupUserNamespaces(keep)
	return errors.Join(rerr, derr, cerr, uerr)
}

// cleanupUserNamespaces frees the user namespace ranges of pods keep does
// not want (neither wanted nor in the runtime): a runtime orphan keeps its
// range until its termination is done (SyncTerminatingRuntimePod), so no
// new pod gets IDs its containers may still use.
func (e *Engine) cleanupUserNamespaces(keep func(types.UID) bool) error {
	un := e.cfg.UserNamespaces
	if un == nil {
		return nil
	}
	if err := un.CleanupOrphans(keep); err != nil {
		return fmt.Errorf("user namespaces: %w", err)
	}
	return nil
}

// cleanupPodCgroups removes the cgroups of pods keep does not want:
// neither wanted nor in the runtime (a pod deleted while crivk was down
// whose runtime pod is already gone); a runtime pod's cgroup goes when its
// termination is done (SyncTerminatingRuntimePod), after its containers
// stopped.
func (e *Engine) cleanupPodCgroups(keep func(types.UID) bool) error {
	pc := e.cfg.PodCgroups
	if pc == nil {
		return nil
	}
	uids, err := pc.PodUIDs()
	if err != nil {
		return fmt.Errorf("listing pod cgroups: %w", err)
	}
	var errs []error
	for _, uid := range uids {
		if keep(uid) {
			continue
		}
		log.L.WithField("uid", uid).Info("removing the cgroup of a pod that no longer exists")
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
