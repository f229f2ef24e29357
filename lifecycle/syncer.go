package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/lifecycle/allocation"
	"github.com/crivk/crivk/lifecycle/pleg"
	"github.com/crivk/crivk/lifecycle/status"
	"github.com/crivk/crivk/podutil"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcev1client "k8s.io/client-go/kubernetes/typed/resource/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// syncer is the pod workers' podSyncer, the kubelet's SyncPod,
// SyncTerminatingPod and SyncTerminatedPod: it holds only what a sync
// needs (the runtime, the runtime status cache, the status manager, the
// probes, the back-offs, volumes, objects, pod cgroups, the event
// recorder) and the per-pod state a sync keeps between rounds (why
// containers wait, the pod IPs). It is also the runtime manager's
// RuntimeHelper (runoptions.go: environment, mounts, pull secrets).
//
// One round of SyncPod: publish the status from the runtime state given,
// then, unless the pod is terminal, ensure the pod cgroup and volumes,
// plan (cri.ComputePodActions, every decision with its reason: probe
// verdicts and back-offs are inputs), act (cri.Runtime.SyncPod), read the
// runtime back into the cache at once and publish again.
type syncer struct {
	runtime     Runtime
	runtimeName string
	nodeIP      string
	clock       clock.WithTicker
	cache       *pleg.Cache
	status      *status.Manager
	backoff     *cri.BackOffs
	recorder    record.EventRecorder
	volumes     Volumes
	objects     Objects
	podCgroups  PodCgroups
	userns      UserNamespaces
	// probes is set by NewEngine right after the syncer is made (the
	// prober calls back into the engine); nil: nothing is probed.
	probes          probeManager
	networkError    func() error
	apiPod          func(namespace, name string) *v1.Pod
	apiPodsSynced   func() bool                           // Config.APIPodsSynced; nil: synced
	started         time.Time                             // when the engine was made
	resourceClaims  resourcev1client.ResourceClaimsGetter // dra.go; nil: none readable
	observePodStart func(took time.Duration)
	observeSLI      func(took time.Duration)
	onTerminated    func(ctx context.Context, pod *v1.Pod) error
	rootDir         string
	clusterDomain   string
	nodeAllocatable v1.ResourceList
	maxDead         int // cri.PlanInputs.MaxDeadPerContainer
	devices         Devices
	// pods is the desired-pod store (read only here, but for forgetting
	// a pod whose API object is gone).
	pods *podManager
	// mountEvents throttles FailedMount events (volumes.go).
	mountEvents mountEvents
	// alloc holds the pods' allocated resources and resize conditions;
	// resize decides a pod's resize (Engine.handleResize). Both are set by
	// NewEngine; nil: pods run with their spec's resources.
	alloc  *allocation.Manager
	resize func(pod *v1.Pod) (*v1.Pod, error)
	// requeue syncs the pod again as soon as its current work is done
	// (Engine.Kick: a pending update for its worker); set by NewEngine,
	// nil: not at all. It follows an in-place restart's reset.
	requeue func(uid types.UID)

	mu sync.Mutex
	// waiting: per pod, why containers the last sync wanted started are
	// not running. podIPs: the pod IPs once known. Guarded by mu.
	waiting map[types.UID]map[string]cri.Waiting
	podIPs  map[types.UID][]string
	// pulling: per pod, from the start of its first image pull to the end
	// of its last, until it runs (the pod start SLI leaves it out).
	// Guarded by mu.
	pulling map[types.UID]cri.PullSpan
}

var _ podSyncer = (*syncer)(nil)

// newSyncer makes the syncer of an engine from its (defaulted) config.
func newSyncer(cfg Config, pods *podManager, status *status.Manager, backoff *cri.BackOffs) *syncer {
	return &syncer{
		runtime:         cfg.Runtime,
		runtimeName:     cfg.RuntimeName,
		nodeIP:          cfg.NodeIP,
		clock:           cfg.Clock,
		cache:           cfg.Cache,
		status:          status,
		backoff:         backoff,
		recorder:        cfg.Recorder,
		volumes:         cfg.Volumes,
		objects:         cfg.Objects,
		podCgroups:      cfg.PodCgroups,
		userns:          cfg.UserNamespaces,
		networkError:    cfg.NetworkError,
		apiPod:          cfg.APIPod,
		apiPodsSynced:   cfg.APIPodsSynced,
		started:         cfg.Clock.Now(),
		resourceClaims:  cfg.ResourceClaims,
		observePodStart: cfg.ObservePodStart,
		observeSLI:      cfg.ObservePodStartSLI,
		onTerminated:    cfg.OnTerminated,
		rootDir:         cfg.RootDir,
		clusterDomain:   cfg.ClusterDomain,
		nodeAllocatable: cfg.NodeAllocatable,
		maxDead:         cfg.MaxDeadPerContainer,
		devices:         cfg.Devices,
		pods:            pods,
		waiting:         map[types.UID]map[string]cri.Waiting{},
		podIPs:          map[types.UID][]string{},
		pulling:         map[types.UID]cri.PullSpan{},
	}
}

func (s *syncer) withStatus(pod *v1.Pod) *v1.Pod {
	p := pod.DeepCopy()
	if st, ok := s.status.GetPodStatus(pod.UID); ok {
		p.Status = st
	}
	return p
}

// removeDeleted calls OnTerminated for a terminated, deleted pod, then
// removes its containers, sandbox and files and forgets it.
func (s *syncer) removeDeleted(ctx context.Context, pod *v1.Pod) error {
	// The containers are stopped and the volumes gone: as the kubelet's
	// status manager, hand on the final status and delete the API object
	// now; removing the stopped containers, sandbox and logs does not delay
	// the deletion (a crash in between leaves a runtime orphan, which
	// housekeeping removes).
	wctx, cancel := context.WithTimeout(ctx, finalStatusTimeout)
	err := s.status.WaitDelivered(wctx, pod.UID)
	cancel()
	if err != nil && ctx.Err() == nil {
		log.G(ctx).WithField("pod", pod.Namespace+"/"+pod.Name).WithField("uid", pod.UID).Warn("final status not delivered in time; deleting the pod anyway")
	}
	if cur := s.pods.pod(pod.UID); cur != nil && cur.DeletionTimestamp == nil {
		// Re-added meanwhile (a static pod's manifest written again,
		// Engine.UpdatePod): desired again, not deleted; its containers
		// stay for its restart.
		return nil
	}
	if err := s.onTerminated(ctx, s.withStatus(pod)); err != nil {
		return err
	}
	st, err := s.runtime.GetPodStatus(ctx, cri.RefOf(pod))
	if err != nil {
		return err
	}
	if err := s.runtime.RemovePod(ctx, st); err != nil {
		return err
	}
	if err := s.removePodFiles(string(pod.UID)); err != nil {
		return err
	}
	s.forget(pod)
	return nil
}

// forget drops everything the engine holds of a pod whose API object is
// gone; SyncKnownPods then drops its worker record.
func (s *syncer) forget(pod *v1.Pod) {
	s.pods.forget(pod.UID)
	s.mu.Lock()
	delete(s.waiting, pod.UID)
	delete(s.podIPs, pod.UID)
	delete(s.pulling, pod.UID)
	s.mu.Unlock()
	s.status.RemovePod(pod.UID)
	if s.alloc != nil {
		if err := s.alloc.Remove(pod.UID); err != nil {
			log.L.WithError(err).WithField("pod", cri.RefOf(pod).String()).Warn("forgetting the pod's allocation")
		}
	}
	s.removeProbes(pod.UID)
	s.cache.Delete(pod.UID)
	s.backoff.Forget(pod)
}

// refresh reads the pod's runtime state right after the engine acted on it
// and stores it in the cache with the time before the read, so the status
// published next reflects the action without waiting for a relist.
func (s *syncer) refresh(ctx context.Context, ref cri.PodRef) (*cri.PodStatus, error) {
	t := s.clock.Now()
	st, err := s.runtime.GetPodStatus(ctx, ref)
	if err != nil {
		return nil, err
	}
	s.cache.Set(ref.UID, st, nil, t)
	return st, nil
}

// generate builds the API status from the runtime state and what the
// engine knows of the pod.
func (s *syncer) generate(pod *v1.Pod, st *cri.PodStatus, deleted bool) v1.PodStatus {
	return s.generateKilled(pod, st, deleted, nil)
}

// generateKilled is generate after a kill that carried statusFn (nil:
// none), applied to the previous status as status.Input.Killed says.
func (s *syncer) generateKilled(pod *v1.Pod, st *cri.PodStatus, deleted bool, statusFn PodStatusFunc) v1.PodStatus {
	prev, ok := s.status.GetPodStatus(pod.UID)
	if !ok {
		prev = *pod.Status.DeepCopy()
	}
	// Conditions the node does not own (readiness gates, PodScheduled,
	// DisruptionTarget) are the API's.
	prev.Conditions = status.WithForeignConditions(pod.Status.Conditions, prev.Conditions)
	var killed *v1.PodStatus
	if statusFn != nil {
		killed = prev.DeepCopy()
		statusFn(killed)
	}
	s.mu.Lock()
	if ips := st.IPs(); len(ips) > 0 {
		s.podIPs[pod.UID] = ips
	}
	ips := s.podIPs[pod.UID]
	if pod.Spec.HostNetwork && len(ips) == 0 && s.nodeIP != "" {
		// A host-network pod has the node's IP, as the kubelet reports it.
		ips = []string{s.nodeIP}
	}
	waiting := s.waiting[pod.UID]
	s.mu.Unlock()
	var resize []v1.PodCondition
	if s.alloc != nil {
		resize = s.alloc.Conditions(pod.UID)
	}
	out := status.Generate(status.Input{
		PodCgroup:        s.podCgroup(pod),
		ResizeConditions: resize,
		Pod:              pod,
		Previous:         prev,
		Runtime:          st,
		Waiting:          waiting,
		RuntimeName:      s.runtimeName,
		NodeIP:           s.nodeIP,
		PodIPs:           ips,
		Deleted:          deleted,
		Killed:           killed,
		Now:              s.clock.Now(),
		Probes:           s.probeResultsOrNil(),

		RecursiveReadOnlyMounts: s.runtime.RecursiveReadOnlyMountsSupported(pod),
	})
	if pastActiveDeadline(pod, out.StartTime, s.clock.Now()) {
		// The kubelet's active deadline handler: the pod fails, its
		// containers are stopped.
		out.Phase = v1.PodFailed
		out.Reason = reasonDeadlineExceeded
		out.Message = messageDeadlineExceeded
	}
	return out
}

// podCgroup reads the pod cgroup's values for the pod-level
// status.resources, as the kubelet's convertToAPIPodLevelResourcesStatus
// only for a pod the API shows Running (pod carries the API's status,
// withAPIStatus); nil when it does not, or the cgroup cannot be read (the
// previous status' values then stand, status/podresources.go).
func (s *syncer) podCgroup(pod *v1.Pod) *status.PodCgroup {
	if s.podCgroups == nil || pod.Status.Phase != v1.PodRunning {
		return nil
	}
	shares, quota, period, mem, err := s.podCgroups.PodCgroupConfig(pod)
	if err != nil {
		return nil
	}
	return &status.PodCgroup{CPUShares: shares, CPUQuota: quota, CPUPeriod: period, MemoryLimit: mem}
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

// withAPIStatus returns pod with the status the API has of it now (a copy;
// pod itself when the API has none): the pod object of the same UID, or
// for a static pod its mirror pod (annotation kubernetes.io/config.mirror
// = the static pod's UID), whose status is the static pod's, as the
// kubelet's status manager reads a static pod's old status from its mirror.
// After a crivk restart this is all that is known of the pod's containers
// until their probes run again (status.probedState).
func (s *syncer) withAPIStatus(pod *v1.Pod) *v1.Pod {
	if s.apiPod == nil {
		return pod
	}
	cur := s.apiPod(pod.Namespace, pod.Name)
	if cur == nil || (cur.UID != pod.UID && !isMirrorOf(cur, pod)) {
		return pod
	}
	p := pod.DeepCopy()
	p.Status = *cur.Status.DeepCopy()
	return p
}

// staticStatusHold bounds how long after the engine started a static
// pod's status waits for its mirror pod (holdStaticStatus).
const staticStatusHold = 30 * time.Second

// holdStaticStatus reports whether the sync of the static pod must not
// publish its status yet: nothing is published for it, the API's pods
// have not synced (its mirror pod, whose status is the one the API has of
// it, is not known yet), and the engine started less than
// staticStatusHold ago. Right after a crivk restart such a status would
// be generated blind (no probe ran, no API status) and report containers
// that were started and ready as neither, which the mirror writer would
// write (the kubelet's status manager writes no static pod's status until
// its pod manager knows the mirror pod). The pod is still synced (its
// containers run); its probe workers wait for the first status. Once
// the informer delivers the mirror pod the pod is synced again
// (Engine.Kick of the static UID) and published from the mirror's status.
func (s *syncer) holdStaticStatus(pod *v1.Pod) bool {
	if !podutil.IsStaticPod(pod) || s.apiPodsSynced == nil || s.apiPodsSynced() ||
		s.clock.Since(s.started) >= staticStatusHold {
		return false
	}
	if _, published := s.status.GetPodStatus(pod.UID); published {
		return false
	}
	if s.apiPod != nil {
		if cur := s.apiPod(pod.Namespace, pod.Name); cur != nil && isMirrorOf(cur, pod) {
			return false
		}
	}
	return true
}

// isMirrorOf: mirror is the API's mirror pod of the static pod.
func isMirrorOf(mirror, pod *v1.Pod) bool {
	hash, ok := mirror.Annotations[v1.MirrorPodAnnotationKey]
	return ok && podutil.IsStaticPod(pod) && hash == string(pod.UID)
}

// errBackingOff is returned by SyncPod while a container waits for a
// restart or pull back-off.
var errBackingOff = errors.New("a container is waiting for a back-off")

// SyncPod publishes the pod's status from the runtime state it was given;
// unless the pod is terminal, prepares the pod (prepare), plans and
// carries out one round of actions, reads the runtime back at once and
// publishes again (afterSync).
func (s *syncer) SyncPod(ctx context.Context, _ UpdateType, pod *v1.Pod, st *cri.PodStatus) (bool, error) {
	pod, hold := s.withAPIStatus(pod), s.holdStaticStatus(pod)
	// From here on the pod is the allocated one: its containers are sized,
	// created and reported with the resources allocated to them, which a
	// resize the node accepts makes the spec's (resize.go).
	pod = s.allocated(ctx, pod, st)
	status := s.generate(pod, st, false)
	if !hold {
		s.setRunningStatus(pod, status)
	}
	if isTerminalPhase(status.Phase) {
		return true, nil
	}
	s.addProbes(pod)
	st, err := s.prepare(ctx, pod, st)
	if err != nil {
		return false, err
	}
	now := s.clock.Now()
	plan := cri.ComputePodActions(pod, st, cri.PlanInputs{Started: s.startupPassed, Failed: s.failedProbe, BackOff: s.backoff.View(now),
		MaxDeadPerContainer: s.maxDead, PodCgroupResizing: s.runtime.PodCgroupResizing(pod),
		RestartAllContainers: allContainersRestarting(status)})
	if plan.Empty() {
		s.mu.Lock()
		delete(s.waiting, pod.UID)
		s.mu.Unlock()
		return false, nil
	}
	if plan.CreateSandbox && len(pod.Spec.ResourceClaims) > 0 {
		// The kubelet's SyncPod: the pod's claims are prepared before its
		// sandbox is made; if they cannot be, nothing is created and the
		// pod waits in ContainerCreating (dra.go). No error: the next
		// resync tries again, as the kubelet's.
		if err := prepareResourceClaims(ctx, s.resourceClaims, pod); err != nil {
			if s.recorder != nil {
				s.recorder.Eventf(pod, v1.EventTypeWarning, reasonFailedPrepareDynamicResources, "Failed to prepare dynamic resources: %v", err)
			}
			log.G(ctx).WithError(err).Warn("failed to prepare dynamic resources")
			return false, nil
		}
	}
	log.G(ctx).WithField("plan", plan.String()).Debug("syncing pod")
	res := s.runtime.SyncPod(ctx, pod, st, plan, s.backoff, now)
	err = s.afterSync(ctx, pod, res, hold)
	if len(res.Reset) > 0 && res.Error() == nil && s.requeue != nil {
		// The containers of an in-place restart are gone: the next sync
		// starts the pod again now, rather than at the next resync (the
		// kubelet's UpdatePod after RestartAllContainers). It cannot
		// loop: with nothing left to reset the condition turns False.
		s.requeue(pod.UID)
	}
	return false, err
}

// allContainersRestarting: st, the status generated for this sync, has
// the AllContainersRestarting condition True (the kubelet's
// restartingAllContainers argument of its runtime's SyncPod).
func allContainersRestarting(st v1.PodStatus) bool {
	for _, c := range st.Conditions {
		if c.Type == v1.AllContainersRestarting {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// prepare is what comes before a plan, in the kubelet's SyncPod order: the
// network must be ready (for a pod not on the host network), the pod
// cgroup exists, the volumes are set up, and containers a killed
// predecessor created but never started are removed. It returns the
// runtime state the plan is made from (read again after such a removal).
func (s *syncer) prepare(ctx context.Context, pod *v1.Pod, st *cri.PodStatus) (*cri.PodStatus, error) {
	if ne := s.networkError; ne != nil && !pod.Spec.HostNetwork {
		if err := ne(); err != nil {
			if s.recorder != nil {
				s.recorder.Eventf(pod, v1.EventTypeWarning, "NetworkNotReady", "%s: %v", ErrNetworkNotReady, err)
			}
			return nil, fmt.Errorf("%w: %v", ErrNetworkNotReady, err)
		}
	}
	// The pod cgroup exists with its class's values before the sandbox is
	// created in it (the kubelet's EnsureExists in SyncPod).
	if pc := s.podCgroups; pc != nil {
		if err := pc.EnsurePod(pod); err != nil {
			if s.recorder != nil {
				s.recorder.Eventf(pod, v1.EventTypeWarning, "FailedToCreatePodContainer", "unable to ensure pod container exists: %v", err)
			}
			return nil, fmt.Errorf("failed to ensure that the pod %s cgroups exist and are correctly applied: %w", cri.RefOf(pod), err)
		}
	}
	// Volumes are set up (or refreshed: live updates) before any container
	// may start; until they are, the pod stays in ContainerCreating.
	if err := s.mountVolumes(ctx, pod); err != nil {
		return nil, err
	}
	// A container a killed predecessor created but never started is
	// removed, not replaced: its attempt is made again, no restart counted.
	removed, err := s.runtime.RemoveInterrupted(ctx, st)
	if err != nil || !removed {
		return st, err
	}
	log.G(ctx).WithField("pod", cri.RefOf(pod).String()).Info("removed containers created but never started by a previous crivk")
	return s.refresh(ctx, cri.RefOf(pod))
}

// afterSync records a sync's result (events, back-offs, a failed resize),
// reads the runtime back, publishes the status unless held and starts the
// new containers' probes. It returns SyncPod's error: a *BackOffError
// while a container backs off.
func (s *syncer) afterSync(ctx context.Context, pod *v1.Pod, res *cri.SyncResult, hold bool) error {
	backingOff := s.recordSync(pod, res)
	s.resizeFailed(pod, res.ResizeErr)
	syncErr := res.Error()
	if after, err := s.refresh(ctx, cri.RefOf(pod)); err == nil {
		s.resizeProgress(pod, after)
		if !hold {
			s.setRunningStatus(pod, s.generate(pod, after, false))
		}
		s.addProbes(pod) // the new containers' workers probe now
	} else {
		syncErr = errors.Join(syncErr, err)
	}
	if syncErr == nil && backingOff {
		syncErr = errBackingOff
	}
	if backingOff {
		return &BackOffError{Err: syncErr, Until: s.clock.Now().Add(backOffPoll)}
	}
	return syncErr
}

// setRunningStatus hands a sync's status to the status manager; the first
// time a pod the API had Pending is Running, its start duration since the
// engine first saw it is observed (ObservePodStart), and its start SLI:
// since its creation, without the time it spent pulling images
// (ObservePodStartSLI).
func (s *syncer) setRunningStatus(pod *v1.Pod, status v1.PodStatus) {
	if status.Phase == v1.PodRunning && (pod.Status.Phase == "" || pod.Status.Phase == v1.PodPending) {
		if seen, ok := s.pods.takeFirstSeen(pod.UID); ok {
			now := s.clock.Now()
			if s.observePodStart != nil {
				s.observePodStart(now.Sub(seen))
			}
			s.mu.Lock()
			pulling := s.pulling[pod.UID]
			delete(s.pulling, pod.UID)
			s.mu.Unlock()
			if s.observeSLI != nil && !pod.CreationTimestamp.IsZero() {
				s.observeSLI(now.Sub(pod.CreationTimestamp.Time) - pulling.End.Sub(pulling.Start))
			}
		}
	}
	s.status.SetPodStatus(pod, status)
}

// SyncTerminatingPod stops the pod's containers with the grace period and
// publishes the status with the containers stopped.
//
// statusFn (an eviction's or a preemption's: Failed, its reason, the
// DisruptionTarget condition) is the kubelet's podStatusFn. The kubelet
// applies it to the status it caches before the kill, which its status
// manager does not publish while containers could run (mergePodStatus),
// then generates the status again from the stopped containers without it,
// with that cached status as the previous one (kubelet.go
// SyncTerminatingPod, generateAPIPodStatus): a pod whose containers all
// exited 0 ends Succeeded without its reason and message, one with a
// failed container Failed with them; DisruptionTarget stays either way.
// Here it is applied only to that previous status, after the kill
// (generateKilled, status.Input.Killed): crivk's cache keeps a terminal
// phase for good, so caching Failed first would forbid that Succeeded.
func (s *syncer) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, _ *cri.PodStatus, grace int64, statusFn PodStatusFunc) error {
	s.stopLivenessAndStartup(pod.UID)
	// The cached status may predate the last sync (a container it started):
	// read the runtime now rather than wait for a relist.
	st, err := s.refresh(ctx, cri.RefOf(pod))
	if err != nil {
		return err
	}
	deleted := pod.DeletionTimestamp != nil
	if s.alloc != nil {
		pod, _ = s.alloc.Allocated(pod)
	}
	s.status.SetPodStatus(pod, s.generate(pod, st, deleted))
	// The runtime manager records Killing per container, runs preStop.
	if err := s.runtime.KillPod(ctx, pod, st, grace); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("killing pod %s: %w", cri.RefOf(pod), err)
	}
	after, err := s.refresh(ctx, cri.RefOf(pod))
	if err != nil {
		return err
	}
	if after.Running() {
		return fmt.Errorf("pod %s still has running containers after kill", cri.RefOf(pod))
	}
	s.status.SetPodStatus(pod, s.generateKilled(pod, after, true, statusFn))
	return nil
}

// SyncTerminatingRuntimePod stops and removes a pod only the runtime knows.
func (s *syncer) SyncTerminatingRuntimePod(ctx context.Context, rp *cri.PodStatus) error {
	if err := s.runtime.KillPod(ctx, nil, rp, 1); err != nil {
		return fmt.Errorf("killing runtime pod %s: %w", rp.Ref, err)
	}
	st, err := s.runtime.GetPodStatus(ctx, rp.Ref)
	if err != nil {
		return err
	}
	if err := s.runtime.RemovePod(ctx, st); err != nil {
		return err
	}
	if err := s.removePodFiles(string(rp.Ref.UID)); err != nil {
		return err
	}
	if pc := s.podCgroups; pc != nil {
		if err := pc.RemovePod(rp.Ref.UID); err != nil {
			return fmt.Errorf("removing the cgroup of runtime pod %s: %w", rp.Ref, err)
		}
	}
	// Its containers and sandbox are gone: its user namespace's IDs are
	// free for another pod.
	if s.userns != nil {
		s.userns.Release(rp.Ref.UID)
	}
	s.cache.Delete(rp.Ref.UID)
	return s.unmountVolumes(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: rp.Ref.UID, Namespace: rp.Ref.Namespace, Name: rp.Ref.Name}})
}

// SyncTerminatedPod publishes the final status. A deleted pod's containers
// and sandbox are removed and OnTerminated is called; a pod that finished
// on its own keeps its containers (and logs) until it is deleted.
func (s *syncer) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, st *cri.PodStatus) error {
	// The pod may have been deleted since its worker took this work.
	if cur := s.pods.pod(pod.UID); cur != nil {
		pod = cur
	}
	s.removeProbes(pod.UID)
	s.status.SetPodStatus(pod, s.generate(pod, st, pod.DeletionTimestamp != nil))
	s.status.TerminatePod(pod)
	// No container of the pod can run any more: its volumes go.
	if err := s.unmountVolumes(ctx, pod); err != nil {
		return err
	}
	// Nor does any run in its cgroup: it goes too (the kubelet's
	// SyncTerminatedPod), whatever leaked into it is killed.
	if pc := s.podCgroups; pc != nil {
		if err := pc.RemovePod(pod.UID); err != nil {
			return fmt.Errorf("removing the cgroup of pod %s: %w", cri.RefOf(pod), err)
		}
	}
	// Nor in its user namespace: its IDs are free for another pod (the
	// kubelet's SyncTerminatedPod releases them here too).
	if s.userns != nil {
		s.userns.Release(pod.UID)
	}
	if pod.DeletionTimestamp == nil {
		return nil
	}
	return s.removeDeleted(ctx, pod)
}

// recordSync keeps the sync's waiting reasons for the status, records
// kubelet-style events and reports whether a container waits for a
// back-off.
func (s *syncer) recordSync(pod *v1.Pod, res *cri.SyncResult) (backingOff bool) {
	s.mu.Lock()
	s.waiting[pod.UID] = res.Waiting
	for _, p := range res.Pulls {
		span, ok := s.pulling[pod.UID]
		if !ok || p.Start.Before(span.Start) {
			span.Start = p.Start
		}
		if p.End.After(span.End) {
			span.End = p.End
		}
		s.pulling[pod.UID] = span
	}
	s.mu.Unlock()
	for _, wt := range res.Waiting {
		if wt.Reason == cri.ReasonCrashLoopBackOff || wt.Reason == cri.ReasonImagePullBackOff || wt.Reason == cri.ReasonErrImagePull {
			backingOff = true
		}
	}
	r := s.recorder
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
