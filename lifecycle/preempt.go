package lifecycle

import (
	"context"
	"fmt"

	"github.com/crivk/crivk/lifecycle/admission"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
)

// The kubelet's critical pod admission (pkg/kubelet/preemption,
// CriticalPodAdmissionHandler, the predicate admit handler's failure
// handler): a critical pod (admission.IsCritical) that the predicates
// refuse only for lack of resources is admitted once lower-priority pods
// are evicted to free them.
const (
	// ReasonPreempting is the victim's event reason and, when it ends
	// Failed, its status reason (events.PreemptContainer); a victim whose
	// containers all exit 0 ends Succeeded without it, as the kubelet's.
	ReasonPreempting = "Preempting"
	// msgPreempted is the victim's status and event message.
	msgPreempted = "Preempted in order to admit critical pod"
	// msgPreemptedCondition is the victim's DisruptionTarget message.
	msgPreemptedCondition = "Pod was preempted by Kubelet to accommodate a critical pod."
)

// admitCritical is the predicates' answer for a critical pod the
// predicates refused (refused, the first failure): when every failure is a
// lack of resources, the kubelet's choice of victims among the pods that
// hold resources (admission.PodsToPreempt, over the active pods with their
// allocations) is evicted, each with reason Preempting, the DisruptionTarget
// condition and its own grace period, one after the other, each waited
// for (Evict); then the pod is admitted, without checking again, as the
// kubelet. A victim whose containers do not stop in time
// (ExceededGracePeriod) is logged and the next one goes on. Any other
// failure is the answer (the first that is not a lack of resources);
// no set of victims: UnexpectedAdmissionError with the kubelet's message.
//
// It runs under the admission lock (admitMu) and blocks for the victims'
// termination, as the kubelet's HandlePodAdditions blocks its sync loop:
// meanwhile no other pod is admitted on this node (on a fleet, on this
// machine: Config.Host's lock).
func (e *Engine) admitCritical(ctx context.Context, pod *v1.Pod, node *v1.Node, active []*v1.Pod, refused admission.Result) admission.Result {
	if !admission.IsCritical(pod) || !admission.Precheck(pod, node).Admit {
		return refused
	}
	var need []admission.Insufficient
	for _, f := range admission.Filter(pod, node, active) {
		if f.Insufficient == nil {
			return f.Result // preemption cannot help
		}
		need = append(need, *f.Insufficient)
	}
	if len(need) == 0 {
		return refused
	}
	victims, err := admission.PodsToPreempt(pod, e.allocatedPods(e.ActivePods()), need)
	if err != nil {
		return admission.Result{Reason: reasonUnexpectedAdmission, Message: fmt.Sprintf(
			"Unexpected error while attempting to recover from admission failure: preemption: error finding a set of pods to preempt: %v", err)}
	}
	l := log.G(ctx).WithField("pod", pod.Namespace+"/"+pod.Name)
	for _, v := range victims {
		vl := l.WithField("victim", v.Namespace+"/"+v.Name).WithField("uid", v.UID)
		vl.Info("preempting pod to free up resources")
		if err := e.Evict(ctx, v, Eviction{Reason: ReasonPreempting, Message: msgPreempted, PodGracePeriod: true,
			DisruptionTarget: true, ConditionMessage: msgPreemptedCondition}); err != nil {
			vl.WithError(err).Error("failed to evict pod")
			continue
		}
		if e.cfg.ObservePreemption != nil {
			e.cfg.ObservePreemption(string(need[0].Resource))
		}
		vl.Info("pod evicted successfully")
	}
	return admission.Result{Admit: true}
}
