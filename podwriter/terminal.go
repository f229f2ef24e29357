package podwriter

import (
	"context"
	"time"

	"github.com/crivk/crivk/lifecycle/status"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/retry"
)

// terminalWriteWait bounds one direct write of a terminal pod's status
// (it runs on the status manager's delivery goroutine).
const terminalWriteWait = 10 * time.Second

// WriteTerminal returns the hook that writes the status changes of a pod
// whose API object is already terminal (Succeeded, Failed), which
// virtual-kubelet v1.13 never writes (its pod controller skips every
// status update of such an object: shouldSkipPodStatusUpdate). The
// kubelet's status manager keeps writing them (syncPod writes while the
// pod exists), so a finished pod's PodReadyToStartContainers turns False
// once its sandbox is stopped; without this hook it stayed True.
//
// The provider calls it with every status it hands virtual-kubelet
// (provider.New's terminal hook). It writes with UpdateStatus only when
// all of these hold; otherwise it does nothing and virtual-kubelet's
// queue stays the only writer:
//
//   - the status handed is terminal, and the newest copy of the object
//     known (the informer's, pods, or this agent's last write, writes) is
//     terminal too, with the same UID; when the informer's is not, the
//     status writes in flight (virtual-kubelet's write of the terminal
//     phase, the informer not updated yet) are waited for first
//     (StatusWrites.Settled), as virtual-kubelet skips this status once
//     that write has landed;
//   - the phases are the same: a terminal phase is final, a write that
//     would change it is refused (the status manager never publishes one);
//   - the object differs from the status in what the node owns (other
//     writers' conditions are kept: status.WithForeignConditions);
//   - the deletion path has not taken the pod's status over
//     (StatusWrites.Begin; the write is recorded in writes like
//     virtual-kubelet's).
//
// A conflict is retried against a fresh GET (the same checks again); a pod
// gone (NotFound) or recreated under its name is not an error. pods may be
// nil (then nothing is written); writes may be nil.
func WriteTerminal(client corev1client.PodsGetter, pods corev1listers.PodLister, writes *StatusWrites) func(ctx context.Context, pod *v1.Pod) {
	return func(ctx context.Context, pod *v1.Pod) {
		if pods == nil || !isTerminal(pod.Status.Phase) {
			return
		}
		var known *v1.Pod
		if p, err := pods.Pods(pod.Namespace).Get(pod.Name); err == nil && p.UID == pod.UID {
			known = p
		}
		if known == nil || !isTerminal(known.Status.Phase) {
			// virtual-kubelet's write of the terminal phase may be in
			// flight: once it lands, virtual-kubelet skips this status
			// too. Wait for it (a bounded while) and look at its result.
			sctx, cancel := context.WithTimeout(ctx, terminalWriteWait)
			known = newest(known, writes.Settled(sctx, pod.UID))
			cancel()
		} else {
			known = newest(known, writes.Last(pod.UID))
		}
		if known == nil || known.UID != pod.UID || terminalUpdate(known, pod) == nil {
			return
		}
		end, ok := writes.Begin(pod.UID)
		if !ok {
			return // the deletion path writes the final status
		}
		wctx, cancel := context.WithTimeout(ctx, terminalWriteWait)
		defer cancel()
		written, err := writeTerminalStatus(wctx, client.Pods(pod.Namespace), pod, known)
		end(written)
		l := log.G(ctx).WithField("pod", pod.Namespace+"/"+pod.Name).WithField("uid", pod.UID)
		switch {
		case err != nil && !apierrors.IsNotFound(err):
			l.WithError(err).Warn("writing a terminal pod's status failed")
		case written != nil:
			l.Debug("terminal pod's status written (virtual-kubelet skips terminal pods)")
		}
	}
}

// writeTerminalStatus writes pod's status over cur (first the cached
// copy, then fresh GETs after a conflict) when terminalUpdate says so, and
// returns the object the API returned (nil: nothing written).
func writeTerminalStatus(ctx context.Context, pods corev1client.PodInterface, pod, cached *v1.Pod) (*v1.Pod, error) {
	var written *v1.Pod
	write := func(cur *v1.Pod) error {
		if cur.UID != pod.UID {
			return apierrors.NewNotFound(v1.Resource("pods"), pod.Name)
		}
		upd := terminalUpdate(cur, pod)
		if upd == nil {
			return nil
		}
		out, err := pods.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		if err == nil {
			written = out
		}
		return err
	}
	err := write(cached)
	if err == nil || !apierrors.IsConflict(err) {
		return written, err
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return write(cur)
	})
	return written, err
}

// terminalUpdate returns the object to write for pod's status over cur,
// the API object, or nil: when cur is not terminal (virtual-kubelet writes
// it), when the phases differ (a terminal phase is final), or when cur
// already shows the status (other writers' conditions taken from cur).
func terminalUpdate(cur, pod *v1.Pod) *v1.Pod {
	if !isTerminal(cur.Status.Phase) || cur.Status.Phase != pod.Status.Phase {
		return nil
	}
	st := *pod.Status.DeepCopy()
	st.Conditions = status.WithForeignConditions(cur.Status.Conditions, st.Conditions)
	if apiequality.Semantic.DeepEqual(cur.Status, st) {
		return nil
	}
	upd := cur.DeepCopy()
	upd.Status = st
	return upd
}

func isTerminal(p v1.PodPhase) bool { return p == v1.PodSucceeded || p == v1.PodFailed }
