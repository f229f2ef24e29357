package status

import (
	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
)

// Sidecars (restartable init containers) in the pod's status, as the
// kubelet counts them: a sidecar completes the init sequence once it runs,
// and counts among the running containers for the phase; a sidecar that
// exited and waits to restart does not count; one that never started keeps
// the pod Pending until a regular container has started.

// initContainerDone reports whether init container c (status cs) no longer
// holds back the pod's initialization.
func initContainerDone(pod *v1.Pod, c *v1.Container, cs v1.ContainerStatus, rt *cri.PodStatus) bool {
	if podutil.IsSidecar(c) {
		return cs.State.Running != nil || anyRegularCreated(pod, rt)
	}
	return cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
}

func anyRegularCreated(pod *v1.Pod, rt *cri.PodStatus) bool {
	for i := range pod.Spec.Containers {
		if rt.Latest(pod.Spec.Containers[i].Name, cri.ContainerTypeRegular) != nil {
			return true
		}
	}
	return false
}

// sidecarPhaseCount counts init status s (index i) for the phase if it is
// a sidecar's, and reports whether it was one.
func sidecarPhaseCount(pod *v1.Pod, i int, s v1.ContainerStatus, regular []v1.ContainerStatus, pendingInit, running *int) bool {
	if i >= len(pod.Spec.InitContainers) || !podutil.IsSidecar(&pod.Spec.InitContainers[i]) {
		return false
	}
	switch {
	case s.State.Running != nil:
		*running++
	case s.State.Terminated != nil || s.LastTerminationState.Terminated != nil:
		// Restarting or stopped: not taken into account.
	default:
		started := false
		for _, r := range regular {
			if r.ContainerID != "" {
				started = true
			}
		}
		if !started {
			*pendingInit++
		}
	}
	return true
}
