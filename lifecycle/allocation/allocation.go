package allocation

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/crivk/crivk/internal/atomicfile"
	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// CheckpointFile is the kubelet's name of its allocation checkpoint, kept
// under crivk's root directory.
const CheckpointFile = "allocated_pods_state"

// Config configures a Manager.
type Config struct {
	// Path is the checkpoint file; empty: allocations are kept in memory
	// only (tests).
	Path string
	// Clock stamps the conditions; nil is the real clock.
	Clock clock.PassiveClock
}

// PodAllocation is what one pod was allocated: each container's and
// sidecar's resources by name, and the pod-level resources.
type PodAllocation struct {
	Pod        *v1.ResourceRequirements           `json:"pod,omitempty"`
	Containers map[string]v1.ResourceRequirements `json:"containers"`
}

// Manager keeps the allocations and the resize conditions of the node's
// pods. It is safe for concurrent use.
type Manager struct {
	path  string
	clock clock.PassiveClock

	mu sync.Mutex
	// allocated and conds are per pod UID; backfilled records the pods
	// whose API conditions were taken back once. Guarded by mu.
	allocated  map[types.UID]PodAllocation
	conds      map[types.UID]*resizeConditions
	backfilled map[types.UID]bool
	// decide serialises resize decisions (the kubelet's allocationMutex).
	decide sync.Mutex
	// retry carries RequestRetry's trigger to the retry loop (retry.go);
	// one pending request is enough.
	retry chan string
	// requested counts the triggers RequestRetry handed to the loop, and
	// handled those the loop finished (RetryHandled); equal, no retry
	// is in flight (RetriesIdle).
	requested, handled atomic.Int64
}

type resizeConditions struct {
	pending, inProgress *v1.PodCondition
	// decided tells that pending was set by SetPending in this process,
	// not taken back from the API (Backfill).
	decided bool
}

// New returns a Manager with the allocations of cfg.Path, if it exists.
func New(cfg Config) (*Manager, error) {
	m := &Manager{path: cfg.Path, clock: cfg.Clock, allocated: map[types.UID]PodAllocation{},
		conds: map[types.UID]*resizeConditions{}, backfilled: map[types.UID]bool{}, retry: make(chan string, 1)}
	if m.clock == nil {
		m.clock = clock.RealClock{}
	}
	if m.path == "" {
		return m, nil
	}
	b, err := os.ReadFile(m.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return m, nil
	case err != nil:
		return nil, fmt.Errorf("reading the allocation checkpoint: %w", err)
	}
	if m.allocated, err = unmarshalCheckpoint(m.path, b); err != nil {
		return nil, err
	}
	return m, nil
}

// allocationOf is what pod's spec asks for: the kubelet's
// ResourceInfoForPod (its pod-level resources, regular containers and
// sidecars; plain init containers are not resized by crivk).
func allocationOf(pod *v1.Pod) PodAllocation {
	a := PodAllocation{Containers: map[string]v1.ResourceRequirements{}}
	if pod.Spec.Resources != nil {
		a.Pod = pod.Spec.Resources.DeepCopy()
	}
	for _, c := range pod.Spec.Containers {
		a.Containers[c.Name] = *c.Resources.DeepCopy()
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; podutil.IsSidecar(c) {
			a.Containers[c.Name] = *c.Resources.DeepCopy()
		}
	}
	return a
}

// Allocated returns pod with the resources allocated to it, its
// containers' and its pod-level ones (a copy, when they differ from its
// spec: the spec asks for a resize), and whether the pod has an
// allocation (the kubelet's UpdatePodFromAllocation, with
// InPlacePodLevelResourcesVerticalScaling on: a pod-level allocation that
// differs from spec.resources replaces it, nil included).
func (m *Manager) Allocated(pod *v1.Pod) (*v1.Pod, bool) {
	if pod == nil {
		return nil, false
	}
	m.mu.Lock()
	a, ok := m.allocated[pod.UID]
	m.mu.Unlock()
	if !ok {
		return pod, false
	}
	return withAllocation(pod, a), true
}

func withAllocation(pod *v1.Pod, a PodAllocation) *v1.Pod {
	out := pod
	if !apiequality.Semantic.DeepEqual(pod.Spec.Resources, a.Pod) {
		out = pod.DeepCopy()
		out.Spec.Resources = a.Pod.DeepCopy()
	}
	set := func(list func(*v1.Pod) []v1.Container) {
		for i, c := range list(out) {
			r, ok := a.Containers[c.Name]
			if !ok || apiequality.Semantic.DeepEqual(c.Resources, r) {
				continue
			}
			if out == pod {
				out = pod.DeepCopy()
			}
			list(out)[i].Resources = *r.DeepCopy()
		}
	}
	set(func(p *v1.Pod) []v1.Container { return p.Spec.Containers })
	set(func(p *v1.Pod) []v1.Container { return p.Spec.InitContainers })
	return out
}

// Allocate records pod's resources as allocated (admitted, or a resize
// accepted) and writes the checkpoint.
func (m *Manager) Allocate(pod *v1.Pod) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.allocated[pod.UID] = allocationOf(pod)
	return m.checkpointLocked()
}

// Remove forgets everything of a pod whose API object is gone, and asks
// for the deferred resizes to be retried (TriggerPodsRemoved), as the
// kubelet's HandlePodRemoves.
func (m *Manager) Remove(uid types.UID) error {
	err := m.remove(uid)
	if m.hasDeferred() {
		m.RequestRetry(TriggerPodsRemoved)
	}
	return err
}

func (m *Manager) remove(uid types.UID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.conds, uid)
	delete(m.backfilled, uid)
	if _, ok := m.allocated[uid]; !ok {
		return nil
	}
	delete(m.allocated, uid)
	return m.checkpointLocked()
}

// checkpointLocked writes every allocation to the checkpoint file, whole,
// through a synced temporary file renamed into place (internal/atomicfile).
func (m *Manager) checkpointLocked() error {
	if m.path == "" {
		return nil
	}
	b, err := marshalCheckpoint(m.allocated)
	if err != nil {
		return fmt.Errorf("encoding the allocation checkpoint: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(m.path), 0o755); err != nil {
		return fmt.Errorf("writing the allocation checkpoint: %w", err)
	}
	if err := atomicfile.Write(m.path, b); err != nil {
		return fmt.Errorf("writing the allocation checkpoint: %w", err)
	}
	return nil
}

// Conditions returns the pod's PodResizePending and PodResizeInProgress
// conditions, those set.
func (m *Manager) Conditions(uid types.UID) []v1.PodCondition {
	m.mu.Lock()
	defer m.mu.Unlock()
	rc := m.conds[uid]
	if rc == nil {
		return nil
	}
	var out []v1.PodCondition
	for _, c := range []*v1.PodCondition{rc.pending, rc.inProgress} {
		if c != nil {
			out = append(out, *c.DeepCopy())
		}
	}
	return out
}

// Backfill takes the pod's resize conditions from its API status the
// first time the pod is seen (after a restart they are the last ones
// published).
func (m *Manager) Backfill(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.backfilled[pod.UID] {
		return
	}
	m.backfilled[pod.UID] = true
	for _, c := range pod.Status.Conditions {
		switch c.Type {
		case v1.PodResizePending:
			m.condsLocked(pod.UID).pending = m.updated(c.Type, nil, c.Reason, c.Message, c.ObservedGeneration)
		case v1.PodResizeInProgress:
			m.condsLocked(pod.UID).inProgress = m.updated(c.Type, nil, c.Reason, c.Message, c.ObservedGeneration)
		}
	}
}

func (m *Manager) condsLocked(uid types.UID) *resizeConditions {
	rc := m.conds[uid]
	if rc == nil {
		rc = &resizeConditions{}
		m.conds[uid] = rc
	}
	return rc
}

// updated is the kubelet's updatedPodResizeCondition: probed now, its
// transition time kept while the reason stays.
func (m *Manager) updated(t v1.PodConditionType, old *v1.PodCondition, reason, message string, generation int64) *v1.PodCondition {
	now := metav1.NewTime(m.clock.Now())
	transition := now
	if old != nil && old.Reason == reason {
		transition = old.LastTransitionTime
	}
	return &v1.PodCondition{Type: t, Status: v1.ConditionTrue, LastProbeTime: now, LastTransitionTime: transition,
		ObservedGeneration: generation, Reason: reason, Message: message}
}

// SetPending sets the PodResizePending condition and reports whether its
// reason or generation changed (or it is new).
func (m *Manager) SetPending(uid types.UID, reason, message string, generation int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	rc := m.condsLocked(uid)
	prev := rc.pending
	rc.pending = m.updated(v1.PodResizePending, prev, reason, message, generation)
	rc.decided = true
	return prev == nil || prev.Reason != reason || prev.ObservedGeneration != generation
}

// ClearPending clears the PodResizePending condition.
func (m *Manager) ClearPending(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rc := m.conds[uid]; rc != nil {
		rc.pending = nil
	}
}

// SetInProgress sets the PodResizeInProgress condition, as the kubelet's
// SetPodResizeInProgressCondition: an existing condition keeps its
// generation, and its reason and message unless new ones are given. It
// returns the condition's generation and whether it changed.
func (m *Manager) SetInProgress(uid types.UID, reason, message string, generation int64) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rc := m.condsLocked(uid)
	prev := rc.inProgress
	if prev != nil {
		if reason == "" && message == "" {
			reason, message = prev.Reason, prev.Message
		}
		generation = prev.ObservedGeneration
	}
	rc.inProgress = m.updated(v1.PodResizeInProgress, prev, reason, message, generation)
	changed := prev == nil || prev.Reason != reason || prev.Message != message || prev.LastTransitionTime != rc.inProgress.LastTransitionTime
	return generation, changed
}

// ClearInProgress clears the PodResizeInProgress condition; it returns
// the generation of the condition cleared and whether there was one.
func (m *Manager) ClearInProgress(uid types.UID) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rc := m.conds[uid]
	if rc == nil || rc.inProgress == nil {
		return 0, false
	}
	g := rc.inProgress.ObservedGeneration
	rc.inProgress = nil
	return g, true
}

// pendingReason is the PodResizePending condition's reason, if set.
func (m *Manager) pendingReason(uid types.UID) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rc := m.conds[uid]; rc != nil && rc.pending != nil {
		return rc.pending.Reason
	}
	return ""
}
