package lifecycle

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podManager is the desired-pod store, the kubelet's pod manager: every pod
// handed to the engine (a copy) until its API object was deleted after
// termination, the pods admission refused and when each pod was first seen
// (for the start duration). It has its own lock and does no I/O; the
// engine, the syncer and admission read it.
type podManager struct {
	mu sync.Mutex
	// pods is the desired set; rejected the pods admission refused, never
	// given to the workers; firstSeen when each pod was first given to the
	// engine, until it runs. All guarded by mu.
	pods      map[types.UID]*v1.Pod
	rejected  map[types.UID]*v1.Pod
	firstSeen map[types.UID]time.Time
}

func newPodManager() *podManager {
	return &podManager{
		pods:      map[types.UID]*v1.Pod{},
		rejected:  map[types.UID]*v1.Pod{},
		firstSeen: map[types.UID]time.Time{},
	}
}

// pod returns the desired pod uid, or nil.
func (m *podManager) pod(uid types.UID) *v1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pods[uid]
}

// known reports whether uid is desired and whether it was rejected.
func (m *podManager) known(uid types.UID) (desired, rejected bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, desired = m.pods[uid]
	_, rejected = m.rejected[uid]
	return desired, rejected
}

// add stores a copy of pod, first seen at now if it is new.
func (m *podManager) add(pod *v1.Pod, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.pods[pod.UID]; !ok {
		m.firstSeen[pod.UID] = now
	}
	m.pods[pod.UID] = pod.DeepCopy()
}

// replace stores a copy of pod if it is desired and reports whether it is.
func (m *podManager) replace(pod *v1.Pod) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.pods[pod.UID]; !ok {
		return false
	}
	m.pods[pod.UID] = pod.DeepCopy()
	return true
}

// put stores a copy of pod, known or not (a pod only the runtime has).
func (m *podManager) put(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pods[pod.UID] = pod.DeepCopy()
}

// list returns the desired pods (the stored copies: not to be changed).
func (m *podManager) list() []*v1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*v1.Pod, 0, len(m.pods))
	for _, p := range m.pods {
		out = append(out, p)
	}
	return out
}

// byName returns the newest pod, desired or rejected, under
// namespace/name, or nil.
func (m *podManager) byName(namespace, name string) *v1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	var best *v1.Pod
	for _, set := range []map[types.UID]*v1.Pod{m.pods, m.rejected} {
		for _, p := range set {
			if p.Namespace == namespace && p.Name == name && (best == nil || best.CreationTimestamp.Before(&p.CreationTimestamp)) {
				best = p
			}
		}
	}
	return best
}

// reject remembers pod as refused by admission.
func (m *podManager) reject(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rejected[pod.UID] = pod.DeepCopy()
}

// rejectedPod returns the rejected pod uid, or nil.
func (m *podManager) rejectedPod(uid types.UID) *v1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rejected[uid]
}

// forgetRejected drops a rejected pod whose API object is gone.
func (m *podManager) forgetRejected(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.rejected, uid)
}

// takeFirstSeen returns when uid was first seen, once.
func (m *podManager) takeFirstSeen(uid types.UID) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.firstSeen[uid]
	delete(m.firstSeen, uid)
	return t, ok
}

// forget drops a pod whose API object is gone.
func (m *podManager) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pods, uid)
	delete(m.firstSeen, uid)
}
