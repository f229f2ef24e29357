package eviction

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	evictionapi "github.com/crivk/crivk/eviction/api"
	"github.com/crivk/crivk/lifecycle"
	"github.com/crivk/crivk/lifecycle/admission"
	"github.com/crivk/crivk/podutil"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Pods is what the manager needs of the pod engine (*lifecycle.Engine).
type Pods interface {
	// ActivePods are the pods that may hold resources: the candidates.
	ActivePods() []*v1.Pod
	// Evict stops the pod's containers, then publishes it Failed with
	// reason Evicted; it blocks until the containers are stopped.
	Evict(ctx context.Context, pod *v1.Pod, ev lifecycle.Eviction) error
	// PodCleanedUp reports whether an evicted pod's resources are
	// reclaimed (its worker finished).
	PodCleanedUp(uid types.UID) bool
}

var (
	_ Pods                  = (*lifecycle.Engine)(nil)
	_ lifecycle.PodAdmitter = (*Manager)(nil)
)

// The kubelet's constants (eviction_manager.go).
const (
	// immediateGracePeriod is the grace period of a pod evicted for a
	// hard threshold or a local storage limit.
	immediateGracePeriod = 1
	// cleanupTimeout and cleanupPoll: after an eviction the manager
	// waits for the pod to be cleaned up before the next synchronize.
	cleanupTimeout = 30 * time.Second
	cleanupPoll    = time.Second
)

// Manager is the eviction manager. Its state is guarded by mu and written
// only by synchronize (one goroutine: Run's); Admit and the pressure
// readers may be called from any goroutine.
type Manager struct {
	cfg Config

	mu sync.RWMutex
	// conditions are the pressure conditions reported now (seen within
	// the transition period).
	conditions []v1.NodeConditionType
	// conditionsLastObservedAt: when each condition's threshold was last met.
	conditionsLastObservedAt map[v1.NodeConditionType]time.Time
	// thresholdsFirstObservedAt: when each met threshold was first met.
	thresholdsFirstObservedAt map[key]time.Time
	// thresholdsMet: met and past their grace period, not yet resolved
	// with their minimum reclaim.
	thresholdsMet []evictionapi.Threshold
	// lastObservations are the previous synchronize's.
	lastObservations observations
	// dedicatedImageFs is decided at the first synchronize with stats.
	dedicatedImageFs *bool

	// The memcg threshold notification (memcg.go), used only by Run's
	// goroutine: memcgOf opens the memory cgroup (newMemcg; tests replace
	// it); notifiers, one per memory.available threshold, signal
	// memcgEvents; thresholdsLastUpdated is when they were last re-armed.
	memcgOf               func(dir string) (memcg, error)
	notifiers             []*memoryNotifier
	memcgEvents           chan struct{}
	thresholdsLastUpdated time.Time
}

// New returns a manager for cfg (validated, defaults filled).
func New(cfg Config) (*Manager, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Manager{cfg: cfg, conditionsLastObservedAt: map[v1.NodeConditionType]time.Time{}, thresholdsFirstObservedAt: map[key]time.Time{},
		memcgOf: newMemcg, memcgEvents: make(chan struct{}, 1)}, nil
}

// IsUnderMemoryPressure, IsUnderDiskPressure and IsUnderPIDPressure report
// the node's pressure conditions (nodestatus.PressureSource).
func (m *Manager) IsUnderMemoryPressure() bool { return m.has(v1.NodeMemoryPressure) }
func (m *Manager) IsUnderDiskPressure() bool   { return m.has(v1.NodeDiskPressure) }
func (m *Manager) IsUnderPIDPressure() bool    { return m.has(v1.NodePIDPressure) }

func (m *Manager) has(c v1.NodeConditionType) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return hasCondition(m.conditions, c)
}

// Admit is the kubelet's eviction admit handler: under no pressure every
// pod; critical pods always; under memory pressure alone every pod but a
// BestEffort one that does not tolerate the memory-pressure taint; under
// any other pressure no pod. A refused pod gets reason Evicted and "The
// node had condition: [MemoryPressure]. ".
func (m *Manager) Admit(pod *v1.Pod) admission.Result {
	m.mu.RLock()
	conds := append([]v1.NodeConditionType(nil), m.conditions...)
	m.mu.RUnlock()
	if len(conds) == 0 || podutil.IsCriticalPod(pod) {
		return admission.Result{Admit: true}
	}
	if len(conds) == 1 && conds[0] == v1.NodeMemoryPressure {
		if podutil.QOSClass(pod) != v1.PodQOSBestEffort {
			return admission.Result{Admit: true}
		}
		taint := &v1.Taint{Key: v1.TaintNodeMemoryPressure, Effect: v1.TaintEffectNoSchedule}
		if corev1helpers.TolerationsTolerateTaint(klog.Background(), pod.Spec.Tolerations, taint, false) {
			return admission.Result{Admit: true}
		}
	}
	return admission.Result{Reason: Reason, Message: fmt.Sprintf(nodeConditionMessageFmt, conds)}
}

// Run synchronizes every monitoring period until ctx ends; after an
// eviction it first waits (up to 30 s) for the pod to be cleaned up, so
// that the next decision sees what the eviction freed.
func (m *Manager) Run(ctx context.Context, pods Pods) {
	log.G(ctx).WithField("thresholds", fmt.Sprint(m.cfg.Thresholds)).Info("eviction manager: starting control loop")
	m.startNotifiers(ctx)
	defer m.stopNotifiers()
	for {
		evicted, err := m.synchronize(ctx, pods)
		if err != nil {
			log.G(ctx).WithError(err).Warn("eviction manager: failed to synchronize")
		}
		if evicted != nil {
			m.waitCleanup(ctx, pods, evicted)
		} else {
			select {
			case <-ctx.Done():
			case <-m.cfg.Clock.After(m.cfg.MonitoringPeriod):
			case <-m.memcgEvents:
				log.G(ctx).WithField("notifiers", m.notifierDescriptions()).Info("eviction manager: memcg threshold notification: memory eviction threshold crossed")
			}
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// startNotifiers arms, with --kernel-memcg-notification, one notifier per
// memory.available threshold on the root memory cgroup and one per
// allocatableMemory.available threshold on kubepods' (the kubelet's
// Start); the first synchronize sets their thresholds.
func (m *Manager) startNotifiers(ctx context.Context) {
	if !m.cfg.KernelMemcgNotification {
		return
	}
	if m.cfg.MemoryCgroup == "" {
		log.G(ctx).WithError(errCgroupV2).Info("eviction manager: failed to create memory threshold notifier")
		return
	}
	cgroups := map[string]memcg{}
	for _, t := range m.cfg.Thresholds {
		dir := m.cfg.MemoryCgroup
		switch t.Signal {
		case evictionapi.SignalMemoryAvailable:
		case evictionapi.SignalAllocatableMemoryAvailable:
			dir = m.cfg.PodsMemoryCgroup
		default:
			continue
		}
		if dir == "" {
			log.G(ctx).WithField("threshold", t.String()).Info("eviction manager: failed to create memory threshold notifier: no node-allocatable memory cgroup")
			continue
		}
		cg, ok := cgroups[dir]
		if !ok {
			var err error
			if cg, err = m.memcgOf(dir); err != nil {
				log.G(ctx).WithError(err).Info("eviction manager: failed to create memory threshold notifier")
				continue
			}
			cgroups[dir] = cg
		}
		n := &memoryNotifier{threshold: t, cgroup: cg, events: m.memcgEvents}
		m.notifiers = append(m.notifiers, n)
		log.G(ctx).WithField("notifier", n.Description()).WithField("cgroup", dir).Info("eviction manager: created memoryThresholdNotifier")
	}
}

// updateNotifiers re-arms the notifiers from summary, at most every
// notifierRefreshInterval (the threshold moves with inactive_file).
func (m *Manager) updateNotifiers(ctx context.Context, summary *statsapi.Summary, now time.Time) {
	if len(m.notifiers) == 0 || (!m.thresholdsLastUpdated.IsZero() && now.Sub(m.thresholdsLastUpdated) <= notifierRefreshInterval) {
		return
	}
	m.thresholdsLastUpdated = now
	for _, n := range m.notifiers {
		if err := n.UpdateThreshold(ctx, summary); err != nil {
			log.G(ctx).WithError(err).WithField("notifier", n.Description()).Info("eviction manager: failed to update notifier")
		}
	}
}

func (m *Manager) stopNotifiers() {
	for _, n := range m.notifiers {
		n.Stop()
	}
}

func (m *Manager) notifierDescriptions() string {
	d := make([]string, len(m.notifiers))
	for i, n := range m.notifiers {
		d[i] = n.Description()
	}
	return strings.Join(d, ", ")
}

func (m *Manager) waitCleanup(ctx context.Context, pods Pods, pod *v1.Pod) {
	timeout := m.cfg.Clock.NewTimer(cleanupTimeout)
	defer timeout.Stop()
	tick := m.cfg.Clock.NewTicker(cleanupPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timeout.C():
			log.G(ctx).WithField("pod", pod.Namespace+"/"+pod.Name).Info("eviction manager: timed out waiting for pod to be cleaned up")
			return
		case <-tick.C():
			if pods.PodCleanedUp(pod.UID) {
				log.G(ctx).WithField("pod", pod.Namespace+"/"+pod.Name).Info("eviction manager: pod successfully cleaned up")
				return
			}
		}
	}
}

// synchronize is one round of the kubelet's synchronize: observe, decide
// the thresholds and conditions, then evict at most one pod. It returns
// the pod it evicted, or nil.
func (m *Manager) synchronize(ctx context.Context, pods Pods) (*v1.Pod, error) {
	if len(m.cfg.Thresholds) == 0 && !m.cfg.LocalStorageCapacityIsolation {
		return nil, nil
	}
	active := pods.ActivePods()
	summary, err := m.cfg.Summary(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the node's stats: %w", err)
	}
	if m.dedicatedImageFs == nil {
		d := dedicatedImageFs(summary)
		m.dedicatedImageFs = &d
	}
	obs := observe(summary, m.cfg.MemoryShare)
	stats := podStatsOf(summary)
	now := m.cfg.Clock.Now()
	m.updateNotifiers(ctx, summary, now)
	due, prevObs := m.decideThresholds(ctx, obs, now)

	// Pods past an ephemeral-storage limit go first, pressure or not.
	if m.cfg.LocalStorageCapacityIsolation {
		if p := m.localStorageEviction(ctx, pods, active, stats); p != nil {
			return p, nil
		}
	}
	// Stats not renewed since the last round decide nothing again.
	due = updatedSince(due, obs, prevObs)
	if len(due) == 0 {
		return nil, nil
	}
	return m.evictForPressure(ctx, pods, active, stats, obs, due, now)
}

// decideThresholds is the round's decision, the kubelet's: the thresholds
// met (those met before stay met until reclaimed to value + minimum
// reclaim), when each was first observed, the pressure conditions after
// the transition period, and the thresholds whose grace period has passed
// (due), all recorded for the next round and for the node's conditions.
// It returns due and the previous round's observations.
func (m *Manager) decideThresholds(ctx context.Context, obs observations, now time.Time) ([]evictionapi.Threshold, observations) {
	m.mu.RLock()
	prevMet, prevFirst, prevLast, prevObs := m.thresholdsMet, m.thresholdsFirstObservedAt, m.conditionsLastObservedAt, m.lastObservations
	m.mu.RUnlock()

	met := thresholdsMet(m.cfg.Thresholds, obs, false)
	if len(prevMet) > 0 {
		// Met before and not yet reclaimed to value + minimum reclaim.
		met = mergeThresholds(met, thresholdsMet(prevMet, obs, true))
	}
	first := firstObservedAt(met, prevFirst, now)
	last := lastObservedAt(conditionsOf(met), prevLast, now)
	conds := observedSince(last, m.cfg.PressureTransitionPeriod, now)
	due := graceMet(met, first, now)

	m.mu.Lock()
	if !sameConditions(m.conditions, conds) {
		log.G(ctx).WithField("conditions", fmt.Sprint(conds)).Info("eviction manager: node pressure conditions changed")
	}
	m.conditions, m.thresholdsFirstObservedAt, m.conditionsLastObservedAt, m.thresholdsMet = conds, first, last, due
	m.lastObservations = obs
	m.mu.Unlock()
	return due, prevObs
}

// evictForPressure answers the thresholds due (at least one), the
// highest-priority first: the node-level reclaim, else the first pod in
// the signal's ranking that can be evicted (at most one pod per round).
func (m *Manager) evictForPressure(ctx context.Context, pods Pods, active []*v1.Pod, stats podStatsFunc, obs observations, due []evictionapi.Threshold, now time.Time) (*v1.Pod, error) {
	byEvictionPriority(due)
	t := due[0]
	r := t.Signal.Resource()
	logger := log.G(ctx).WithField("resource", r).WithField("threshold", t.String())
	if o := obs[t.Signal].cause(t); o.of != "" {
		// A node of many: its own pods' use, or the machine's pressure,
		// which every node of the process sees and answers by evicting
		// its own pods.
		logger = logger.WithField("measure", o.of)
	}
	logger.Info("eviction manager: attempting to reclaim")
	m.nodeEvent(v1.EventTypeWarning, "EvictionThresholdMet", "Attempting to reclaim %s", r)
	if m.reclaimNodeLevel(ctx, t.Signal, r) {
		log.G(ctx).WithField("resource", r).Info("eviction manager: able to reduce resource pressure without evicting pods")
		return nil, nil
	}
	rankPods := rankFor(t.Signal, *m.dedicatedImageFs, stats)
	if rankPods == nil {
		return nil, fmt.Errorf("no ranking for signal %s", t.Signal)
	}
	if len(active) == 0 {
		log.G(ctx).Warn("eviction manager: eviction thresholds have been met, but no pods are active to evict")
		return nil, nil
	}
	rankPods(active)
	for _, d := range due {
		if o := obs[d.Signal]; !o.at.IsZero() && m.cfg.ObserveStatsAge != nil {
			m.cfg.ObserveStatsAge(string(d.Signal), now.Sub(o.at))
		}
	}
	// At most one pod per round.
	for _, pod := range active {
		grace := evictionGrace(t, pod, m.cfg.MaxPodGracePeriodSeconds)
		msg, ann := evictionMessage(r, pod, stats, due, obs)
		if m.evict(ctx, pods, pod, lifecycle.Eviction{Message: msg, GracePeriod: grace, DisruptionTarget: true, EventAnnotations: ann}) {
			m.observeEviction(string(t.Signal))
			return pod, nil
		}
	}
	log.G(ctx).Warn("eviction manager: unable to evict any pods from the node")
	return nil, nil
}

// evictionGrace is the grace period of a pod evicted for t: 1 s for a hard
// threshold, else the shorter of --eviction-max-pod-grace-period and the
// pod's own.
func evictionGrace(t evictionapi.Threshold, pod *v1.Pod, maxGrace int64) int64 {
	if t.Hard() {
		return immediateGracePeriod
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return min(maxGrace, *pod.Spec.TerminationGracePeriodSeconds)
	}
	return maxGrace
}

// reclaimNodeLevel runs the node-level reclaim of a disk signal (dead
// containers, then unused images: the kubelet's buildSignalToNodeReclaimFuncs
// for one filesystem or an image filesystem apart) and reports whether,
// measured again, no threshold is met any more with its minimum reclaim.
func (m *Manager) reclaimNodeLevel(ctx context.Context, s evictionapi.Signal, r v1.ResourceName) bool {
	var funcs []func(context.Context) error
	containerGC := func(ctx context.Context) error {
		if m.cfg.ContainerGC == nil {
			return nil
		}
		return m.cfg.ContainerGC.DeleteAllUnusedContainers(ctx)
	}
	imageGC := func(ctx context.Context) error {
		if m.cfg.ImageGC == nil {
			return nil
		}
		freed, err := m.cfg.ImageGC.DeleteUnusedImages(ctx)
		log.G(ctx).WithField("freedBytes", freed).Info("eviction manager: unused images removed")
		return err
	}
	if m.cfg.ImageGC == nil && m.cfg.ContainerGC == nil {
		return false
	}
	switch s {
	case evictionapi.SignalImageFsAvailable, evictionapi.SignalImageFsInodesFree:
		funcs = append(funcs, containerGC, imageGC)
	case evictionapi.SignalNodeFsAvailable, evictionapi.SignalNodeFsInodesFree:
		if !*m.dedicatedImageFs {
			funcs = append(funcs, containerGC, imageGC)
		}
	}
	if len(funcs) == 0 {
		return false
	}
	for _, f := range funcs {
		if err := f(ctx); err != nil {
			log.G(ctx).WithError(err).WithField("resource", r).Warn("eviction manager: unexpected error when attempting to reduce resource pressure")
		}
	}
	summary, err := m.cfg.Summary(ctx)
	if err != nil {
		log.G(ctx).WithError(err).Warn("eviction manager: failed to get summary stats after resource reclaim")
		return false
	}
	return len(thresholdsMet(m.cfg.Thresholds, observe(summary, m.cfg.MemoryShare), true)) == 0
}

// localStorageEviction evicts the first pod past its emptyDir sizeLimit,
// its pod-level ephemeral-storage limit or a container's limit (the
// kubelet's localStorageEviction, one pod per round here).
func (m *Manager) localStorageEviction(ctx context.Context, pods Pods, active []*v1.Pod, stats podStatsFunc) *v1.Pod {
	for _, pod := range active {
		ps, ok := stats(string(pod.UID))
		if !ok {
			continue
		}
		msg, signal := localStorageViolation(pod, ps, *m.dedicatedImageFs)
		if msg == "" {
			continue
		}
		if m.evict(ctx, pods, pod, lifecycle.Eviction{Message: msg, GracePeriod: immediateGracePeriod}) {
			m.observeEviction(signal)
			return pod
		}
	}
	return nil
}

// localStorageViolation returns the kubelet's message and eviction signal
// for the first local storage limit pod exceeds ("" when none): an
// emptyDir past its sizeLimit, the pod's ephemeral storage past the sum of
// its containers' limits, a container's writable layer and logs past its
// limit (logs only when the image filesystem is apart: the writable layer
// is on it).
func localStorageViolation(pod *v1.Pod, ps statsapi.PodStats, dedicatedImageFs bool) (string, string) {
	used := map[string]int64{}
	for _, v := range ps.VolumeStats {
		if v.UsedBytes != nil {
			used[v.Name] = int64(*v.UsedBytes)
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Sign() <= 0 {
			continue
		}
		if u, ok := used[v.Name]; ok && resource.NewQuantity(u, resource.BinarySI).Cmp(*v.EmptyDir.SizeLimit) > 0 {
			return fmt.Sprintf(emptyDirMessageFmt, v.Name, v.EmptyDir.SizeLimit.String()), signalEmptyDirFsLimit
		}
	}
	if limit, ok := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})[v1.ResourceEphemeralStorage]; ok {
		usage := resource.Quantity{}
		if e := ps.EphemeralStorage; e != nil && e.UsedBytes != nil {
			usage = *resource.NewQuantity(int64(*e.UsedBytes), resource.BinarySI)
		}
		if usage.Cmp(limit) > 0 {
			return fmt.Sprintf(podEphemeralStorageMessageFmt, limit.String()), signalEphemeralPodFsLimit
		}
	}
	// The regular containers' limits and, since v1.37 (#138462), the
	// sidecars' (the kubelet's containerEphemeralStorageLimitEviction).
	limits := map[string]*resource.Quantity{}
	addLimit := func(c *v1.Container) {
		if l := c.Resources.Limits.StorageEphemeral(); l != nil && l.Value() != 0 {
			limits[c.Name] = l
		}
	}
	for i := range pod.Spec.Containers {
		addLimit(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		if podutil.IsSidecar(&pod.Spec.InitContainers[i]) {
			addLimit(&pod.Spec.InitContainers[i])
		}
	}
	for _, cs := range ps.Containers {
		l, ok := limits[cs.Name]
		if !ok {
			continue
		}
		u := fsUsed(cs.Logs, v1.ResourceEphemeralStorage)
		if !dedicatedImageFs {
			u += fsUsed(cs.Rootfs, v1.ResourceEphemeralStorage)
		}
		if l.Cmp(*resource.NewQuantity(u, resource.BinarySI)) < 0 {
			return fmt.Sprintf(containerEphemeralStorageMessageFmt, cs.Name, l.String()), signalEphemeralContainerFsLimit
		}
	}
	return "", ""
}

// evict evicts pod through the engine unless it is critical (the kubelet
// never evicts those); it reports whether the pod was asked to go (an
// error stopping it is logged: the termination goes on).
func (m *Manager) evict(ctx context.Context, pods Pods, pod *v1.Pod, ev lifecycle.Eviction) bool {
	l := log.G(ctx).WithField("pod", pod.Namespace+"/"+pod.Name).WithField("uid", pod.UID)
	if podutil.IsCriticalPod(pod) {
		l.Warn("eviction manager: cannot evict a critical pod")
		return false
	}
	l.WithField("message", ev.Message).Info("eviction manager: evicting pod")
	if err := pods.Evict(ctx, pod, ev); err != nil {
		l.WithError(err).Warn("eviction manager: pod failed to evict")
	} else {
		l.Info("eviction manager: pod is evicted successfully")
	}
	return true
}

func (m *Manager) observeEviction(signal string) {
	if m.cfg.ObserveEviction != nil {
		m.cfg.ObserveEviction(signal)
	}
}

func (m *Manager) nodeEvent(typ, reason, format string, args ...any) {
	if m.cfg.Recorder == nil || m.cfg.NodeRef == nil {
		return
	}
	m.cfg.Recorder.Eventf(m.cfg.NodeRef, typ, reason, format, args...)
}

func sameConditions(a, b []v1.NodeConditionType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
