package lifecycle

import (
	"context"
	"fmt"
	"sync"

	"github.com/crivk/crivk/lifecycle/admission"
	"github.com/crivk/crivk/podutil"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// admitNew decides whether a pod the engine sees for the first time may
// run (package admission), as the kubelet's HandlePodAdditions: pods that
// are terminal or being deleted are not checked; the others are checked
// against the pods still holding resources (terminating ones included,
// finished ones not). Decisions are serialised (admitMu), so two pods
// created at once cannot both take the last of a resource. It returns
// false for a rejected pod, which is then published Failed and never given
// to the pod workers.
func (e *Engine) admitNew(ctx context.Context, pod *v1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return true
	}
	// Admission counts what was allocated (lifecycle/allocation), not what
	// the specs ask: after a restart, a resize still pending is not taken
	// for granted, for this pod or the others (the kubelet's AddPod).
	alloc := pod
	if e.alloc != nil {
		alloc, _ = e.alloc.Allocated(pod)
	}
	r := e.admit(ctx, alloc, e.allocatedPods(e.activePods(pod.UID)), true)
	if r.Admit {
		if e.alloc != nil {
			if err := e.alloc.Allocate(alloc); err != nil {
				log.L.WithError(err).WithField("pod", pod.Namespace+"/"+pod.Name).Error("recording the pod's allocation")
			}
		}
		return true
	}
	e.reject(pod, r)
	return false
}

// admit is the admission chain, in the kubelet's order: node pressure
// (evict.go), the sysctl allowlist, the allocation of devices (the
// kubelet's topology manager admission: Devices.Allocate), the predicates
// against active (the other pods holding resources, with their
// allocations), the host-wide checks of a node of many (Config.Host), then
// AppArmor (a pod asking for a profile the host cannot enforce never
// starts). With preempt, a critical pod the predicates refuse for lack of
// resources is admitted after lower-priority pods are evicted
// (preempt.go); a resize is checked by it too, without (admit_resize.go).
func (e *Engine) admit(ctx context.Context, pod *v1.Pod, active []*v1.Pod, preempt bool) admission.Result {
	r := e.admitPressure(pod)
	if r.Admit {
		r = e.cfg.Sysctls.Admit(pod)
	}
	if r.Admit && e.cfg.Devices != nil {
		if err := e.cfg.Devices.Allocate(ctx, pod, e.deviceHolders(active)); err != nil {
			r = admission.Result{Reason: reasonUnexpectedAdmission, Message: fmt.Sprintf("Allocate failed due to %v, which is unexpected", err)}
		}
	}
	if r.Admit && e.cfg.Node != nil {
		if node := e.cfg.Node(); node != nil {
			node = e.withDevicesInUse(pod, node)
			r = admission.Admit(pod, node, active)
			if !r.Admit && preempt {
				r = e.admitCritical(ctx, pod, node, active, r)
			}
		}
	}
	if r.Admit && e.cfg.Host != nil {
		r = e.cfg.Host.Admit(pod)
	}
	if r.Admit {
		aa := e.cfg.AppArmor
		if aa == nil {
			aa = admission.HostAppArmor()
		}
		r = aa.Admit(pod)
	}
	return r
}

// reasonUnexpectedAdmission is the kubelet's reason for a pod whose
// devices could not be allocated (cm/admission).
const reasonUnexpectedAdmission = "UnexpectedAdmissionError"

// deviceHolders are the pods whose devices Devices.Allocate must keep:
// active, and the API's pods of the node that have not finished. After a
// restart the engine is given the API's pods one by one, and the devices
// of the running pods it has not been given yet (restored from the device
// manager's checkpoint) must not be freed by the first admission (the
// kubelet waits for its sources to be ready).
func (e *Engine) deviceHolders(active []*v1.Pod) []*v1.Pod {
	if e.cfg.APIPods == nil {
		return active
	}
	pods, err := e.cfg.APIPods()
	if err != nil {
		return active
	}
	seen := make(map[types.UID]bool, len(active))
	for _, p := range active {
		seen[p.UID] = true
	}
	out := append([]*v1.Pod{}, active...)
	for _, p := range pods {
		if !seen[p.UID] && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed {
			out = append(out, p)
		}
	}
	return out
}

// withDevicesInUse is node with its allocatable raised to the devices in
// use when pod has devices (the kubelet's sanitizeNodeAllocatable): the
// node status may not show a plugin's devices yet when its first pod
// arrives.
func (e *Engine) withDevicesInUse(pod *v1.Pod, node *v1.Node) *v1.Node {
	if e.cfg.Devices == nil {
		return node
	}
	var out *v1.Node
	for name, n := range e.cfg.Devices.InUse(pod) {
		if q, ok := node.Status.Allocatable[name]; ok && q.Cmp(n) >= 0 {
			continue
		}
		if out == nil {
			out = node.DeepCopy()
			if out.Status.Allocatable == nil {
				out.Status.Allocatable = v1.ResourceList{}
			}
		}
		out.Status.Allocatable[name] = n
	}
	if out == nil {
		return node
	}
	return out
}

// allocatedPods are pods with the resources allocated to them.
func (e *Engine) allocatedPods(pods []*v1.Pod) []*v1.Pod {
	if e.alloc == nil {
		return pods
	}
	out := make([]*v1.Pod, len(pods))
	for i, p := range pods {
		out[i], _ = e.alloc.Allocated(p)
	}
	return out
}

// activePods are the pods that hold resources on the node: every pod the
// engine was given whose worker has not finished it, but uid.
func (e *Engine) activePods(uid types.UID) []*v1.Pod {
	var active []*v1.Pod
	for _, p := range e.pods.list() {
		if p.UID != uid && !e.workers.IsPodKnownTerminated(p.UID) {
			active = append(active, p)
		}
	}
	return active
}

// reject records the kubelet's Warning event and publishes the pod Failed
// with the reason and "Pod was rejected: <message>" (the kubelet's
// rejectPod). The pod is remembered as rejected: later updates do not
// start it, and its deletion removes the API object at once (nothing of it
// ever reached the runtime).
func (e *Engine) reject(pod *v1.Pod, r admission.Result) {
	log.L.WithField("pod", pod.Namespace+"/"+pod.Name).WithField("uid", pod.UID).
		WithField("reason", r.Reason).WithField("message", r.Message).Warn("pod rejected by admission")
	if e.cfg.Recorder != nil {
		e.cfg.Recorder.Event(pod, v1.EventTypeWarning, r.Reason, r.Message)
	}
	e.pods.reject(pod)
	e.status.SetPodStatus(pod, v1.PodStatus{
		QOSClass: podutil.QOSClass(pod),
		Phase:    v1.PodFailed,
		Reason:   r.Reason,
		Message:  "Pod was rejected: " + r.Message,
	})
}

// deleteRejected removes a rejected pod's API object (through
// OnTerminated) once it is deleted: it never ran, so nothing needs to stop.
func (e *Engine) deleteRejected(ctx context.Context, pod *v1.Pod) {
	pod = e.markDeleted(pod)
	if err := e.cfg.OnTerminated(ctx, pod); err != nil {
		log.G(ctx).WithError(err).WithField("pod", pod.Namespace+"/"+pod.Name).Warn("deleting a rejected pod")
		return
	}
	e.pods.forgetRejected(pod.UID)
}

// HostAdmitter is the admission of what the nodes of one process share on
// one machine (internal/fleet.HostPorts). Lock and Unlock serialise every
// node's admission decisions with the admitted pod's insertion; Admit is
// called with the lock held, after the node's own predicates.
type HostAdmitter interface {
	sync.Locker
	Admit(pod *v1.Pod) admission.Result
}

// HoldingPods are the pods that hold resources on the node as admission
// counts them: admitted (or found in the runtime) and not yet known
// terminated by their workers, terminating ones included (unlike
// ActivePods, the eviction manager's). The other nodes' host-wide
// admission reads them (Config.Host); the stored copies are not to be
// changed.
func (e *Engine) HoldingPods() []*v1.Pod { return e.activePods("") }
