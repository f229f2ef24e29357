package vknode

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// DeletedPodKills hands the API's final copy of a pod deleted from the
// API to kill, with the deletion's grace period on it. virtual-kubelet
// hands the provider the pod from its lister; when the object is already
// gone from the lister by the time its worker looks (a delete with
// gracePeriodSeconds 0: the deletion's update and the removal arrive
// together), it hands the provider's own copy instead, which carries no
// deletion grace period, and the pod would get its spec's (30 s by
// default). The kubelet takes the grace period from the object its
// REMOVE carries (DeletionGracePeriodSeconds, then at least 2 s). kill is
// the engine's Kill: the pod workers keep the shortest grace period they
// were given, so the two deliveries in either order end the same.
func DeletedPodKills(kill func(*v1.Pod)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pod, ok := obj.(*v1.Pod); ok && pod.DeletionGracePeriodSeconds != nil {
				kill(pod)
			}
		},
	}
}
