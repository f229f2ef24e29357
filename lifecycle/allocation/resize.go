package allocation

import (
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The kubelet's resize event reasons (pkg/kubelet/events).
const (
	EventResizeDeferred   = "ResizeDeferred"
	EventResizeInfeasible = "ResizeInfeasible"
	EventResizeCompleted  = "ResizeCompleted"
	EventResizeStarted    = "ResizeStarted"
	EventResizeError      = "ResizeError"
)

// EventRecorder receives the resize events (client-go's
// record.EventRecorder is one).
type EventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// Admitter is admission's verdict on pod beside others, the pods that
// hold resources on the node with their allocations (the engine's
// admission chain, as the kubelet's canAdmitPod).
type Admitter func(pod *v1.Pod, others []*v1.Pod) (ok bool, reason, message string)

// Decision is what becomes of a resize: allocated, or pending with the
// PodResizePending condition's reason and message.
type Decision struct {
	Allocate        bool
	Reason, Message string
}

// Decide is the kubelet v1.37's verdict on pod's resize (its spec asks
// for resources other than those allocated to it, pod-level ones
// included): the admission chain (its canAdmitPod with the resize
// operation) beside others, the pods holding resources on the node with
// their allocations. A refusal is Deferred with admission's message: the
// kubelet's status manager makes every pending reason but Infeasible
// Deferred, and none of its resize admission handler's Infeasible cases
// applies to crivk (in-place resize and pod-level resize are on, no
// container may swap, no CPU or memory manager pins resources, memory-
// backed volumes are not resized). Since v1.36 the kubelet no longer
// finds a resize beyond the node's allocatable Infeasible, nor a static
// pod's (#136043: the API server refuses the first). It is pure.
func Decide(pod *v1.Pod, others []*v1.Pod, admit Admitter) Decision {
	if admit != nil {
		var rest []*v1.Pod
		for _, p := range others {
			if p.UID != pod.UID {
				rest = append(rest, p)
			}
		}
		if ok, _, msg := admit(pod, rest); !ok {
			return Decision{Reason: v1.PodReasonDeferred, Message: msg}
		}
	}
	return Decision{Allocate: true}
}

// HandleResize decides a resize of pod (its spec as the API has it, its
// containers' and its pod-level resources), the kubelet's
// handlePodResourcesResize, and returns the pod to run: with the
// resources allocated to it, which are the spec's once the resize is
// allocated. active lists the other pods holding resources on the node
// as the engine has them (called only when there is a resize to decide);
// HandleResize counts their allocations. Decisions are serialised. A pod
// without an allocation yet is allocated its spec.
func (m *Manager) HandleResize(pod *v1.Pod, active func() []*v1.Pod, admit Admitter, rec EventRecorder) (*v1.Pod, error) {
	m.decide.Lock()
	defer m.decide.Unlock()
	allocated, ok := m.Allocated(pod)
	if !ok {
		return pod, m.Allocate(pod)
	}
	if allocated == pod {
		// The spec is the allocation: nothing pending (a resize reverted).
		m.ClearPending(pod.UID)
		return pod, nil
	}
	var others []*v1.Pod
	for _, p := range active() {
		a, _ := m.Allocated(p)
		others = append(others, a)
	}
	d := Decide(pod, others, admit)
	if d.Allocate {
		if err := m.Allocate(pod); err != nil {
			return allocated, fmt.Errorf("allocating the resize of pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		m.ClearPending(pod.UID)
		// A new generation of the resize: a previous error goes.
		m.ClearInProgress(pod.UID)
		m.SetInProgress(pod.UID, "", "", pod.Generation)
		if rec != nil {
			rec.Eventf(pod, v1.EventTypeNormal, EventResizeStarted, "%s", StartedMessage(pod, pod.Generation))
		}
		return pod, nil
	}
	if m.SetPending(pod.UID, d.Reason, d.Message, pod.Generation) && rec != nil {
		reason := EventResizeDeferred
		if d.Reason == v1.PodReasonInfeasible {
			reason = EventResizeInfeasible
		}
		rec.Eventf(pod, v1.EventTypeWarning, reason, "%s", PendingMessage(pod, d.Reason, d.Message, pod.Generation))
	}
	return allocated, nil
}

// The kubelet's resize event messages (pkg/kubelet/events/resize.go): a
// prefix and the JSON summary of the pod's resources.

// StartedMessage is ResizeStarted's message; pod is the allocated pod.
func StartedMessage(pod *v1.Pod, generation int64) string {
	return resizeMessage(pod, generation, "", "Pod resize started")
}

// CompletedMessage is ResizeCompleted's message.
func CompletedMessage(pod *v1.Pod, generation int64) string {
	return resizeMessage(pod, generation, "", "Pod resize completed")
}

// ErrorMessage is ResizeError's message.
func ErrorMessage(pod *v1.Pod, generation int64, errMsg string) string {
	return resizeMessage(pod, generation, errMsg, "Pod resize error")
}

// PendingMessage is ResizeDeferred's and ResizeInfeasible's message.
func PendingMessage(pod *v1.Pod, reason, message string, generation int64) string {
	return resizeMessage(pod, generation, message, "Pod resize "+reason)
}

type containerAllocation struct {
	Name      string                  `json:"name"`
	Resources v1.ResourceRequirements `json:"resources,omitempty"`
}

type resourceSummary struct {
	InitContainers []containerAllocation `json:"initContainers,omitempty"`
	Containers     []containerAllocation `json:"containers,omitempty"`
	Generation     int64                 `json:"generation"`
	Error          string                `json:"error,omitempty"`
}

func resizeMessage(pod *v1.Pod, generation int64, errMsg, prefix string) string {
	s := resourceSummary{Generation: generation, Error: errMsg}
	for _, c := range pod.Spec.InitContainers {
		s.InitContainers = append(s.InitContainers, containerAllocation{Name: c.Name, Resources: c.Resources})
	}
	for _, c := range pod.Spec.Containers {
		s.Containers = append(s.Containers, containerAllocation{Name: c.Name, Resources: c.Resources})
	}
	b, err := json.Marshal(s)
	if err != nil {
		return prefix
	}
	return prefix + ": " + string(b)
}
