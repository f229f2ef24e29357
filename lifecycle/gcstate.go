package lifecycle

import (
	"github.com/crivk/crivk/cri"
	"k8s.io/apimachinery/pkg/types"
)

// The container garbage collector's view of the pods (cri.PodState): the
// kubelet's podStateProvider (its pod workers' ShouldPodContentBeRemoved
// and ShouldPodRuntimeBeRemoved) and its sourcesReady. A pod the workers
// do not know counts as gone only if the API does not have it either: the
// pod informer may hold a pod virtual-kubelet has not handed to the
// engine yet.

var _ cri.PodState = (*Engine)(nil)

// SourcesReady reports whether the API's pods of the node have been listed
// once (the pod informer synced); never without Config.APIPods.
func (e *Engine) SourcesReady() bool {
	return e.cfg.APIPods != nil && (e.cfg.APIPodsSynced == nil || e.cfg.APIPodsSynced())
}

// ShouldPodContentBeRemoved reports whether everything left of pod uid
// (dead containers, sandboxes, logs) may go: its worker terminated it and
// it was deleted, or nobody knows it.
func (e *Engine) ShouldPodContentBeRemoved(uid types.UID) bool {
	if e.workers.IsKnown(uid) {
		return e.workers.shouldPodContentBeRemoved(uid)
	}
	return !e.desiredOrInAPI(uid)
}

// ShouldPodRuntimeBeRemoved reports whether pod uid's runtime objects may
// go: its worker terminated it (it may not be deleted yet), or nobody
// knows it.
func (e *Engine) ShouldPodRuntimeBeRemoved(uid types.UID) bool {
	if e.workers.IsKnown(uid) {
		return e.workers.shouldPodRuntimeBeRemoved(uid)
	}
	return !e.desiredOrInAPI(uid)
}

// desiredOrInAPI reports whether the pod manager or the API has pod uid;
// true when the API's pods cannot be listed.
func (e *Engine) desiredOrInAPI(uid types.UID) bool {
	if e.pods.pod(uid) != nil {
		return true
	}
	if e.cfg.APIPods == nil {
		return true
	}
	pods, err := e.cfg.APIPods()
	if err != nil {
		return true
	}
	for _, p := range pods {
		if p.UID == uid {
			return true
		}
	}
	return false
}
