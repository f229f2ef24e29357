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

// StatusReconciles hands the API's newest copy of a pod to reconcile when
// another writer changed the status of one of its conditions (the node
// lifecycle controller's MarkPodsNotReady while the node was not Ready),
// with periodic false, and at every periodic resync of the informer (old
// and cur of the same resourceVersion), with periodic true: virtual-kubelet
// writes a status only when the provider's changes, so without this a
// condition overwritten in the API would stay until the pod's status
// changed again, where the kubelet's status manager writes its own back
// (needsReconcile, every 10 s). The resync stands for that timer, at the
// informer's period (crivk: a minute, NewPodInformer): it catches what no
// update brings again, such as a write virtual-kubelet gave up on.
// reconcile decides (lifecycle/status Manager.Reconcile); this only spares
// it the updates that touched no condition.
func StatusReconciles(reconcile func(pod *v1.Pod, periodic bool)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*v1.Pod)
			cur, ok2 := newObj.(*v1.Pod)
			switch {
			case !ok1 || !ok2:
			case old.ResourceVersion == cur.ResourceVersion:
				reconcile(cur, true) // a resync
			case conditionsChanged(old, cur):
				reconcile(cur, false)
			}
		},
	}
}

// conditionsChanged reports whether a condition of cur is new or has
// another status than in old.
func conditionsChanged(old, cur *v1.Pod) bool {
	for _, c := range cur.Status.Conditions {
		found := false
		for _, o := range old.Status.Conditions {
			if o.Type == c.Type {
				found = true
				if o.Status != c.Status {
					return true
				}
			}
		}
		if !found {
			return true
		}
	}
	return false
}
