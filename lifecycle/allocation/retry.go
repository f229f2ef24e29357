package allocation

import (
	"cmp"
	"slices"

	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Retrying deferred resizes, the kubelet's RetryPendingResizes: a resize
// admission deferred (PodResizePending Deferred) is decided again, for
// every such pod at once and in SortPending's order, when something may
// have freed resources or changed the queue. The kubelet's triggers, each
// named as in its metric:
//
//	pods_removed     a pod's API object is gone (Remove)
//	pod_updated      a pod's spec asks for a new resize (its own decision
//	                 comes with its sync; the others are retried)
//	pod_resized      a resize finished (the kubelet sees the actuated
//	                 requests shrink in the status echoed back)
//	periodic_retry   30 s after start, then 3 min after every retry
//
// The caller (the engine) runs the loop: it receives RetryRequests, keeps
// the periodic timer and decides each of Deferred's pods again.

// The kubelet's trigger names and retry delays (pkg/kubelet/allocation).
const (
	TriggerPodsRemoved = "pods_removed"
	TriggerPodUpdated  = "pod_updated"
	TriggerPodResized  = "pod_resized"
	TriggerPeriodic    = "periodic_retry"
)

// RequestRetry asks for the deferred resizes to be decided again; it
// never blocks, and requests made before the loop takes one coalesce.
func (m *Manager) RequestRetry(trigger string) {
	// Counted before the send, so that the loop's RetryHandled can never
	// be seen ahead of it.
	m.requested.Add(1)
	select {
	case m.retry <- trigger:
	default:
		m.requested.Add(-1)
	}
}

// RetryHandled is the loop's word that it finished deciding again the
// resizes of one trigger it received from RetryRequests.
func (m *Manager) RetryHandled() { m.handled.Add(1) }

// RetriesIdle reports whether every trigger handed to the loop was
// handled: no retry is queued or running. Tests wait on it before they
// change what a retry would see.
func (m *Manager) RetriesIdle() bool { return m.handled.Load() == m.requested.Load() }

// RetryRequests delivers RequestRetry's triggers.
func (m *Manager) RetryRequests() <-chan string { return m.retry }

// Deferred lists the pods whose resize is pending with reason Deferred
// (the kubelet's podsWithPendingResizes: an Infeasible resize is retried
// only when the pod's spec changes).
func (m *Manager) Deferred() []types.UID {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []types.UID
	for uid, rc := range m.conds {
		if rc.pending != nil && rc.pending.Reason == v1.PodReasonDeferred {
			out = append(out, uid)
		}
	}
	return out
}

// hasDeferred reports whether any resize is Deferred.
func (m *Manager) hasDeferred() bool {
	return len(m.Deferred()) > 0
}

// SortPending orders pods with pending resizes as the kubelet's
// sortPendingResizes: resizes that ask for no more CPU or memory than
// allocated first, then higher priority, then Guaranteed before the other
// classes, then the longest pending (the PodResizePending condition's
// transition time). It sorts pods in place.
func (m *Manager) SortPending(pods []*v1.Pod) {
	type key struct {
		increasing bool
		priority   int32
		guaranteed bool
		since      int64 // Unix nanoseconds; max when not pending
		uid        types.UID
	}
	keys := map[types.UID]key{}
	for _, p := range pods {
		k := key{increasing: m.increasesRequests(p), guaranteed: podutil.QOSClass(p) == v1.PodQOSGuaranteed, since: 1<<63 - 1, uid: p.UID}
		if p.Spec.Priority != nil {
			k.priority = *p.Spec.Priority
		}
		for _, c := range m.Conditions(p.UID) {
			if c.Type == v1.PodResizePending {
				k.since = c.LastTransitionTime.UnixNano()
			}
		}
		keys[p.UID] = k
	}
	boolFirst := func(a, b bool) int { // true first
		switch {
		case a == b:
			return 0
		case a:
			return -1
		}
		return 1
	}
	slices.SortStableFunc(pods, func(a, b *v1.Pod) int {
		ka, kb := keys[a.UID], keys[b.UID]
		return cmp.Or(
			boolFirst(!ka.increasing, !kb.increasing),
			cmp.Compare(kb.priority, ka.priority),
			boolFirst(ka.guaranteed, kb.guaranteed),
			cmp.Compare(ka.since, kb.since),
		)
	})
}

// increasesRequests is the kubelet's isResizeIncreasingRequests: pod's
// spec asks for more CPU or memory (pod-level resources counted) than its
// allocation.
func (m *Manager) increasesRequests(pod *v1.Pod) bool {
	allocated, ok := m.Allocated(pod)
	if !ok || allocated == pod {
		return false
	}
	old := podutil.PodRequests(allocated)
	want := podutil.PodRequests(pod)
	return want.Memory().Cmp(*old.Memory()) > 0 || want.Cpu().Cmp(*old.Cpu()) > 0
}

// PendingGeneration is the generation of the pod's spec whose resize this
// process left pending (Deferred or Infeasible), 0 when there is none: a
// condition taken back from the API after a restart (Backfill) is not one,
// so the pod's first sync decides again, as the kubelet retries the
// pending resizes of the pods it is given at start (pods_added).
func (m *Manager) PendingGeneration(uid types.UID) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rc := m.conds[uid]; rc != nil && rc.pending != nil && rc.decided {
		return rc.pending.ObservedGeneration
	}
	return 0
}
