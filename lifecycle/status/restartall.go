package status

import (
	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
)

// The in-place restart of a whole pod (the restartPolicyRules action
// RestartAllContainers; the kubelet v1.37's generateAPIPodStatus,
// convertToAPIContainerStatuses and GenerateAllContainersRestartingCondition)
// in the pod's status. Only a pod with such a rule (a source) is concerned
// (podutil.AllContainersCouldRestart). Its containers are removed from
// the runtime (cri's ContainersToReset), so what the runtime no longer
// shows is carried over from the previous status:
//
//	a source exited (its rule's code) ──> AllContainersRestarting True,
//	  reason RestartAllContainersStarted: the plan resets the containers
//	  (the source's exit counts as restartable for the phase)
//	the containers are gone ──> each container that was not waiting:
//	  Waiting RestartingAllContainers, last state Terminated
//	  RestartingAllContainers (exit code 137), restartCount + 1; the
//	  condition False (nothing left to reset); the pod stays Running
//	  and Initialized
//	they run again ──> restartCount and the last state carried over from
//	  the previous status while the runtime has no earlier instance
//
// The condition is False with the reason PodCompleted or PodFailed once
// the pod is terminal, else without a reason when no restart is under way.

// Reasons and messages of the in-place restart, the kubelet's.
const (
	// ReasonRestartingAllContainers is the waiting reason and last
	// terminated reason of a container removed by the in-place restart.
	ReasonRestartingAllContainers  = "RestartingAllContainers"
	messageRestartingAllContainers = "The container is removed because RestartAllContainers in place"
	// exitCodeRestartingAllContainers is the last terminated exit code of
	// such a container (the kubelet's "an error").
	exitCodeRestartingAllContainers = 137
	// reasonRestartAllContainersStarted is the reason of a True
	// AllContainersRestarting condition.
	reasonRestartAllContainersStarted  = "RestartAllContainersStarted"
	messageRestartAllContainersStarted = "container exited with restart policy rule"
)

// restartingAll is the kubelet's ShouldAllContainersRestart: the previous
// status says the pod is restarting all its containers (its condition
// True, or a container terminated with a RestartAllContainers rule's
// code), or the runtime's newest instance of an init or regular container
// exited with such a code.
func restartingAll(in Input) bool {
	spec := &in.Pod.Spec
	if !podutil.AllContainersCouldRestart(spec) {
		return false
	}
	if podutil.AllContainersRestarting(spec, &in.Previous) {
		return true
	}
	found := false
	eachContainer(spec, func(c *v1.Container, typ cri.ContainerType) {
		if l := in.Runtime.Latest(c.Name, typ); l != nil && l.State == cri.StateExited && podutil.RestartsAllContainers(c, l.ExitCode) {
			found = true
		}
	})
	return found
}

// allContainersRestartingCondition is the pod's AllContainersRestarting
// condition (the kubelet's GenerateAllContainersRestartingCondition), and
// false for a pod without a RestartAllContainers rule, which has none.
func allContainersRestartingCondition(in Input, phase v1.PodPhase, restarting bool) (v1.PodCondition, bool) {
	if !podutil.AllContainersCouldRestart(&in.Pod.Spec) {
		return v1.PodCondition{}, false
	}
	if reason, terminal := terminalReason(phase); terminal {
		return condition(v1.AllContainersRestarting, false, reason, ""), true
	}
	if !restarting || allReset(in) {
		return condition(v1.AllContainersRestarting, false, "", ""), true
	}
	return condition(v1.AllContainersRestarting, true, reasonRestartAllContainersStarted, messageRestartAllContainersStarted), true
}

// allReset: the runtime has no instance left of the pod's init and
// regular containers (the kubelet's AllContainersRestartCleanedUp).
func allReset(in Input) bool {
	left := false
	eachContainer(&in.Pod.Spec, func(c *v1.Container, typ cri.ContainerType) {
		left = left || in.Runtime.Latest(c.Name, typ) != nil
	})
	return !left
}

func eachContainer(spec *v1.PodSpec, f func(*v1.Container, cri.ContainerType)) {
	for i := range spec.InitContainers {
		f(&spec.InitContainers[i], cri.ContainerTypeInit)
	}
	for i := range spec.Containers {
		f(&spec.Containers[i], cri.ContainerTypeRegular)
	}
}

// carryOverRestart completes the status cs of an init or regular
// container of a pod with a RestartAllContainers rule from the previous
// status of the same container, as the kubelet's
// convertToAPIContainerStatuses with RestartAllContainersOnContainerExits:
//
//   - the container is not in the runtime: while the pod restarts all its
//     containers (restarting) and it was not waiting, it waits with
//     RestartingAllContainers, last terminated the same way, one restart
//     more; else it keeps its restart count and last state;
//   - it is, with no earlier instance: its restart count is at least the
//     previous one (one more when it runs again after the previous status
//     showed it terminated with as many), its last state the previous
//     status' terminated state of another container, else its last state.
//
// latest is the runtime's newest instance, nil if none.
func carryOverRestart(cs *v1.ContainerStatus, in Input, typ cri.ContainerType, latest *cri.ContainerStatus, restarting bool) {
	old := previousStatus(in.Previous, cs.Name, typ)
	if old == nil {
		return
	}
	if latest == nil {
		if restarting && old.State.Waiting == nil {
			cs.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{
				Reason: ReasonRestartingAllContainers, Message: messageRestartingAllContainers}}
			cs.LastTerminationState = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
				Reason: ReasonRestartingAllContainers, Message: messageRestartingAllContainers, ExitCode: exitCodeRestartingAllContainers}}
			cs.RestartCount = old.RestartCount + 1
			return
		}
		cs.RestartCount = old.RestartCount
		cs.LastTerminationState = *old.LastTerminationState.DeepCopy()
		return
	}
	if p := in.Runtime.Previous(cs.Name, typ); p != nil && p.State == cri.StateExited {
		return // the runtime's earlier instance is the last state, as ever
	}
	cs.RestartCount = max(cs.RestartCount, old.RestartCount)
	if latest.State == cri.StateRunning && old.State.Terminated != nil && old.RestartCount >= int32(latest.Attempt) {
		cs.RestartCount = old.RestartCount + 1
	}
	if cs.LastTerminationState.Terminated != nil {
		return
	}
	switch {
	case old.ContainerID != cs.ContainerID && old.State.Terminated != nil:
		cs.LastTerminationState.Terminated = old.State.Terminated.DeepCopy()
	case old.LastTerminationState.Terminated != nil:
		cs.LastTerminationState.Terminated = old.LastTerminationState.Terminated.DeepCopy()
	}
}
