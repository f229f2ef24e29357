package vknode

import (
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/cache"
)

// PodResourcesUpdates hands the API's new pod to update (the provider's
// UpdatePod, as virtual-kubelet would) when its pod-level resources
// (spec.resources) changed: the resize subresource changes them, and
// virtual-kubelet's pod controller hands the provider only the spec
// fields its podsEqual compares (containers, init and ephemeral
// containers, activeDeadlineSeconds, tolerations, labels, annotations),
// so without this a pod-level in-place resize (the kubelet's
// InPlacePodLevelResourcesVerticalScaling) would reach the engine only
// with the pod's next change of one of those, and the pod's
// observedGeneration would stay behind. A pod being deleted is left to
// virtual-kubelet's deletion path. It decides nothing about the resize:
// the engine does (lifecycle/allocation).
func PodResourcesUpdates(update func(pod *v1.Pod)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*v1.Pod)
			cur, ok2 := newObj.(*v1.Pod)
			if ok1 && ok2 && podResourcesChanged(old, cur) {
				update(cur)
			}
		},
	}
}

// podResourcesChanged reports whether cur, the same pod as old and not
// being deleted, has other pod-level resources.
func podResourcesChanged(old, cur *v1.Pod) bool {
	return old.UID == cur.UID && cur.DeletionTimestamp == nil &&
		!apiequality.Semantic.DeepEqual(old.Spec.Resources, cur.Spec.Resources)
}
