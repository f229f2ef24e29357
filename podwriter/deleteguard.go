package podwriter

import (
	"context"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// DeleteGuard is the pod client virtual-kubelet's pod controller gets. It
// keeps the kubelet's rule that a pod object goes only after its
// containers have stopped: virtual-kubelet v1.13 removes objects itself
// (a delete with grace 0) when the deletion grace period expires
// (deletePodsFromKubernetesHandler: "Force deleting pod in running
// state") and, at once, for a pod marked for deletion whose API status
// shows no running container (syncPodInProvider), without asking the
// provider whether its containers are gone. Under load (StopContainer
// timing out, a slow preStop) that deleted objects whose containers still
// ran, so a StatefulSet's replacement could start beside the old pod.
//
// The guard turns every such removal into crivk's own termination: the pod
// is handed to terminate (the provider's DeletePod: the engine stops its
// containers with the grace period, tears down its volumes and only then
// deletes the object with grace 0 and a UID precondition,
// DeleteOnTerminated). A pod the engine never knew goes through
// the same path, which finds nothing in the runtime and deletes the object
// at once, so no pod is stuck. Graceful deletes (grace > 0, which only mark
// the object) and every other call pass through.
//
// The guard also keeps the record of the status writes (writes, may be
// nil): each write that succeeds is recorded, and a write of a pod whose
// final status DeleteOnTerminated writes is dropped as stale (it would
// only conflict with the final one, or reach a deleted object).
type DeleteGuard struct {
	client    corev1client.PodsGetter
	pods      corev1listers.PodLister
	terminate func(ctx context.Context, pod *v1.Pod) error
	writes    *StatusWrites
}

var _ corev1client.PodsGetter = DeleteGuard{}

// NewDeleteGuard returns the guard over client. pods is the node's pod
// informer's view (a pod not in it is gone already); terminate is the
// provider's DeletePod, which hands the pod to the engine's termination
// and returns at once; writes (nil: none) is the record of this agent's
// status writes, shared with DeleteOnTerminated.
func NewDeleteGuard(client corev1client.PodsGetter, pods corev1listers.PodLister, terminate func(ctx context.Context, pod *v1.Pod) error, writes *StatusWrites) DeleteGuard {
	return DeleteGuard{client: client, pods: pods, terminate: terminate, writes: writes}
}

// Pods returns the namespace's pod client with Delete and UpdateStatus
// guarded; every other call is client's.
func (g DeleteGuard) Pods(namespace string) corev1client.PodInterface {
	return guardedPods{PodInterface: g.client.Pods(namespace), guard: g, namespace: namespace}
}

type guardedPods struct {
	corev1client.PodInterface
	guard     DeleteGuard
	namespace string
}

// Delete removes nothing with grace 0: it hands the pod to crivk's
// termination instead, which deletes the object once its containers are
// stopped. A pod that is not in the informer is gone already; one whose
// UID is not the precondition's was recreated and is not this delete's.
func (p guardedPods) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	if opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds > 0 {
		return p.PodInterface.Delete(ctx, name, opts)
	}
	pod, err := p.guard.pods.Pods(p.namespace).Get(name)
	if err != nil {
		return nil
	}
	if opts.Preconditions != nil && opts.Preconditions.UID != nil && *opts.Preconditions.UID != pod.UID {
		return nil
	}
	log.G(ctx).WithField("pod", p.namespace+"/"+name).WithField("uid", pod.UID).
		Debug("virtual-kubelet's force delete held back: the pod object goes once its containers are stopped")
	return p.guard.terminate(ctx, pod)
}

// UpdateStatus writes virtual-kubelet's queued status and records the
// result; a pod whose final status is written by the deletion path is
// left alone (the object is returned as given, unwritten).
func (p guardedPods) UpdateStatus(ctx context.Context, pod *v1.Pod, opts metav1.UpdateOptions) (*v1.Pod, error) {
	end, ok := p.guard.writes.Begin(pod.UID)
	if !ok {
		log.G(ctx).WithField("pod", p.namespace+"/"+pod.Name).WithField("uid", pod.UID).
			Debug("status write dropped: the pod's final status is written before its deletion")
		return pod, nil
	}
	out, err := p.PodInterface.UpdateStatus(ctx, pod, opts)
	var written *v1.Pod
	if err == nil {
		written = out
	}
	end(written)
	return out, err
}
