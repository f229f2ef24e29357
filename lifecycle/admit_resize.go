package lifecycle

import (
	"github.com/crivk/crivk/lifecycle/allocation"
	v1 "k8s.io/api/core/v1"
)

// handleResize decides the in-place resize a running pod's spec may ask
// for (package allocation, the kubelet's handlePodResourcesResize) and
// returns the pod to sync: with the resources allocated to it. A resize is
// checked against the node's allocatable (else Infeasible) and by the
// admission chain beside the other pods holding resources, with their
// allocations (else Deferred: the next sync of the pod tries again).
// Decisions are serialised with the admission of new pods (admitMu), so a
// resize and a new pod cannot both take the last of a resource.
func (e *Engine) handleResize(pod *v1.Pod) (*v1.Pod, error) {
	if a, ok := e.alloc.Allocated(pod); ok && a == pod && len(e.alloc.Conditions(pod.UID)) == 0 {
		return pod, nil // the spec is the allocation, nothing pending
	}
	e.admitMu.Lock()
	defer e.admitMu.Unlock()
	allocatable := e.cfg.NodeAllocatable
	if e.cfg.Node != nil {
		if n := e.cfg.Node(); n != nil && n.Status.Allocatable != nil {
			allocatable = n.Status.Allocatable
		}
	}
	admit := func(p *v1.Pod, others []*v1.Pod) (bool, string, string) {
		r := e.admit(p, others)
		return r.Admit, r.Reason, r.Message
	}
	var rec allocation.EventRecorder
	if e.cfg.Recorder != nil {
		rec = e.cfg.Recorder
	}
	active := func() []*v1.Pod { return e.activePods(pod.UID) }
	return e.alloc.HandleResize(pod, active, allocatable, admit, rec)
}
