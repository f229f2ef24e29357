package provider

import (
	"context"

	"github.com/crivk/crivk/lifecycle/status"
	"github.com/crivk/crivk/staticpods"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	v1 "k8s.io/api/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// Provider implements virtual-kubelet's pod interfaces over the engine.
type Provider struct {
	// engine is staticpods.Engine, the one declaration of what the
	// provider needs of the pod engine: lifecycle.Engine, or
	// staticpods.Apart over it.
	engine staticpods.Engine
	// pods is the node's pod informer's view (nil: none), for other
	// writers' conditions.
	pods corev1listers.PodLister
	// terminal (nil: none) is given every status handed to virtual-kubelet
	// and writes those of pods whose API object is already terminal,
	// which virtual-kubelet skips (podwriter.WriteTerminal).
	terminal func(ctx context.Context, pod *v1.Pod)
}

var (
	_ node.PodLifecycleHandler = (*Provider)(nil)
	_ node.PodNotifier         = (*Provider)(nil)
)

// New returns a provider over engine; pods is the node's pod informer's view
// (nil: none), from which the conditions other writers set are kept in the
// statuses handed on; terminal (nil: none) writes the statuses of pods
// whose API object is terminal, which virtual-kubelet skips
// (podwriter.WriteTerminal).
func New(engine staticpods.Engine, pods corev1listers.PodLister, terminal func(ctx context.Context, pod *v1.Pod)) *Provider {
	return &Provider{engine: engine, pods: pods, terminal: terminal}
}

// CreatePod hands a new pod to the engine.
func (p *Provider) CreatePod(ctx context.Context, pod *v1.Pod) error {
	p.engine.UpdatePod(ctx, fromAPI(pod))
	return nil
}

// UpdatePod hands a changed pod to the engine.
func (p *Provider) UpdatePod(ctx context.Context, pod *v1.Pod) error {
	p.engine.UpdatePod(ctx, fromAPI(pod))
	return nil
}

// DeletePod asks the engine to stop the pod with its grace period. It returns
// at once; the engine publishes the terminal status and deletes the object.
func (p *Provider) DeletePod(ctx context.Context, pod *v1.Pod) error {
	pod = fromAPI(pod)
	if !p.engine.Kill(ctx, pod) {
		p.engine.KillUnknown(ctx, pod)
	}
	return nil
}

// fromAPI is pod as the kubelet's pod config hands on a pod of its API
// source (pkg/kubelet/config/config.go merge): its
// kubernetes.io/config.source annotation says "api", whatever the object
// says, so that an API pod that claims "file" (the node e2e suite's
// critical pod does) is not taken for a static pod, which the node never
// deletes from the API. A mirror pod (kubernetes.io/config.mirror) is
// left as it is: the engine recognises it by that annotation and never
// runs it. pod itself is not modified.
func fromAPI(pod *v1.Pod) *v1.Pod {
	if pod == nil || pod.Annotations[sourceAnnotation] == apiSource {
		return pod
	}
	if _, mirror := pod.Annotations[mirrorAnnotation]; mirror {
		return pod
	}
	pod = pod.DeepCopy()
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[sourceAnnotation] = apiSource
	return pod
}

const (
	sourceAnnotation = "kubernetes.io/config.source"
	mirrorAnnotation = "kubernetes.io/config.mirror"
	apiSource        = "api"
)

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
// virtual-kubelet skips every status of a pod whose API object is
// terminal: the terminal hook writes those first, and virtual-kubelet is
// handed the status all the same (its record of the pod stays current).
func (p *Provider) NotifyPods(ctx context.Context, cb func(*v1.Pod)) {
	p.engine.NotifyPods(func(pod *v1.Pod) {
		if lister := p.pods; lister != nil {
			if cur, err := lister.Pods(pod.Namespace).Get(pod.Name); err == nil && cur.UID == pod.UID {
				pod = pod.DeepCopy()
				pod.Status.Conditions = status.WithForeignConditions(cur.Status.Conditions, pod.Status.Conditions)
			}
		}
		if p.terminal != nil {
			p.terminal(ctx, pod)
		}
		cb(pod)
	})
}
