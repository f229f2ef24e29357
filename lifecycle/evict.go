package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/crivk/crivk/lifecycle/admission"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// What the eviction manager (package eviction) needs of the engine: the
// pods it may evict, the eviction itself and whether an evicted pod is
// cleaned up; and, the other way, its admission under node pressure
// (Config.Pressure).

// PodAdmitter refuses pods the node cannot take now (the eviction
// manager's admit handler under node pressure).
type PodAdmitter interface {
	Admit(pod *v1.Pod) admission.Result
}

// ReasonEvicted is the reason of an evicted pod's status and of its event,
// the kubelet's (pkg/kubelet/eviction Reason).
const ReasonEvicted = "Evicted"

// reasonExceededGracePeriod is the kubelet's event when a pod's containers
// are not stopped in time (events.ExceededGracePeriod).
const reasonExceededGracePeriod = "ExceededGracePeriod"

// ErrPodUnknown: Evict was asked for a pod the engine does not run.
var ErrPodUnknown = errors.New("the engine does not run this pod")

// Eviction is what Evict publishes of an evicted pod.
type Eviction struct {
	// Reason is the status's and the event's reason; empty: Evicted
	// (ReasonEvicted). The critical pod admission's is Preempting.
	Reason string
	// Message is the status's and the event's message.
	Message string
	// GracePeriod (seconds) overrides the pod's; at least 1 s is given.
	GracePeriod int64
	// PodGracePeriod: the pod's own grace period is used and GracePeriod
	// is ignored (the kubelet's preemption gives no override).
	PodGracePeriod bool
	// DisruptionTarget adds the DisruptionTarget condition (reason
	// TerminationByKubelet, ConditionMessage or else the message), as the
	// kubelet does for a node-pressure eviction (not for an
	// ephemeral-storage limit) and a preemption.
	DisruptionTarget bool
	ConditionMessage string
	// EventAnnotations go on the Evicted event (the kubelet's
	// offending_containers, starved_resource, ...).
	EventAnnotations map[string]string
}

// admitPressure is the first admission check, the kubelet's eviction
// admit handler (nil Config.Pressure: no pressure).
func (e *Engine) admitPressure(pod *v1.Pod) admission.Result {
	if e.cfg.Pressure == nil {
		return admission.Result{Admit: true}
	}
	return e.cfg.Pressure.Admit(pod)
}

// ActivePods returns the pods that may be holding resources, with their
// status: the engine runs them and their termination was not asked for
// (the kubelet's active pods, which its eviction manager ranks).
func (e *Engine) ActivePods() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range e.pods.list() {
		if p.DeletionTimestamp != nil || e.workers.IsPodTerminationRequested(p.UID) {
			continue
		}
		p = e.sync.withStatus(p)
		if isTerminalPhase(p.Status.Phase) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// Evict stops pod's containers with ev's grace period and then publishes
// its final status, as the kubelet's kill with a status function: phase
// Failed, ev's reason (Evicted) and message, the DisruptionTarget condition
// when asked; but a pod whose containers all exited 0 when stopped (pause,
// a shell that traps SIGTERM) ends Succeeded, without that reason and
// message, with the condition (SyncTerminatingPod says why). It records
// the kubelet's Warning event of that reason and message first. The status
// turns terminal only once no container of the pod runs (the kubelet's
// status manager holds a terminal phase back while containers could run),
// so nothing sees the pod finished while its containers still use the
// node. The pod stays in the API, terminal, until someone deletes it.
//
// Evict blocks until the containers are stopped, as the kubelet's
// killPodNow: at most 1.5 times the grace period (10 s at least), then it
// records ExceededGracePeriod and returns an error; the termination goes on.
// It returns ErrPodUnknown for a pod the engine does not run.
func (e *Engine) Evict(ctx context.Context, pod *v1.Pod, ev Eviction) error {
	cur := e.pods.pod(pod.UID)
	if cur == nil {
		return fmt.Errorf("evicting pod %s/%s %s: %w", pod.Namespace, pod.Name, pod.UID, ErrPodUnknown)
	}
	if ev.Reason == "" {
		ev.Reason = ReasonEvicted
	}
	if e.cfg.Recorder != nil {
		e.cfg.Recorder.AnnotatedEventf(cur, ev.EventAnnotations, v1.EventTypeWarning, ev.Reason, "%s", ev.Message)
	}
	var override *int64
	grace := int64(0)
	if ev.PodGracePeriod {
		if g := cur.Spec.TerminationGracePeriodSeconds; g != nil {
			grace = *g
		}
	} else {
		grace = max(ev.GracePeriod, 1)
		override = &grace
	}
	done := make(chan struct{})
	e.workers.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: cur, StartTime: e.cfg.Clock.Now(), KillPodOptions: &KillPodOptions{
		CompletedCh:                              done,
		Evict:                                    true,
		PodStatusFunc:                            evictedStatus(cur, ev, metav1.NewTime(e.cfg.Clock.Now())),
		PodTerminationGracePeriodSecondsOverride: override,
	}})
	timeout := time.Duration(max(grace+grace/2, 10)) * time.Second
	select {
	case <-done:
		return nil
	case <-e.cfg.Clock.After(timeout):
		if e.cfg.Recorder != nil {
			e.cfg.Recorder.Eventf(cur, v1.EventTypeWarning, reasonExceededGracePeriod, "Container runtime did not kill the pod within specified grace period.")
		}
		return fmt.Errorf("evicting pod %s/%s %s: timeout waiting to kill pod", cur.Namespace, cur.Name, cur.UID)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// PodCleanedUp reports whether an evicted pod's worker is done: its
// containers are stopped, its volumes and cgroup are gone and its final
// status was published (the kubelet's PodIsFinished). A pod the engine
// no longer knows is cleaned up.
func (e *Engine) PodCleanedUp(uid types.UID) bool {
	return e.workers.IsPodFinished(uid) || !e.workers.IsKnown(uid)
}

// evictedStatus is the kill's status function of an evicted pod, the
// kubelet's (eviction manager's evictPod, preemption's
// HandleAdmissionFailure): Failed, the reason and message, the
// DisruptionTarget condition when asked. The syncer applies it to the
// previous status once the containers stopped (SyncTerminatingPod), so
// the phase the containers' exits give can still win (Succeeded).
func evictedStatus(pod *v1.Pod, ev Eviction, now metav1.Time) PodStatusFunc {
	return func(s *v1.PodStatus) {
		s.Phase = v1.PodFailed
		s.Reason = ev.Reason
		s.Message = ev.Message
		if !ev.DisruptionTarget {
			return
		}
		msg := ev.ConditionMessage
		if msg == "" {
			msg = ev.Message
		}
		c := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonTerminationByKubelet,
			Message: msg, LastTransitionTime: now, ObservedGeneration: pod.Generation}
		for i := range s.Conditions {
			if s.Conditions[i].Type == v1.DisruptionTarget {
				if s.Conditions[i].Status == v1.ConditionTrue {
					c.LastTransitionTime = s.Conditions[i].LastTransitionTime
				}
				s.Conditions[i] = c
				return
			}
		}
		s.Conditions = append(s.Conditions, c)
	}
}
