package status

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/crivk/crivk/podutil"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// ManagerConfig configures a Manager.
type ManagerConfig struct {
	// Clock stamps transition times and start times the caller left
	// empty. Default clock.RealClock{}.
	Clock clock.Clock
	// Notify receives a deep copy of a pod carrying its new status. It is
	// required. It is called only from the goroutine running Run, never
	// concurrently and never while the manager holds a lock, so it may call
	// back into the manager. It should not block for long: while it runs no
	// other status is delivered.
	Notify func(*v1.Pod)
	// CouldHaveRunningContainers reports whether the pod's containers may
	// still run (its termination has not completed); nil: never. While it
	// is true a terminal phase is not delivered (the kubelet's
	// mergePodStatus, see publishable). It is called without the
	// manager's lock held.
	CouldHaveRunningContainers func(types.UID) bool
}

// Manager is the one place that decides which pod status is
// published: the kubelet's status manager, with virtual-kubelet's pod
// notifier in place of the API client.
//
//	SetPodStatus(pod, status) / TerminatePod(pod)       any goroutine
//	  │ refuse illegal container transitions; keep a terminal
//	  │ phase, StartTime and unchanged transition times; take
//	  │ other writers' conditions from pod.Status; normalize
//	  │ to seconds; equal to the cached status -> nothing to do
//	  v
//	versioned cache   uid -> {pod, status, version}      guarded by mu
//	  │ version = ++seq (one counter for all pods)
//	  v
//	dirty set         uid                                guarded by mu
//	  │ non-blocking send: a burst leaves one token
//	  v
//	signal            chan struct{}, buffered 1
//	  │
//	  v
//	Run (one goroutine) takes the dirty set; a terminal phase is held
//	  │ back while the pod could have running containers (publishable);
//	  │ a pod whose status equals the one it last delivered is skipped;
//	  │ no lock held from here
//	  v
//	Notify(deep copy of pod with its newest status)
//
// A burst of updates for one pod before Run gets to it is thus delivered
// once, with the newest status. All methods are safe for concurrent use.
type Manager struct {
	clock  clock.Clock
	notify func(*v1.Pod)
	// couldRun is CouldHaveRunningContainers (never nil).
	couldRun func(types.UID) bool
	// signal holds a token while the dirty set may be non-empty.
	signal chan struct{}
	// running is set while a Run delivers; a second Run is refused so
	// that Notify is never called concurrently.
	running atomic.Bool

	mu sync.Mutex
	// pods is the versioned cache. Guarded by mu.
	pods map[types.UID]*podStatusEntry
	// dirty holds the pods whose cached status Run has not looked at
	// since it last changed. Guarded by mu.
	dirty map[types.UID]struct{}
	// seq is the last version handed out. Guarded by mu.
	seq uint64
	// roundDone is closed (and replaced) after every delivery round, for
	// WaitDelivered. Guarded by mu.
	roundDone chan struct{}
}

// podStatusEntry is one pod in the cache. Its fields are guarded by
// Manager.mu; the entry is replaced, never reused, once removed.
type podStatusEntry struct {
	// pod is the newest pod handed in, without its status.
	pod     *v1.Pod
	status  v1.PodStatus
	version uint64
	// api is the phase, reason and message of the API's status (the
	// newest pod.Status handed in): what a held terminal phase is
	// replaced with before the first delivery.
	api v1.PodStatus
	// delivered is the status last handed to Notify, nil before the first.
	delivered *v1.PodStatus
	// redeliver makes Run hand the status to Notify again although it
	// equals delivered: another writer changed it in the API (Reconcile).
	// redeliverRV is the API's resourceVersion Reconcile saw, set on the
	// pod Run hands over: kept here, not in pod, which SetPodStatus
	// replaces with the engine's copy (an older resourceVersion) at any
	// time. virtual-kubelet skips a pod equal (go-cmp) to the last one it
	// was handed, so the same status on the same resourceVersion would not
	// be written again; the status itself is written on virtual-kubelet's
	// lister's resourceVersion, whatever the pod handed carries.
	redeliver   bool
	redeliverRV string
}

// The state TerminatePod reports a container in when the pod's
// termination could not account for it (the kubelet's).
const (
	ReasonContainerStatusUnknown = "ContainerStatusUnknown"
	messageContainerNotLocated   = "The container could not be located when the pod was terminated"
	exitCodeContainerNotLocated  = 137
)

// maxTerminationMessageBytesPod is how many bytes of termination messages
// a pod's status may carry, shared by its containers (the kubelet's
// MaxPodTerminationMessageLogLength).
const maxTerminationMessageBytesPod = 12 * 1024

// NewManager validates cfg and returns a manager with an empty
// cache. Nothing is delivered until Run is called.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	if cfg.Notify == nil {
		return nil, errors.New("lifecycle: status manager needs a Notify callback")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.CouldHaveRunningContainers == nil {
		cfg.CouldHaveRunningContainers = func(types.UID) bool { return false }
	}
	return &Manager{
		clock:     cfg.Clock,
		notify:    cfg.Notify,
		couldRun:  cfg.CouldHaveRunningContainers,
		signal:    make(chan struct{}, 1),
		pods:      map[types.UID]*podStatusEntry{},
		dirty:     map[types.UID]struct{}{},
		roundDone: make(chan struct{}),
	}, nil
}

// Run delivers changed statuses through Notify until ctx ends. Statuses
// set before Run starts are delivered when it does. Only one Run may
// deliver at a time: a second concurrent call logs an error and returns at
// once. A status set while Notify runs is delivered by the next round.
func (m *Manager) Run(ctx context.Context) {
	if !m.running.CompareAndSwap(false, true) {
		log.G(ctx).Error("status manager: Run called while another Run delivers; refusing")
		return
	}
	defer m.running.Store(false)
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.signal:
			m.deliver(ctx)
			m.mu.Lock()
			close(m.roundDone)
			m.roundDone = make(chan struct{})
			m.mu.Unlock()
		}
	}
}

// pendingStatus is one delivery decided under the lock and made without it.
type pendingStatus struct {
	entry  *podStatusEntry
	status v1.PodStatus // what was delivered, kept apart from Notify's copy
	pod    *v1.Pod
	// redeliver and redeliverRV are the entry's when the delivery was
	// decided.
	redeliver   bool
	redeliverRV string
}

// deliver hands every dirty pod whose publishable status differs from the
// one last delivered to Notify. Must only be called from Run.
func (m *Manager) deliver(ctx context.Context) {
	m.mu.Lock()
	uids := make([]types.UID, 0, len(m.dirty))
	for uid := range m.dirty {
		uids = append(uids, uid)
	}
	clear(m.dirty)
	m.mu.Unlock()
	// Asked without the lock: the predicate takes the pod workers'.
	running := make(map[types.UID]bool, len(uids))
	for _, uid := range uids {
		running[uid] = m.couldRun(uid)
	}

	var out []pendingStatus
	m.mu.Lock()
	for _, uid := range uids {
		e := m.pods[uid]
		if e == nil {
			continue
		}
		st := publishable(e, running[uid])
		if e.delivered != nil && !e.redeliver && equality.Semantic.DeepEqual(*e.delivered, st) {
			continue
		}
		pod := e.pod.DeepCopy()
		pod.Status = *st.DeepCopy()
		if e.redeliver {
			pod.ResourceVersion = e.redeliverRV
		}
		out = append(out, pendingStatus{entry: e, status: st, pod: pod, redeliverRV: e.redeliverRV, redeliver: e.redeliver})
	}
	m.mu.Unlock()

	for _, p := range out {
		if ctx.Err() != nil {
			// Not delivered: mark the pods dirty again for a later Run.
			m.redirty(out)
			return
		}
		m.notify(p.pod)
		m.mu.Lock()
		// Record it unless the pod was removed (and perhaps set again) since.
		if m.pods[p.pod.UID] == p.entry {
			p.entry.delivered = &p.status
			// A Reconcile while Notify ran (another resourceVersion, or
			// this delivery was not one) redelivers once more.
			if p.redeliver && p.entry.redeliverRV == p.redeliverRV {
				p.entry.redeliver, p.entry.redeliverRV = false, ""
			}
		}
		m.mu.Unlock()
	}
}

// publishable is the status of e to deliver, the kubelet's mergePodStatus
// rule: a pod is not published in a terminal phase (Succeeded, Failed)
// while it could have running containers, that is until its termination
// (its containers and sandbox stopped) has completed. Until then the
// phase, reason and message stay those last delivered (or the API's);
// the conditions are the new ones. So the first terminal status the API
// shows is one read after the sandbox stopped (PodReadyToStartContainers
// False, as the kubelet's), and no consumer releases what a pod holds
// while its containers still run. The caller must hold mu.
func publishable(e *podStatusEntry, couldRun bool) v1.PodStatus {
	st := *e.status.DeepCopy()
	old := &e.api
	if e.delivered != nil {
		old = e.delivered
	}
	if couldRun && !isTerminalPhase(old.Phase) && isTerminalPhase(st.Phase) {
		st.Phase, st.Reason, st.Message = old.Phase, old.Reason, old.Message
		if st.Phase == "" {
			st.Phase = v1.PodPending
		}
	}
	return st
}

func isTerminalPhase(p v1.PodPhase) bool { return p == v1.PodSucceeded || p == v1.PodFailed }

// redirty marks the pods of out whose status was not delivered dirty again.
func (m *Manager) redirty(out []pendingStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range out {
		if m.pods[p.pod.UID] == p.entry && p.entry.delivered != nil && !p.entry.redeliver &&
			equality.Semantic.DeepEqual(*p.entry.delivered, p.status) {
			continue
		}
		m.dirty[p.pod.UID] = struct{}{}
	}
	m.kick()
}

// kick signals Run without blocking. The caller must hold mu.
func (m *Manager) kick() {
	select {
	case m.signal <- struct{}{}:
	default: // a token is already waiting
	}
}

// Reconcile is the kubelet's needsReconcile, driven by the pod informer
// instead of a 10 s timer: apiPod is the API's copy of a pod (the
// informer's newest). When a condition the node owns has, in the API,
// another status than in the status last delivered, that status is handed
// to Notify again so that it is written back, as the kubelet's status
// manager writes its cached status back. It reports whether it will. A pod
// not cached or not yet delivered is left alone: its first delivery writes
// it anyway.
//
// On an update (periodic false) a condition counts only if it changed no
// earlier than the delivered one: the API showing an older delivery (its
// transition before the newest one's) is an echo that a lagging informer
// brings during a burst, and writing on it would cost API requests for
// nothing. On the informer's periodic resync (periodic true) any other
// status counts, whatever its time: a write virtual-kubelet gave up on
// (queue.MaxRetries during a partition, after the controller's
// MarkPodsNotReady), or a controller whose clock is ahead of the node's,
// leaves an older-looking condition in the API that no update brings
// again. This cannot loop: each resync hands a differing pod to Notify
// once. If that status is written (by virtual-kubelet, or for a terminal
// pod by the provider's terminal hook), the API agrees and the next resync
// finds nothing; if nothing writes it (virtual-kubelet skips pods whose API
// phase is terminal, the hook writes only a terminal status of the same
// phase), no update follows, and the difference costs one Notify per pod
// per resync period (a minute in crivk) and no API request.
//
// The pod handed to Notify carries apiPod's resourceVersion. That is not
// what the status is written on (virtual-kubelet writes on its lister's
// resourceVersion); it only makes the pod differ from the one last handed,
// which virtual-kubelet would otherwise skip as unchanged.
func (m *Manager) Reconcile(apiPod *v1.Pod, periodic bool) bool {
	if apiPod == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.pods[apiPod.UID]
	if e == nil || e.delivered == nil || !conditionsOverwritten(e.delivered, &apiPod.Status, periodic) {
		return false
	}
	podLogger(apiPod).WithField("api", conditionSummary(apiPod.Status.Conditions)).
		WithField("crivk", conditionSummary(e.delivered.Conditions)).WithField("resync", periodic).
		Info("the API's pod conditions differ from crivk's status; writing them back")
	e.redeliver, e.redeliverRV = true, apiPod.ResourceVersion
	m.dirty[apiPod.UID] = struct{}{}
	m.kick()
	return true
}

// conditionSummary is "Type=Status,..." in the conditions' order.
func conditionSummary(cs []v1.PodCondition) string {
	parts := make([]string, 0, len(cs))
	for _, c := range cs {
		parts = append(parts, string(c.Type)+"="+string(c.Status))
	}
	return strings.Join(parts, ",")
}

// conditionsOverwritten reports whether api has a condition the node
// owns, also in delivered, with another status and, unless anyTime, a
// transition no earlier than delivered's: a change another writer made
// after the delivery. An older delivery's echo (its transition before the
// newest one's) is not, unless anyTime.
func conditionsOverwritten(delivered, api *v1.PodStatus, anyTime bool) bool {
	for i := range api.Conditions {
		a := &api.Conditions[i]
		if !ownedConditions[a.Type] {
			continue
		}
		for j := range delivered.Conditions {
			d := &delivered.Conditions[j]
			if d.Type == a.Type && d.Status != a.Status && (anyTime || !a.LastTransitionTime.Before(&d.LastTransitionTime)) {
				return true
			}
		}
	}
	return false
}

// SetPodStatus records status as pod's new status and, if it differs from
// the cached one, bumps the pod's version and has Run deliver it. pod gives
// the identity, the spec (restart policies, container order) and, in
// pod.Status, the API's view: the conditions the node does not own are
// taken from it, and it stands for the previous status of a pod not yet
// cached. The caller's status is not modified.
//
// The cache only moves forward like the kubelet's:
//   - an illegal container transition (see checkContainerStateTransition)
//     is logged with the pod's identity and refused: the old status stays;
//   - a terminal phase (Succeeded, Failed) of the cached or the API status
//     is final, and a terminal pod is never reported ready;
//   - StartTime, once set, is kept;
//   - a condition whose status did not change keeps its LastTransitionTime,
//     a changed one without a LastTransitionTime gets the clock's now;
//   - ObservedGeneration is the pod's generation and never goes down;
//   - timestamps are truncated to seconds (what the API stores), container
//     statuses sorted and termination messages capped, so that a status
//     equal to the cached one after that is not a change.
func (m *Manager) SetPodStatus(pod *v1.Pod, status v1.PodStatus) {
	if pod == nil {
		log.L.Error("status manager: SetPodStatus called without a pod")
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setLocked(pod, *status.DeepCopy())
}

// TerminatePod makes the cached status (or pod.Status if none) of a pod
// whose containers are all stopped final, following the kubelet: every
// regular container not terminated is reported terminated with reason
// ContainerStatusUnknown and exit code 137 once the pod has initialized
// (before that they never started and stay waiting); so is every init
// container not terminated except the trailing ones still waiting for
// their first start. A phase that is not terminal becomes Failed, even if
// the containers succeeded: the kubelet does not know whether they did;
// but a static pod's phase is kept, as the kubelet's. The result is
// published like SetPodStatus.
func (m *Manager) TerminatePod(pod *v1.Pod) {
	if pod == nil {
		log.L.Error("status manager: TerminatePod called without a pod")
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, cached := m.pods[pod.UID]
	base := &pod.Status
	if cached {
		base = &e.status
	}
	status := base.DeepCopy()
	if podInitialized(pod, &pod.Status) || podInitialized(pod, status) {
		for i := range status.ContainerStatuses {
			markNotLocated(&status.ContainerStatuses[i])
		}
	}
	for i := range startedInitContainers(status.InitContainerStatuses) {
		markNotLocated(&status.InitContainerStatuses[i])
	}
	switch {
	case podutil.IsStaticPod(pod):
		// The kubelet gives a static pod no terminal phase here
		// (TODO(#116484) in its TerminatePod): one whose manifest is
		// written again with the same UID starts again (Engine.UpdatePod),
		// and a pod never leaves a terminal phase.
	case status.Phase == v1.PodSucceeded, status.Phase == v1.PodFailed:
	case status.Phase == v1.PodPending, status.Phase == v1.PodRunning:
		if status.Phase == v1.PodRunning && cached {
			podLogger(pod).Info("terminated pod still had phase Running; marking it Failed")
		}
		status.Phase = v1.PodFailed
	default:
		podLogger(pod).WithField("phase", status.Phase).Error("terminated pod has an unknown phase; marking it Failed")
		status.Phase = v1.PodFailed
	}
	m.setLocked(pod, *status)
}

// markNotLocated reports a container the termination found no trace of as
// failed, unless it is already terminated.
func markNotLocated(cs *v1.ContainerStatus) {
	if cs.State.Terminated != nil {
		return
	}
	cs.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
		Reason:   ReasonContainerStatusUnknown,
		Message:  messageContainerNotLocated,
		ExitCode: exitCodeContainerNotLocated,
	}}
	cs.Ready = false
	started := false
	cs.Started = &started
}

// podInitialized tells whether status shows the pod ever got past its init
// containers, i.e. whether its regular containers may have run (the
// kubelet's hasPodInitialized).
func podInitialized(pod *v1.Pod, status *v1.PodStatus) bool {
	if len(pod.Spec.InitContainers) == 0 {
		return true
	}
	for _, cs := range status.ContainerStatuses {
		if cs.LastTerminationState.Terminated != nil || cs.State.Waiting == nil {
			return true
		}
	}
	n := len(status.InitContainerStatuses)
	if n == 0 {
		return false
	}
	last := status.InitContainerStatuses[n-1]
	if c := findContainer(pod.Spec.InitContainers, last.Name); c != nil && podutil.IsSidecar(c) {
		return last.State.Running != nil && last.Started != nil && *last.Started
	}
	for _, t := range []*v1.ContainerStateTerminated{last.State.Terminated, last.LastTerminationState.Terminated} {
		if t != nil && t.ExitCode == 0 {
			return true
		}
	}
	return false
}

// startedInitContainers returns statuses without the trailing ones that
// wait for their first start; at least the first status is kept (the
// kubelet's initializedContainers).
func startedInitContainers(statuses []v1.ContainerStatus) []v1.ContainerStatus {
	for i := len(statuses) - 1; i >= 0; i-- {
		if statuses[i].State.Waiting == nil || statuses[i].LastTerminationState.Terminated != nil {
			return statuses[:i+1]
		}
	}
	if len(statuses) > 0 {
		return statuses[:1]
	}
	return nil
}

// setLocked merges status (owned by the caller: a copy) into the cache as
// SetPodStatus describes. The caller must hold mu.
func (m *Manager) setLocked(pod *v1.Pod, status v1.PodStatus) {
	e, cached := m.pods[pod.UID]
	old := &pod.Status
	if cached {
		old = &e.status
	}
	if err := checkContainerStateTransition(old, &status, &pod.Spec); err != nil {
		podLogger(pod).WithError(err).Error("status update refused, keeping the previous status")
		return
	}
	if p := finalPhase(old, &pod.Status); p != "" && status.Phase != p {
		podLogger(pod).WithField("phase", status.Phase).WithField("terminalPhase", p).
			Warn("pod attempted to leave its terminal phase; keeping it")
		status.Phase = p
	}
	if isTerminalPhase(old.Phase) {
		keepTerminalCause(old, &status)
	}
	notReadyWhenTerminal(&status)
	now := metav1.NewTime(m.clock.Now())
	status.Conditions = mergeStatusConditions(pod.Status.Conditions, old.Conditions, status.Conditions, now)
	if old.StartTime != nil && !old.StartTime.IsZero() {
		status.StartTime = old.StartTime.DeepCopy()
	} else if status.StartTime == nil || status.StartTime.IsZero() {
		status.StartTime = &now
	}
	status.ObservedGeneration = max(pod.Generation, old.ObservedGeneration)
	normalizeStatus(pod, &status)

	stored := &v1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: *pod.ObjectMeta.DeepCopy(), Spec: *pod.Spec.DeepCopy()}
	api := v1.PodStatus{Phase: pod.Status.Phase, Reason: pod.Status.Reason, Message: pod.Status.Message}
	if cached && equality.Semantic.DeepEqual(e.status, status) {
		e.pod, e.api = stored, api // newer metadata; nothing new to publish
		if e.delivered != nil && !equality.Semantic.DeepEqual(*e.delivered, e.status) {
			// A terminal phase held back (publishable): Run looks
			// again, the pod's containers may be stopped by now.
			m.dirty[pod.UID] = struct{}{}
			m.kick()
		}
		return
	}
	if !cached {
		e = &podStatusEntry{}
		m.pods[pod.UID] = e
	}
	m.seq++
	e.pod, e.status, e.version, e.api = stored, status, m.seq, api
	m.dirty[pod.UID] = struct{}{}
	m.kick()
}

// finalPhase is the terminal phase the pod already reached, or "": the
// cached (or previous) status's, else the API's.
func finalPhase(old, api *v1.PodStatus) v1.PodPhase {
	for _, s := range []*v1.PodStatus{old, api} {
		if s.Phase == v1.PodSucceeded || s.Phase == v1.PodFailed {
			return s.Phase
		}
	}
	return ""
}

// keepTerminalCause: a status set over a terminal old one (a readiness
// probe's republish generated before the final status of an eviction and
// set after it, whether it tried to leave the phase or not) keeps old's
// reason and message, which go with that phase, when it has none, and old's DisruptionTarget condition, which the status
// generated before the kill did not have: the pod's final status never
// loses why it ended.
func keepTerminalCause(old, status *v1.PodStatus) {
	if old.Phase == status.Phase && status.Reason == "" && status.Message == "" {
		status.Reason, status.Message = old.Reason, old.Message
	}
	for _, c := range status.Conditions {
		if c.Type == v1.DisruptionTarget {
			return
		}
	}
	for _, c := range old.Conditions {
		if c.Type == v1.DisruptionTarget {
			status.Conditions = append(status.Conditions, *c.DeepCopy())
			return
		}
	}
}

// checkContainerStateTransition refuses a status in which a container that
// was terminated in old is no longer terminated although it will not be
// restarted: by its own restartPolicy and restartPolicyRules
// (ContainerRestartRules), else the pod's restartPolicy Never, or OnFailure
// and it exited with 0 (podutil.ContainerShouldRestart). Under the pod's
// restartPolicy Always (or none, which the API defaults to Always) every
// container may restart, and so may a restartable init container (sidecar)
// under any policy, and so may every container of a pod with a
// RestartAllContainers rule. Such a transition would mean the engine
// resurrected a finished container, a bug; the kubelet refuses it the same
// way.
func checkContainerStateTransition(old, cur *v1.PodStatus, spec *v1.PodSpec) error {
	policy := spec.RestartPolicy
	if policy == v1.RestartPolicyAlways || policy == "" {
		return nil
	}
	if podutil.AllContainersCouldRestart(spec) {
		// Any container may run again: one exit can restart them all in
		// place (RestartAllContainers; the kubelet's).
		return nil
	}
	check := func(kind string, olds, news []v1.ContainerStatus, sidecar func(string) bool) error {
		specs := spec.Containers
		if kind != "container" {
			specs = spec.InitContainers
		}
		mayRestart := func(name string, t *v1.ContainerStateTerminated) bool {
			if policy == v1.RestartPolicyOnFailure && t.ExitCode != 0 {
				return true
			}
			c := findContainer(specs, name)
			return c != nil && podutil.ContainerShouldRestart(c, spec, t.ExitCode)
		}
		for _, o := range olds {
			if o.State.Terminated == nil || mayRestart(o.Name, o.State.Terminated) || sidecar(o.Name) {
				continue
			}
			for _, n := range news {
				if n.Name == o.Name && n.State.Terminated == nil {
					return fmt.Errorf("terminated %s %q (exit code %d, restartPolicy %s) attempted illegal transition to non-terminated state",
						kind, o.Name, o.State.Terminated.ExitCode, policy)
				}
			}
		}
		return nil
	}
	if err := check("container", old.ContainerStatuses, cur.ContainerStatuses, func(string) bool { return false }); err != nil {
		return err
	}
	return check("init container", old.InitContainerStatuses, cur.InitContainerStatuses, func(name string) bool {
		c := findContainer(spec.InitContainers, name)
		return c != nil && podutil.IsSidecar(c)
	})
}

func findContainer(cs []v1.Container, name string) *v1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

// normalizeStatus makes status what the API would store and return, so
// that comparing it with an earlier one does not flap (the kubelet's
// normalizeStatus): timestamps truncated to seconds in UTC (the API's
// RFC3339), termination messages capped to the pod's share of 12 KiB per
// container, regular and ephemeral container statuses sorted by name,
// init container statuses in spec order.
func normalizeStatus(pod *v1.Pod, status *v1.PodStatus) {
	perContainer := maxTerminationMessageBytesPod
	if n := len(pod.Spec.Containers) + len(pod.Spec.InitContainers) + len(pod.Spec.EphemeralContainers); n > 0 {
		perContainer /= n
	}
	if status.StartTime != nil {
		normalizeTime(status.StartTime)
	}
	for i := range status.Conditions {
		normalizeTime(&status.Conditions[i].LastProbeTime)
		normalizeTime(&status.Conditions[i].LastTransitionTime)
	}
	for _, list := range [][]v1.ContainerStatus{status.InitContainerStatuses, status.ContainerStatuses, status.EphemeralContainerStatuses} {
		for i := range list {
			normalizeState(&list[i].State, perContainer)
			normalizeState(&list[i].LastTerminationState, perContainer)
		}
	}
	byName := func(l []v1.ContainerStatus) func(i, j int) bool {
		return func(i, j int) bool { return l[i].Name < l[j].Name }
	}
	sort.SliceStable(status.ContainerStatuses, byName(status.ContainerStatuses))
	sort.SliceStable(status.EphemeralContainerStatuses, byName(status.EphemeralContainerStatuses))
	order := make(map[string]int, len(pod.Spec.InitContainers))
	for i, c := range pod.Spec.InitContainers {
		order[c.Name] = i
	}
	rank := func(name string) int {
		if i, ok := order[name]; ok {
			return i
		}
		return len(order) // unknown to the spec: after the known ones
	}
	ics := status.InitContainerStatuses
	sort.SliceStable(ics, func(i, j int) bool { return rank(ics[i].Name) < rank(ics[j].Name) })
}

func normalizeState(s *v1.ContainerState, maxMessage int) {
	if s.Running != nil {
		normalizeTime(&s.Running.StartedAt)
	}
	if t := s.Terminated; t != nil {
		normalizeTime(&t.StartedAt)
		normalizeTime(&t.FinishedAt)
		if len(t.Message) > maxMessage {
			cut := maxMessage
			for cut > 0 && !utf8.RuneStart(t.Message[cut]) {
				cut-- // do not split a UTF-8 sequence
			}
			t.Message = t.Message[:cut]
		}
	}
}

func normalizeTime(t *metav1.Time) {
	if t.IsZero() {
		*t = metav1.Time{}
		return
	}
	*t = metav1.NewTime(t.UTC().Truncate(time.Second))
}

// GetPodStatus returns a deep copy of the pod's cached status and true, or
// false if the pod is unknown.
func (m *Manager) GetPodStatus(uid types.UID) (v1.PodStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.pods[uid]
	if !ok {
		return v1.PodStatus{}, false
	}
	return *e.status.DeepCopy(), true
}

// Version returns the pod's version, 0 if the pod is unknown. It changes
// exactly when the cached status does, and only ever increases, also
// across RemovePod: versions come from one counter for all pods, so they
// are not consecutive.
func (m *Manager) Version(uid types.UID) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.pods[uid]; ok {
		return e.version
	}
	return 0
}

// WaitDelivered blocks until the pod's cached status, as publishable
// makes it, was handed to Notify (or the pod is unknown), or ctx ends. The
// engine calls it before the API object of a terminated pod is deleted,
// so that the final status is published first, as the kubelet's status
// manager does.
func (m *Manager) WaitDelivered(ctx context.Context, uid types.UID) error {
	for {
		running := m.couldRun(uid)
		m.mu.Lock()
		e := m.pods[uid]
		if e == nil || (e.delivered != nil && equality.Semantic.DeepEqual(*e.delivered, publishable(e, running))) {
			m.mu.Unlock()
			return nil
		}
		ch := m.roundDone
		m.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// RemovePod forgets the pod, once its API object is gone. A status not yet
// delivered is dropped; one Notify already under way may still complete.
// A later SetPodStatus for the UID starts afresh.
func (m *Manager) RemovePod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pods, uid)
	delete(m.dirty, uid)
}

// Pods returns every cached pod with its cached status, as deep copies,
// in no particular order.
func (m *Manager) Pods() []*v1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*v1.Pod, 0, len(m.pods))
	for _, e := range m.pods {
		p := e.pod.DeepCopy()
		p.Status = *e.status.DeepCopy()
		out = append(out, p)
	}
	return out
}

func podLogger(pod *v1.Pod) log.Logger {
	return log.L.WithField("pod", pod.Namespace+"/"+pod.Name).WithField("uid", pod.UID)
}
