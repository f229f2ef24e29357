package vknode

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// ReadinessGateKicks syncs a pod at once when another writer changes one
// of its readiness gates' conditions: virtual-kubelet hands the provider
// spec changes only, so without this a gate turning True would be seen at
// the pod's next resync (up to --sync-interval later), where the kubelet
// sees it at once through its pod manager.
func ReadinessGateKicks(kick func(types.UID)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*v1.Pod)
			cur, ok2 := newObj.(*v1.Pod)
			if ok1 && ok2 && gatesChanged(old, cur) {
				kick(cur.UID)
			}
		},
	}
}

// gatesChanged reports whether a readiness gate's condition changed
// status between old and cur.
func gatesChanged(old, cur *v1.Pod) bool {
	status := func(p *v1.Pod, t v1.PodConditionType) v1.ConditionStatus {
		for _, c := range p.Status.Conditions {
			if c.Type == t {
				return c.Status
			}
		}
		return ""
	}
	for _, g := range cur.Spec.ReadinessGates {
		if status(old, g.ConditionType) != status(cur, g.ConditionType) {
			return true
		}
	}
	return false
}
