package lifecycle

import (
	"context"
	"time"

	"github.com/crivk/crivk/lifecycle/allocation"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// The kubelet's delays of its periodic retry of deferred resizes
// (pkg/kubelet/allocation): the first retry 30 s after start (or after
// the sources were not ready), then 3 min after every retry.
const (
	resizeRetryInitial = 30 * time.Second
	resizeRetryDelay   = 3 * time.Minute
)

// handleResize decides the in-place resize a running pod's spec may ask
// for, of its containers' or its pod-level resources (package
// allocation, the kubelet's handlePodResourcesResize), and returns the
// pod to sync: with the resources allocated to it. A resize is decided by
// the admission chain beside the other pods holding resources, with their
// allocations (else Deferred). It is called at the pod's sync: a
// generation of the spec already decided (PodResizePending for it) is not
// decided again there, but by the retries (runResizeRetries), as the
// kubelet decides at a pod's update and at its retry triggers only. A
// new decision asks for the other deferred resizes to be retried
// (pod_updated).
func (e *Engine) handleResize(pod *v1.Pod) (*v1.Pod, error) {
	a, ok := e.alloc.Allocated(pod)
	switch {
	case ok && a == pod && len(e.alloc.Conditions(pod.UID)) == 0:
		return pod, nil // the spec is the allocation, nothing pending
	case ok && a == pod:
		return e.decideResize(pod) // clears what is pending
	case ok && pod.Generation != 0 && e.alloc.PendingGeneration(pod.UID) == pod.Generation:
		return a, nil // decided for this generation: pending until a retry
	}
	out, err := e.decideResize(pod)
	if ok {
		e.alloc.RequestRetry(allocation.TriggerPodUpdated)
	}
	return out, err
}

// decideResize is one decision of pod's resize. Decisions are serialised
// with the admission of new pods (admitMu), so a resize and a new pod
// cannot both take the last of a resource.
func (e *Engine) decideResize(pod *v1.Pod) (*v1.Pod, error) {
	e.admitMu.Lock()
	defer e.admitMu.Unlock()
	admit := func(p *v1.Pod, others []*v1.Pod) (bool, string, string) {
		// A resize never preempts: the context only serves preemption.
		r := e.admit(context.TODO(), p, others, false)
		return r.Admit, r.Reason, r.Message
	}
	var rec allocation.EventRecorder
	if e.cfg.Recorder != nil {
		rec = e.cfg.Recorder
	}
	active := func() []*v1.Pod { return e.activePods(pod.UID) }
	return e.alloc.HandleResize(pod, active, admit, rec)
}

// runResizeRetries is the kubelet's allocation manager loop: the deferred
// resizes are decided again at each trigger (allocation.RetryRequests) and
// periodically, 30 s after start and then 3 min after every retry. Run
// starts it; it ends with ctx.
func (e *Engine) runResizeRetries(ctx context.Context) {
	timer := e.cfg.Clock.NewTimer(resizeRetryInitial)
	defer timer.Stop()
	for {
		var trigger string
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
			trigger = allocation.TriggerPeriodic
		case trigger = <-e.alloc.RetryRequests():
		}
		next := resizeRetryDelay
		if e.retryPendingResizes(ctx, trigger) {
			next = resizeRetryInitial
		}
		if trigger != allocation.TriggerPeriodic {
			e.alloc.RetryHandled()
		}
		if !timer.Stop() {
			select {
			case <-timer.C():
			default:
			}
		}
		timer.Reset(next)
	}
}

// retryPendingResizes decides every deferred resize again, in the
// kubelet's order (allocation.SortPending), and syncs each pod whose
// resize was allocated or whose conditions changed. It reports whether
// it skipped because the API's pods are not listed yet (the kubelet's
// sources not ready).
func (e *Engine) retryPendingResizes(ctx context.Context, trigger string) (notReady bool) {
	if e.cfg.APIPodsSynced != nil && !e.cfg.APIPodsSynced() {
		return true
	}
	var pods []*v1.Pod
	for _, uid := range e.alloc.Deferred() {
		p := e.pods.pod(uid)
		if p == nil || p.DeletionTimestamp != nil || isTerminalPhase(p.Status.Phase) || e.workers.IsPodTerminationRequested(uid) {
			continue
		}
		pods = append(pods, p)
	}
	e.alloc.SortPending(pods)
	for _, p := range pods {
		before := e.alloc.Conditions(p.UID)
		out, err := e.decideResize(p)
		if err != nil {
			log.G(ctx).WithError(err).WithField("pod", p.Namespace+"/"+p.Name).WithField("trigger", trigger).Error("retrying the pod's resize")
		}
		if out == p || !apiequality.Semantic.DeepEqual(before, e.alloc.Conditions(p.UID)) {
			e.Kick(p.UID)
		}
	}
	return false
}
