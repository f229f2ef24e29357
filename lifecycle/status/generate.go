package status

import (
	"fmt"
	"strings"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/lifecycle/prober"
	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Waiting reasons the kubelet uses before a container exists.
const (
	ReasonContainerCreating = "ContainerCreating"
	ReasonPodInitializing   = "PodInitializing"
)

// Input is everything Generate needs; it is plain data so that
// status generation stays a pure function.
type Input struct {
	Pod *v1.Pod
	// Previous is the status last published (or the API's at creation); it
	// supplies startTime, transition times and conditions crivk doesn't own.
	Previous v1.PodStatus
	Runtime  *cri.PodStatus
	// Waiting holds why containers the last sync wanted started are not.
	Waiting map[string]cri.Waiting
	// RuntimeName prefixes container IDs ("containerd://<id>").
	RuntimeName string
	NodeIP      string
	// PodIPs are kept once known: a stopped sandbox has no IP any more.
	PodIPs []string
	// Deleted is set once the pod was killed for deletion: a phase that
	// would still run becomes terminal.
	Deleted bool
	// Killed is, after a kill that carried a status function (an
	// eviction's or a preemption's: phase Failed, its reason and message,
	// the DisruptionTarget condition), that function applied to Previous:
	// what the kubelet's status manager caches before the kill
	// (SyncTerminatingPod) and its generateAPIPodStatus takes as the
	// previous status after it. It stands for Previous then, with the
	// kubelet's rule: the phase the stopped containers give wins when it
	// is terminal (all exited 0: Succeeded), else Killed's (a static pod);
	// the reason and message are Killed's only when the phases agree
	// (Failed), otherwise none; its conditions (DisruptionTarget) stay.
	// Nil: no kill status.
	Killed *v1.PodStatus
	Now    time.Time
	// Probes holds the probes' settled results; nil: nothing is probed (a
	// container with a readiness probe is then never ready).
	Probes ProbeResults
	// ResizeConditions are the pod's PodResizePending and
	// PodResizeInProgress conditions (package allocation), published
	// while the pod is not terminal. Pod is then the allocated pod: its
	// containers' resources are those allocated to them.
	ResizeConditions []v1.PodCondition
	// RecursiveReadOnlyMounts is whether the pod's runtime handler supports
	// recursive read-only mounts: the recursiveReadOnly the container
	// statuses' volumeMounts report (volumemounts.go).
	RecursiveReadOnlyMounts bool
	// PodCgroup is the pod cgroup's CPU and memory values, read for a pod
	// the API shows Running (the pod-level status.resources,
	// podresources.go); nil: not read (no pod cgroups, the pod not
	// Running, or the read failed), and the previous status' values stand.
	PodCgroup *PodCgroup
}

// ProbeResults is what status generation needs of the prober
// (*prober.Manager): the settled result of a container's probe of type t,
// and whether a container that started at startedAt was already running
// before the agent started (its probes then seeded no result).
type ProbeResults interface {
	Result(t prober.ProbeType, containerID string) (prober.Result, bool)
	RanBeforeStart(startedAt time.Time) bool
}

// Generate computes the API status of a pod from the runtime's state,
// following the kubelet's generateAPIPodStatus: the addresses, then the
// container statuses, the phase and the conditions, each derived in that
// order from the same input by a pure step below.
func Generate(in Input) v1.PodStatus {
	now := metav1.NewTime(in.Now)
	s := v1.PodStatus{
		QOSClass:  in.Previous.QOSClass,
		StartTime: in.Previous.StartTime,
	}
	if s.StartTime == nil {
		s.StartTime = &now
	}
	setAddresses(&s, in.NodeIP, in.PodIPs)
	// The kubelet's podRestarting: the pod restarts all its containers in
	// place (restartall.go).
	restarting := restartingAll(in)
	initDone, incompleteInit, unready := setContainerStatuses(&s, in, restarting)
	setPodResources(&s, in)
	prev := setPhase(&s, in)
	s.Conditions = mergeConditions(prev.Conditions, nodeConditions(in, s.Phase, initDone, restarting, incompleteInit, unready), now)
	return s
}

// setAddresses sets the host's and the pod's IPs.
func setAddresses(s *v1.PodStatus, nodeIP string, podIPs []string) {
	if nodeIP != "" {
		s.HostIP = nodeIP
		s.HostIPs = []v1.HostIP{{IP: nodeIP}}
	}
	if len(podIPs) > 0 {
		s.PodIP = podIPs[0]
		for _, ip := range podIPs {
			s.PodIPs = append(s.PodIPs, v1.PodIP{IP: ip})
		}
	}
}

// setContainerStatuses sets the init, regular and ephemeral container
// statuses. It returns whether the init sequence is done, the init
// containers not done yet and the containers whose readiness holds the
// pod's back (sidecars count, as in the kubelet's
// GenerateContainersReadyCondition; ephemeral containers play no part in
// the phase or the conditions). A pod with a RestartAllContainers rule
// carries over from the previous status what its containers' removal
// took from the runtime (restartall.go; restarting: the pod restarts all
// its containers).
func setContainerStatuses(s *v1.PodStatus, in Input, restarting bool) (initDone bool, incompleteInit, unready []string) {
	pod := in.Pod
	inPlace := podutil.AllContainersCouldRestart(&pod.Spec)
	status := func(c *v1.Container, typ cri.ContainerType, initDone bool) v1.ContainerStatus {
		cs := containerStatus(in, c, typ, initDone)
		if inPlace {
			carryOverRestart(&cs, in, typ, in.Runtime.Latest(c.Name, typ), restarting)
		}
		return cs
	}
	initDone = true
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := status(c, cri.ContainerTypeInit, initDone)
		s.InitContainerStatuses = append(s.InitContainerStatuses, cs)
		if !initContainerDone(pod, c, cs, in.Runtime) { // sidecars.go
			initDone = false
			incompleteInit = append(incompleteInit, c.Name)
		}
		if podutil.IsSidecar(c) && !cs.Ready {
			unready = append(unready, c.Name)
		}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cs := status(c, cri.ContainerTypeRegular, initDone)
		s.ContainerStatuses = append(s.ContainerStatuses, cs)
		if !cs.Ready {
			unready = append(unready, c.Name)
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		c := (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		s.EphemeralContainerStatuses = append(s.EphemeralContainerStatuses, containerStatus(in, c, cri.ContainerTypeEphemeral, true))
	}
	return initDone, incompleteInit, unready
}

// setPhase sets the phase, with its reason and message, from the container
// statuses and the previous status, and returns the status the merge takes
// as the previous one: the kill's when there is one, else in.Previous.
func setPhase(s *v1.PodStatus, in Input) *v1.PodStatus {
	pod := in.Pod
	// A static pod killed for deletion gets no terminal phase (the
	// kubelet's getPhase, TODO(#116484)): its manifest may be written
	// again with the same UID, and the pod then starts again.
	s.Phase = podPhase(pod, s.InitContainerStatuses, s.ContainerStatuses, in.Deleted && !podutil.IsStaticPod(pod))
	prev := &in.Previous
	if k := in.Killed; k != nil {
		// The kubelet's three-way merge in generateAPIPodStatus, with the
		// kill's status as the previous one (the kubelet caches it over
		// the status before the kill, even when that one was already
		// terminal: containers that exited just before an eviction): it
		// only replaces a phase that is not terminal.
		prev = k
		if !isTerminalPhase(s.Phase) && isTerminalPhase(k.Phase) {
			s.Phase = k.Phase
		}
	}
	if p := in.Previous.Phase; isTerminalPhase(p) {
		// A pod never leaves a terminal phase.
		s.Phase = p
	}
	if s.Phase == prev.Phase {
		// The reason and message go with the phase (an eviction's Failed,
		// Evicted), as the kubelet's generateAPIPodStatus keeps them.
		s.Reason, s.Message = prev.Reason, prev.Message
	}
	return prev
}

// ReasonPodSandboxNotReady is the reason of a False
// PodReadyToStartContainers (the kubelet's
// kubetypes.PodSandboxNotReadyReason); its message is
// cri.PodStatus.SandboxNotReady's.
const ReasonPodSandboxNotReady = "PodSandboxNotReady"

// nodeConditions are the conditions the node owns (ownedConditions),
// before the merge with the previous status: PodReadyToStartContainers,
// Initialized, ContainersReady, Ready, PodScheduled, AllContainersRestarting
// (a pod with a RestartAllContainers rule; restarting: it restarts all its
// containers) and the resize conditions.
func nodeConditions(in Input, phase v1.PodPhase, initDone, restarting bool, incompleteInit, unready []string) []v1.PodCondition {
	// As the kubelet's GeneratePodReadyToStartContainersCondition since
	// v1.37 (#135300): False says why, the reason PodSandboxNotReady.
	ready := condition(v1.PodReadyToStartContainers, true, "", "")
	if msg := in.Runtime.SandboxNotReady(); msg != "" {
		ready = condition(v1.PodReadyToStartContainers, false, ReasonPodSandboxNotReady, msg)
	}
	conds := []v1.PodCondition{ready}
	switch {
	case initDone && phase == v1.PodSucceeded:
		conds = append(conds, condition(v1.PodInitialized, true, reasonPodCompleted, ""))
	case initDone:
		conds = append(conds, condition(v1.PodInitialized, true, "", ""))
	case initializedBefore(in.Previous.Conditions):
		// Once initialized a pod stays so, also while its init
		// containers run again after an in-place restart of all its
		// containers (the kubelet's GeneratePodInitializedCondition
		// with RestartAllContainersOnContainerExits, for every pod).
		conds = append(conds, condition(v1.PodInitialized, true, "", ""))
	default:
		conds = append(conds, condition(v1.PodInitialized, false, "ContainersNotInitialized",
			fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(incompleteInit, " "))))
	}
	switch reason, terminal := terminalReason(phase); {
	case terminal:
		conds = append(conds, condition(v1.ContainersReady, false, reason, ""), condition(v1.PodReady, false, reason, ""))
	case len(unready) > 0:
		msg := fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
		conds = append(conds, condition(v1.ContainersReady, false, "ContainersNotReady", msg), condition(v1.PodReady, false, "ContainersNotReady", msg))
	default:
		conds = append(conds, condition(v1.ContainersReady, true, "", ""), readyWithGates(in.Pod, in.Previous.Conditions))
	}
	// As the kubelet's generateAPIPodStatus: PodScheduled=True, which a pod
	// bound by spec.nodeName without the scheduler gets only from the node
	// (a scheduler's condition, when there is one, is kept as it is).
	conds = append(conds, condition(v1.PodScheduled, true, "", ""))
	if c, ok := allContainersRestartingCondition(in, phase, restarting); ok { // restartall.go
		conds = append(conds, c)
	}
	if _, terminal := terminalReason(phase); !terminal {
		// The resize conditions, with their own times (the kubelet's
		// determinePodResizeStatus: none once the pod is terminal).
		conds = append(conds, in.ResizeConditions...)
	}
	// The conditions the node does not own are the previous status's
	// (mergeConditions): a kill's DisruptionTarget among them (the
	// kubelet's generateAPIPodStatus copies it from its cached status).
	return conds
}

// initializedBefore: conds (the previous status') has Initialized True.
func initializedBefore(conds []v1.PodCondition) bool {
	for _, c := range conds {
		if c.Type == v1.PodInitialized {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// readyWithGates is the Ready condition of a pod whose containers are all
// ready: it also waits for every readiness gate's condition to be True (the
// kubelet's GeneratePodReadyCondition).
func readyWithGates(pod *v1.Pod, conds []v1.PodCondition) v1.PodCondition {
	var msgs []string
	for _, g := range pod.Spec.ReadinessGates {
		var found *v1.PodCondition
		for i := range conds {
			if conds[i].Type == g.ConditionType {
				found = &conds[i]
			}
		}
		switch {
		case found == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", g.ConditionType))
		case found.Status != v1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", g.ConditionType, found.Status))
		}
	}
	if len(msgs) > 0 {
		return condition(v1.PodReady, false, "ReadinessGatesNotReady", strings.Join(msgs, ", "))
	}
	return condition(v1.PodReady, true, "", "")
}

func containerStatus(in Input, c *v1.Container, typ cri.ContainerType, initDone bool) v1.ContainerStatus {
	cs := v1.ContainerStatus{Name: c.Name, Image: c.Image}
	latest := in.Runtime.Latest(c.Name, typ)
	waiting, hasWaiting := in.Waiting[c.Name]
	if latest == nil {
		reason := ReasonContainerCreating
		if typ == cri.ContainerTypeInit || !initDone {
			reason = ReasonPodInitializing
		}
		w := &v1.ContainerStateWaiting{Reason: reason}
		if hasWaiting {
			w = &v1.ContainerStateWaiting{Reason: waiting.Reason, Message: waiting.Message}
		}
		cs.State.Waiting = w
		started := false
		cs.Started = &started
		cs.VolumeMounts = volumeMounts(in, c, typ, false)
		return cs
	}
	cs.ContainerID = containerID(in.RuntimeName, latest.ID)
	cs.VolumeMounts = volumeMounts(in, c, typ, true)
	cs.User = containerUser(latest.User)
	// The image of the container that exists, as the kubelet reports it:
	// after the spec's image changed, the old container shows its own image
	// until it is replaced.
	if latest.Image != "" {
		cs.Image = latest.Image
	}
	cs.ImageID = latest.ImageRef
	cs.RestartCount = int32(latest.Attempt)
	// The allocated resources and those the container has (resources.go);
	// the API server accepts a resize only of a pod whose running
	// containers report the latter.
	cs.Resources = containerResources(in, c, latest, cs.ContainerID)
	cs.AllocatedResources = c.Resources.Requests
	started := latest.State == cri.StateRunning
	cs.Started = &started
	switch latest.State {
	case cri.StateRunning:
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(latest.StartedAt)}
		started, cs.Ready = probedState(in, c, cs.ContainerID, latest.ID, latest.StartedAt)
		cs.Started = &started
		if prev := in.Runtime.Previous(c.Name, typ); prev != nil && prev.State == cri.StateExited {
			cs.LastTerminationState.Terminated = terminated(in.RuntimeName, prev)
		}
	case cri.StateExited:
		t := terminated(in.RuntimeName, latest)
		if hasWaiting && !in.Deleted {
			cs.State.Waiting = &v1.ContainerStateWaiting{Reason: waiting.Reason, Message: waiting.Message}
			cs.LastTerminationState.Terminated = t
		} else {
			cs.State.Terminated = t
			// An init container that completed is ready (the kubelet's).
			cs.Ready = typ == cri.ContainerTypeInit && t.ExitCode == 0
			if prev := in.Runtime.Previous(c.Name, typ); prev != nil && prev.State == cri.StateExited {
				cs.LastTerminationState.Terminated = terminated(in.RuntimeName, prev)
			}
		}
	default:
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: ReasonContainerCreating}
		if hasWaiting {
			cs.State.Waiting = &v1.ContainerStateWaiting{Reason: waiting.Reason, Message: waiting.Message}
		}
	}
	return cs
}

// probedState is the started and ready flags of a running container that
// started at startedAt, the kubelet's prober manager's UpdatePodStatus
// (ChangeContainerStatusOnKubeletRestart off, its default):
//
//   - started: at once without a startup probe; else its settled result
//     is Success; with none settled yet, what the previous status said of
//     the same container, or for a container that ran before crivk
//     started what the API's status says of it (isContainerStarted: a
//     container that started before crivk restarted stays started; its
//     startup worker does not probe a started container). The API's
//     counts besides the previous status because a static pod's first
//     status after a restart may be generated before its mirror pod is
//     known (the informer not synced yet);
//   - ready: once started, at once without a readiness probe; else its
//     settled result is Success; with none settled yet, a container that
//     ran before crivk started is ready if the pod is Ready in the API
//     (setReadyStateOnKubeletRestart), any other is not.
//
// So a crivk restart changes neither flag of a container until one of its
// probes says otherwise (the node e2e "MirrorPod when kubelet restarts
// should not change container status"), and a container started after it
// waits for its probes as ever.
func probedState(in Input, c *v1.Container, apiID, id string, startedAt time.Time) (started, ready bool) {
	prev := runningStatus(in.Previous, c.Name, apiID)
	if in.Probes == nil {
		// Nothing probes: a startup probe never holds a container back; a
		// readiness probe never succeeds.
		return true, c.ReadinessProbe == nil
	}
	started = true
	if c.StartupProbe != nil {
		if r, ok := in.Probes.Result(prober.Startup, id); ok {
			started = r == prober.Success
		} else {
			started = isStarted(prev) ||
				(in.Probes.RanBeforeStart(startedAt) && in.Pod != nil && isStarted(runningStatus(in.Pod.Status, c.Name, apiID)))
		}
	}
	if !started {
		return false, false
	}
	if c.ReadinessProbe == nil {
		return true, true
	}
	if r, ok := in.Probes.Result(prober.Readiness, id); ok {
		return true, r == prober.Success
	}
	return true, in.Probes.RanBeforeStart(startedAt) && podReadyInAPI(in.Pod)
}

// runningStatus is st's status of the running container apiID named name,
// or nil.
func runningStatus(st v1.PodStatus, name, apiID string) *v1.ContainerStatus {
	var out *v1.ContainerStatus
	for _, list := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for i := range list {
			if p := &list[i]; p.Name == name && p.ContainerID == apiID && p.State.Running != nil {
				out = p
			}
		}
	}
	return out
}

func isStarted(cs *v1.ContainerStatus) bool {
	return cs != nil && cs.Started != nil && *cs.Started
}

// podReadyInAPI: the pod object's (API) status has PodReady True.
func podReadyInAPI(pod *v1.Pod) bool {
	if pod == nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func containerID(runtime, id string) string {
	if runtime == "" {
		runtime = "cri"
	}
	return runtime + "://" + id
}

func terminated(runtime string, c *cri.ContainerStatus) *v1.ContainerStateTerminated {
	reason := "Error"
	switch {
	case c.Reason == "OOMKilled":
		reason = "OOMKilled"
	case c.ExitCode == 0:
		reason = "Completed"
	}
	return &v1.ContainerStateTerminated{
		ExitCode:    c.ExitCode,
		Reason:      reason,
		Message:     c.Message,
		StartedAt:   metav1.NewTime(c.StartedAt),
		FinishedAt:  metav1.NewTime(c.FinishedAt),
		ContainerID: containerID(runtime, c.ID),
	}
}

// podPhase is the kubelet's getPhase (ContainerRestartRules on): whether a
// terminated container restarts is podutil.ContainerShouldRestart, its own
// restartPolicy and rules over the pod's, or it was removed by an in-place
// restart of all the pod's containers (RestartAllContainersOnContainerExits:
// its last state says RestartingAllContainers). A plain init container
// that ran and failed, or that waits with a last state, is not pending
// (the kubelet's): it fails the pod if it may not run again.
func podPhase(pod *v1.Pod, initStatuses, statuses []v1.ContainerStatus, deleted bool) v1.PodPhase {
	restarts := func(specs []v1.Container, s v1.ContainerStatus, t *v1.ContainerStateTerminated) bool {
		c := findContainer(specs, s.Name)
		return c == nil || podutil.ContainerShouldRestart(c, &pod.Spec, t.ExitCode) || t.Reason == ReasonRestartingAllContainers
	}
	pendingInit := 0
	sidecarsRunning := 0
	for i, s := range initStatuses {
		if sidecarPhaseCount(pod, i, s, statuses, &pendingInit, &sidecarsRunning) { // sidecars.go
			continue
		}
		switch t := s.LastTerminationState.Terminated; {
		case s.State.Terminated != nil:
			if s.State.Terminated.ExitCode != 0 && !restarts(pod.Spec.InitContainers, s, s.State.Terminated) {
				return v1.PodFailed
			}
		case s.State.Waiting != nil && t != nil:
			if t.ExitCode != 0 && !restarts(pod.Spec.InitContainers, s, t) {
				return v1.PodFailed
			}
		default:
			pendingInit++
		}
	}
	var waiting, running, stopped, stoppedForGood, succeeded int
	for _, s := range statuses {
		switch {
		case s.State.Running != nil:
			running++
		case s.State.Terminated != nil:
			stopped++
			if !restarts(pod.Spec.Containers, s, s.State.Terminated) {
				stoppedForGood++
			}
			if s.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case s.State.Waiting != nil:
			if s.LastTerminationState.Terminated != nil {
				stopped++
				if !restarts(pod.Spec.Containers, s, s.LastTerminationState.Terminated) {
					stoppedForGood++
				}
			} else {
				waiting++
			}
		}
	}
	running += sidecarsRunning
	if deleted && running == 0 {
		// Killed for deletion: the pod is over, whatever its policy.
		if pendingInit == 0 && stopped > 0 && stopped == succeeded && waiting == 0 {
			return v1.PodSucceeded
		}
		return v1.PodFailed
	}
	switch {
	case pendingInit > 0:
		return v1.PodPending
	case waiting > 0:
		return v1.PodPending
	case running > 0:
		return v1.PodRunning
	case stopped > 0:
		if stopped != stoppedForGood {
			// At least one is restarting.
			return v1.PodRunning
		}
		if stopped == succeeded {
			return v1.PodSucceeded
		}
		return v1.PodFailed
	default:
		return v1.PodPending
	}
}
