package status

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func condition(t v1.PodConditionType, ok bool, reason, msg string) v1.PodCondition {
	st := v1.ConditionFalse
	if ok {
		st = v1.ConditionTrue
	}
	return v1.PodCondition{Type: t, Status: st, Reason: reason, Message: msg}
}

// ownedConditions are the conditions the node writes; all others (such as
// PodScheduled, DisruptionTarget, readiness gates) are kept as found.
var ownedConditions = map[v1.PodConditionType]bool{
	v1.PodReadyToStartContainers: true,
	v1.PodInitialized:            true,
	v1.ContainersReady:           true,
	v1.PodReady:                  true,
	// The in-place resize's (package allocation): gone from the status
	// once cleared.
	v1.PodResizePending:    true,
	v1.PodResizeInProgress: true,
	// A pod with a RestartAllContainers rule's (restartall.go).
	v1.AllContainersRestarting: true,
}

// mergeConditions returns the node's freshly generated conditions (owned)
// with their transition times kept where the status did not change, and
// the conditions crivk does not own as prev has them, in the kubelet's
// order.
func mergeConditions(prev, owned []v1.PodCondition, now metav1.Time) []v1.PodCondition {
	out := WithForeignConditions(prev, withTransitionTimes(prev, owned, now))
	order := map[v1.PodConditionType]int{v1.PodReadyToStartContainers: 0, v1.PodInitialized: 1, v1.PodReady: 2, v1.ContainersReady: 3, v1.PodScheduled: 4, v1.AllContainersRestarting: 5}
	sort.SliceStable(out, func(i, j int) bool {
		oi, ok1 := order[out[i].Type]
		oj, ok2 := order[out[j].Type]
		if !ok1 {
			oi = 10
		}
		if !ok2 {
			oj = 10
		}
		return oi < oj
	})
	return out
}

// withTransitionTimes returns ours (the first of a duplicated type) with
// each condition's LastTransitionTime taken from old when its status did
// not change, and now when it changed and has none.
func withTransitionTimes(old, ours []v1.PodCondition, now metav1.Time) []v1.PodCondition {
	prev := map[v1.PodConditionType]v1.PodCondition{}
	for _, c := range old {
		prev[c.Type] = c
	}
	seen := map[v1.PodConditionType]bool{}
	out := make([]v1.PodCondition, 0, len(ours))
	for _, c := range ours {
		if seen[c.Type] {
			continue // a duplicate; the first one wins
		}
		seen[c.Type] = true
		switch p, ok := prev[c.Type]; {
		case (c.Type == v1.PodResizePending || c.Type == v1.PodResizeInProgress) && !c.LastTransitionTime.IsZero():
			// Stamped by package allocation: the transition of a resize
			// condition follows its reason, its status is always True.
		case ok && p.Status == c.Status && !p.LastTransitionTime.IsZero():
			c.LastTransitionTime = p.LastTransitionTime
		case c.LastTransitionTime.IsZero():
			c.LastTransitionTime = now
		}
		out = append(out, c)
	}
	return out
}

// WithForeignConditions returns ours with every condition the node does not
// own (PodScheduled, DisruptionTarget, readiness gates, ...) taken from the
// API's current conditions instead: other writers own those, and a status
// update must not roll them back.
//
// This is the kubelet status manager's merge (mergePodStatus): of ours, the
// node's own conditions are kept, and DisruptionTarget and PodScheduled,
// which the node shares with other writers (the scheduler sets
// PodScheduled, the kubelet too for pods bound without it), while the API
// has none; our others are dropped.
func WithForeignConditions(api, ours []v1.PodCondition) []v1.PodCondition {
	fromAPI := map[v1.PodConditionType]v1.PodCondition{}
	for _, c := range api {
		if !ownedConditions[c.Type] {
			fromAPI[c.Type] = c
		}
	}
	// Ours in their order, each foreign one replaced by the API's; then
	// the API's other foreign conditions in the API's order.
	var out []v1.PodCondition
	used := map[v1.PodConditionType]bool{}
	for _, c := range ours {
		a, inAPI := fromAPI[c.Type]
		switch {
		case ownedConditions[c.Type]:
			out = append(out, c)
		case inAPI && !used[c.Type]:
			out = append(out, *a.DeepCopy())
			used[c.Type] = true
		case !inAPI && (c.Type == v1.DisruptionTarget || c.Type == v1.PodScheduled):
			out = append(out, c)
		}
	}
	for _, c := range api {
		if !ownedConditions[c.Type] && !used[c.Type] {
			out = append(out, *c.DeepCopy())
			used[c.Type] = true
		}
	}
	return out
}

// mergeStatusConditions returns the conditions to publish: the node's own
// from ours with their transition times (withTransitionTimes), the others
// from the API (WithForeignConditions, the one rule for other writers'
// conditions).
func mergeStatusConditions(api, old, ours []v1.PodCondition, now metav1.Time) []v1.PodCondition {
	out := WithForeignConditions(api, withTransitionTimes(old, ours, now))
	if len(out) == 0 {
		return nil
	}
	return out
}

// Reasons of the conditions of a pod in a terminal phase (the kubelet's):
// its Ready and ContainersReady are False with one of them, and a pod that
// succeeded says reasonPodCompleted in its Initialized too.
const (
	reasonPodCompleted = "PodCompleted"
	reasonPodFailed    = "PodFailed"
)

// terminalReason is the rule that a pod in a terminal phase is never
// ready: it returns the reason its Ready and ContainersReady conditions
// are False with, and false for a phase that is not terminal. Generate
// writes those conditions by it; the manager's notReadyWhenTerminal holds
// every status it caches to it.
func terminalReason(phase v1.PodPhase) (reason string, terminal bool) {
	switch phase {
	case v1.PodSucceeded:
		return reasonPodCompleted, true
	case v1.PodFailed:
		return reasonPodFailed, true
	}
	return "", false
}

// notReadyWhenTerminal turns a True Ready or ContainersReady condition of a
// terminal pod False, as the kubelet's mergePodStatus does: a pod must
// never be reported terminal and ready at once.
func notReadyWhenTerminal(status *v1.PodStatus) {
	reason, terminal := terminalReason(status.Phase)
	if !terminal {
		return
	}
	for i := range status.Conditions {
		c := &status.Conditions[i]
		if (c.Type == v1.PodReady || c.Type == v1.ContainersReady) && c.Status == v1.ConditionTrue {
			*c = v1.PodCondition{Type: c.Type, Status: v1.ConditionFalse, Reason: reason, ObservedGeneration: c.ObservedGeneration}
		}
	}
}
