package podwriter

import (
	"context"
	"fmt"
	"time"

	"github.com/crivk/crivk/lifecycle/status"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/retry"
)

// finalWriteWait bounds how long the deletion path waits for a status
// write in flight (its own request is bounded by the client's timeout).
const finalWriteWait = 10 * time.Second

// DeleteOnTerminated returns the engine's OnTerminated hook
// (lifecycle.Config.OnTerminated): as the kubelet's status manager once a
// pod's containers are gone, it makes sure the API object carries the
// pod's final status (pod.Status: the terminal phase, every container
// terminated), writing it when the object does not, and only then deletes
// the object with grace 0 and a UID precondition. The status also reaches
// the API through virtual-kubelet's asynchronous status queue, but that
// write may still be queued, or retried after a conflict, when the
// containers are gone: deleting then would leave a pod's last stored state
// Running, which controllers and watchers read as its end.
//
// The engine calls it only for a pod whose deletion it carried out (doc.go
// draws the sequence); a pod without a deletionTimestamp is left alone. It
// is idempotent: an object gone already, or recreated under the same name
// (the UID precondition fails), is not an error.
//
// pods, if set, is the node's pod informer's view, and writes, if set, the
// objects of this agent's last status writes: the final status is checked
// and written against the newest of the two first, which saves the GET of
// every deletion; a copy that is stale makes the write conflict, and the
// write is then retried against a fresh GET. writes also learns that the
// pod's final status is being written (StatusWrites.Finalize), so that the
// status queue's stale writes of it are dropped, and forgets the pod once
// it is deleted.
func DeleteOnTerminated(client corev1client.PodsGetter, pods corev1listers.PodLister, writes *StatusWrites) func(ctx context.Context, pod *v1.Pod) error {
	return func(ctx context.Context, pod *v1.Pod) error {
		if pod.DeletionTimestamp == nil {
			return nil
		}
		l := log.G(ctx).WithField("pod", pod.Namespace+"/"+pod.Name).WithField("uid", pod.UID)
		var known *v1.Pod
		if pods != nil {
			if p, err := pods.Pods(pod.Namespace).Get(pod.Name); err == nil && p.UID == pod.UID {
				known = p
			}
		}
		// virtual-kubelet's write of the same final status may be in
		// flight: wait for it (a bounded while), then start from the
		// newest object known.
		fctx, cancel := context.WithTimeout(ctx, finalWriteWait)
		known = newest(known, writes.Finalize(fctx, pod.UID))
		cancel()
		if err := writeFinalStatus(ctx, client.Pods(pod.Namespace), pod, known); err != nil {
			if apierrors.IsNotFound(err) {
				// Deleted by someone else (a forced delete, the pod GC,
				// while crivk was down): nothing to delete, nothing to keep.
				writes.Forget(pod.UID)
				return nil
			}
			// The containers are stopped: the object goes all the same, as
			// the kubelet's would once its status write failed for good.
			l.WithError(err).Warn("writing the final status before the deletion failed")
		}
		opts := metav1.DeleteOptions{
			GracePeriodSeconds: new(int64),
			Preconditions:      metav1.NewUIDPreconditions(string(pod.UID)),
		}
		err := client.Pods(pod.Namespace).Delete(ctx, pod.Name, opts)
		// Gone (NotFound), or the name is another object's now (Conflict
		// on the UID precondition): forget the pod. An accepted DELETE
		// does not mean the object is gone: a finalizer keeps it, and
		// virtual-kubelet's status writes must stay refused while it
		// stays (a stale Running written over the final status was the
		// node e2e "Deleted pods handling" failure of session 31); the
		// informer's DELETE forgets it (ForgetDeleted).
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			writes.Forget(pod.UID)
		}
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting pod %s/%s (%s) from the API: %w", pod.Namespace, pod.Name, pod.UID, err)
		}
		l.Info("pod terminated and deleted")
		return nil
	}
}

// writeFinalStatus writes pod.Status to the API object unless it already
// has the same phase and every container of pod.Status terminated there.
// Conditions of other writers are kept (finalConditions).
// cached, the informer's copy of the object (nil: none), is tried first:
// its resourceVersion is the write's precondition, so a stale copy only
// costs a conflict, after which the object is read afresh.
func writeFinalStatus(ctx context.Context, pods corev1client.PodInterface, pod, cached *v1.Pod) error {
	write := func(cur *v1.Pod) error {
		if cur.UID != pod.UID {
			return apierrors.NewNotFound(v1.Resource("pods"), pod.Name)
		}
		if hasFinalStatus(cur, pod) {
			return nil
		}
		upd := cur.DeepCopy()
		upd.Status = *pod.Status.DeepCopy()
		upd.Status.Conditions = finalConditions(cur.Status.Conditions, upd.Status.Conditions)
		_, err := pods.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		return err
	}
	if cached != nil && cached.UID == pod.UID {
		err := write(cached)
		if err == nil || !apierrors.IsConflict(err) {
			return err
		}
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return write(cur)
	})
}

// finalConditions are the conditions the final status write sends: the
// node's own from the final status, every other writer's from the API
// object (api), by the one rule every status write of crivk follows
// (status.WithForeignConditions).
func finalConditions(api, final []v1.PodCondition) []v1.PodCondition {
	return status.WithForeignConditions(api, final)
}

// hasFinalStatus: cur, the API object, shows pod's phase and each of pod's
// container statuses terminated.
func hasFinalStatus(cur, pod *v1.Pod) bool {
	if cur.Status.Phase != pod.Status.Phase {
		return false
	}
	for _, group := range [][2][]v1.ContainerStatus{
		{pod.Status.InitContainerStatuses, cur.Status.InitContainerStatuses},
		{pod.Status.ContainerStatuses, cur.Status.ContainerStatuses},
		{pod.Status.EphemeralContainerStatuses, cur.Status.EphemeralContainerStatuses},
	} {
		for _, want := range group[0] {
			if want.State.Terminated == nil {
				continue
			}
			found := false
			for _, got := range group[1] {
				if got.Name == want.Name {
					found = got.State.Terminated != nil
					break
				}
			}
			if !found {
				return false
			}
		}
	}
	return true
}
