package lifecycle

import (
	"context"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/lifecycle/allocation"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
)

// In-place resize in a pod's sync, the kubelet's SyncPod steps for it:
//
//  1. allocated: the resize the spec asks for is decided (Engine.handleResize,
//     once per generation of the spec, deferred ones again at the
//     kubelet's retry triggers, Engine.runResizeRetries; package
//     allocation: PodResizePending Infeasible or Deferred, or
//     allocated with PodResizeInProgress and ResizeStarted) and the sync
//     goes on with the allocated pod;
//  2. resizeProgress: PodResizeInProgress is set while a running
//     container's runtime values differ from its allocation
//     (cri.ResizeInProgress), or the pod cgroup's from the allocated
//     pod's (Runtime.PodCgroupResizing: the pod-level resources, the
//     kubelet's isPodLevelResourcesResizeInProgress), and cleared, with
//     ResizeCompleted, once they match;
//  3. the plan resizes the containers and the pod cgroup (cri's
//     resize.go; PlanInputs.PodCgroupResizing) and SyncPod applies it,
//     the pod cgroup in order around the containers; resizeFailed sets
//     the condition's reason Error with the failure's message
//     (ResizeError);
//  4. after the runtime is read back, resizeProgress again, so the status
//     published shows the resize done.

// allocated returns the pod to sync, with its allocated resources, after
// deciding a resize its spec asks for, and brings PodResizeInProgress up
// to date with the runtime state st.
func (s *syncer) allocated(ctx context.Context, pod *v1.Pod, st *cri.PodStatus) *v1.Pod {
	if s.alloc == nil {
		return pod
	}
	s.alloc.Backfill(pod)
	if isTerminalPhase(pod.Status.Phase) || pod.DeletionTimestamp != nil {
		p, _ := s.alloc.Allocated(pod)
		return p
	}
	out := pod
	if s.resize != nil {
		p, err := s.resize(pod)
		if err != nil {
			log.G(ctx).WithError(err).WithField("pod", cri.RefOf(pod).String()).Error("deciding the pod's resize")
		}
		out = p
	} else {
		out, _ = s.alloc.Allocated(pod)
	}
	s.resizeProgress(out, st)
	return out
}

// resizeProgress sets PodResizeInProgress while the runtime's values of
// a running container of pod (allocated) differ from its allocation, or
// the pod cgroup's from the pod's, and clears it with the kubelet's
// ResizeCompleted event once they match. A pod cgroup not made yet (a
// new pod, or the first sync after a restart) is no resize: a pod's
// creation reports none (the kubelet's #138049).
func (s *syncer) resizeProgress(pod *v1.Pod, st *cri.PodStatus) {
	if s.alloc == nil || st == nil {
		return
	}
	if cri.ResizeInProgress(pod, st) || s.runtime.PodCgroupResizing(pod) {
		s.alloc.SetInProgress(pod.UID, "", "", pod.Generation)
		return
	}
	if g, cleared := s.alloc.ClearInProgress(pod.UID); cleared {
		if s.recorder != nil {
			s.recorder.Eventf(pod, v1.EventTypeNormal, allocation.EventResizeCompleted, "%s", allocation.CompletedMessage(pod, g))
		}
		// What the pod no longer uses may let a deferred resize in (the
		// kubelet retries when the actuated requests it reads back shrink).
		s.alloc.RequestRetry(allocation.TriggerPodResized)
	}
}

// resizeFailed records a failed resize of pod (allocated): the
// PodResizeInProgress condition's reason Error with the failure's message,
// and a ResizeError Warning when that changed the condition.
func (s *syncer) resizeFailed(pod *v1.Pod, err error) {
	if s.alloc == nil || err == nil {
		return
	}
	g, updated := s.alloc.SetInProgress(pod.UID, v1.PodReasonError, err.Error(), pod.Generation)
	if updated && s.recorder != nil {
		s.recorder.Eventf(pod, v1.EventTypeWarning, allocation.EventResizeError, "%s", allocation.ErrorMessage(pod, g, err.Error()))
	}
}
