package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/lifecycle"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/retry"
)

// Engine is what the provider needs of the pod engine; lifecycle.Engine
// implements it.
type Engine interface {
	UpdatePod(ctx context.Context, pod *v1.Pod)
	// Kill terminates a pod the engine knows and reports whether it did.
	Kill(ctx context.Context, pod *v1.Pod) bool
	// KillUnknown terminates a pod the engine was never given.
	KillUnknown(ctx context.Context, pod *v1.Pod)
	PodByName(namespace, name string) *v1.Pod
	Pods() []*v1.Pod
	NotifyPods(cb func(*v1.Pod))
}

var _ Engine = (*lifecycle.Engine)(nil)

// Provider implements virtual-kubelet's pod interfaces over the engine.
type Provider struct {
	engine  Engine
	runtime *cri.Runtime
	// nodeName and rootDir describe the node in /stats/summary.
	nodeName, rootDir string
	// pods is the node's pod informer's view (nil: none), for other
	// writers' conditions.
	pods corev1listers.PodLister
}

var (
	_ node.PodLifecycleHandler = (*Provider)(nil)
	_ node.PodNotifier         = (*Provider)(nil)
)

// New returns a provider over engine and runtime for the node nodeName,
// whose state lives under rootDir; pods is the node's pod informer's view
// (nil: none), from which the conditions other writers set are kept in the
// statuses handed on.
func New(engine Engine, runtime *cri.Runtime, nodeName, rootDir string, pods corev1listers.PodLister) *Provider {
	return &Provider{engine: engine, runtime: runtime, nodeName: nodeName, rootDir: rootDir, pods: pods}
}

// DeleteOnTerminated returns the engine's OnTerminated hook: as the kubelet's
// status manager once a pod's containers are gone, it makes sure the API
// object carries the pod's final status (pod.Status: the terminal phase,
// every container terminated), writing it when the object does not, and only
// then deletes the object with grace 0 and a UID precondition. The status
// also reaches the API through virtual-kubelet's asynchronous status queue,
// but that write may still be queued, or retried after a conflict, when the
// containers are gone: deleting then would leave a pod's last stored state
// Running, which controllers and watchers read as its end.
//
// cached, if set, returns the informer's copy of a pod (nil when it has
// none), and writes, if set, the objects of this agent's last status
// writes: the final status is checked and written against the newest of
// the two first, which saves the GET of every deletion; a copy that is
// stale makes the write conflict, and the write is then retried against a
// fresh GET. writes also learns that the pod's final status is being
// written (StatusWrites.Finalize), so that the status queue's stale
// writes of it are dropped, and forgets the pod once it is deleted.
// finalWriteWait bounds how long the deletion path waits for a status
// write in flight (its own request is bounded by the client's timeout).
const finalWriteWait = 10 * time.Second

func DeleteOnTerminated(client corev1client.PodsGetter, cached func(namespace, name string) *v1.Pod, writes *StatusWrites) func(ctx context.Context, pod *v1.Pod) error {
	return func(ctx context.Context, pod *v1.Pod) error {
		if pod.DeletionTimestamp == nil {
			return nil
		}
		l := log.G(ctx).WithField("pod", pod.Namespace+"/"+pod.Name).WithField("uid", pod.UID)
		var known *v1.Pod
		if cached != nil {
			known = cached(pod.Namespace, pod.Name)
		}
		if known != nil && known.UID != pod.UID {
			known = nil
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
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
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
// Conditions of other writers (types pod.Status does not hold) are kept.
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
		for _, c := range cur.Status.Conditions {
			if !hasCondition(upd.Status.Conditions, c.Type) {
				upd.Status.Conditions = append(upd.Status.Conditions, c)
			}
		}
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

func hasCondition(cs []v1.PodCondition, t v1.PodConditionType) bool {
	for _, c := range cs {
		if c.Type == t {
			return true
		}
	}
	return false
}

// CreatePod hands a new pod to the engine.
func (p *Provider) CreatePod(ctx context.Context, pod *v1.Pod) error {
	p.engine.UpdatePod(ctx, pod)
	return nil
}

// UpdatePod hands a changed pod to the engine.
func (p *Provider) UpdatePod(ctx context.Context, pod *v1.Pod) error {
	p.engine.UpdatePod(ctx, pod)
	return nil
}

// DeletePod asks the engine to stop the pod with its grace period. It returns
// at once; the engine publishes the terminal status and deletes the object.
func (p *Provider) DeletePod(ctx context.Context, pod *v1.Pod) error {
	if !p.engine.Kill(ctx, pod) {
		p.engine.KillUnknown(ctx, pod)
	}
	return nil
}

// GetPod returns the pod as the engine runs it.
func (p *Provider) GetPod(_ context.Context, namespace, name string) (*v1.Pod, error) {
	pod := p.engine.PodByName(namespace, name)
	if pod == nil {
		return nil, errdefs.NotFoundf("pod %s/%s is not known", namespace, name)
	}
	return pod, nil
}

// GetPodStatus returns the pod's latest status.
func (p *Provider) GetPodStatus(ctx context.Context, namespace, name string) (*v1.PodStatus, error) {
	pod, err := p.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods returns every pod the engine runs.
func (p *Provider) GetPods(context.Context) ([]*v1.Pod, error) {
	return p.engine.Pods(), nil
}

// NotifyPods registers virtual-kubelet's status callback with the engine.
// virtual-kubelet writes the whole status it is given, so the conditions the
// node does not own are first taken from the API's current pod.
func (p *Provider) NotifyPods(_ context.Context, cb func(*v1.Pod)) {
	p.engine.NotifyPods(func(pod *v1.Pod) {
		if lister := p.pods; lister != nil {
			if cur, err := lister.Pods(pod.Namespace).Get(pod.Name); err == nil && cur.UID == pod.UID {
				pod = pod.DeepCopy()
				pod.Status.Conditions = lifecycle.WithForeignConditions(cur.Status.Conditions, pod.Status.Conditions)
			}
		}
		cb(pod)
	})
}
