package staticpods

import (
	"context"

	"github.com/crivk/crivk/lifecycle"
	v1 "k8s.io/api/core/v1"
)

// Engine is the pod engine as virtual-kubelet's provider uses it: the one
// declaration for both its users, Apart (which wraps one and is one) and
// package provider (which takes one). lifecycle.Engine implements it.
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

// apart is the engine as virtual-kubelet must see it: mirror pods never
// reach the engine (they are the API's copies of pods the engine runs from
// their manifests), static pods never reach virtual-kubelet (it would
// delete them as pods the API does not have, and write their statuses to
// nothing), and static pods' statuses go to their mirror pods.
type apart struct {
	engine  Engine
	mirrors *Mirrors
}

var _ Engine = apart{}

// Apart returns engine as virtual-kubelet's provider must use it when the
// node has static pods, or may have mirror pods: see doc.go.
func Apart(engine Engine, mirrors *Mirrors) Engine {
	return apart{engine: engine, mirrors: mirrors}
}

// UpdatePod hands a pod to the engine; a mirror pod only makes the mirror
// client look at it again.
func (a apart) UpdatePod(ctx context.Context, pod *v1.Pod) {
	if IsMirror(pod) {
		a.mirrors.Kick()
		return
	}
	a.engine.UpdatePod(ctx, pod)
}

// Kill stops a pod; a mirror pod's deletion (through the API, or a
// force delete podwriter.DeleteGuard turned into a Kill) never stops its
// static pod: the mirror client deletes the mirror and creates it again.
func (a apart) Kill(ctx context.Context, pod *v1.Pod) bool {
	if IsMirror(pod) {
		a.mirrors.Kick()
		return true
	}
	return a.engine.Kill(ctx, pod)
}

// KillUnknown is the engine's, but for mirror pods (Kill).
func (a apart) KillUnknown(ctx context.Context, pod *v1.Pod) {
	if IsMirror(pod) {
		a.mirrors.Kick()
		return
	}
	a.engine.KillUnknown(ctx, pod)
}

// PodByName is the engine's, but a static pod is not found.
func (a apart) PodByName(namespace, name string) *v1.Pod {
	if p := a.engine.PodByName(namespace, name); p != nil && !IsStatic(p) {
		return p
	}
	return nil
}

// Pods are the engine's pods but the static ones.
func (a apart) Pods() []*v1.Pod {
	all := a.engine.Pods()
	out := all[:0:0]
	for _, p := range all {
		if !IsStatic(p) {
			out = append(out, p)
		}
	}
	return out
}

// NotifyPods registers cb for every status but those of static pods,
// which go to their mirror pods.
func (a apart) NotifyPods(cb func(*v1.Pod)) {
	a.engine.NotifyPods(func(p *v1.Pod) {
		if IsStatic(p) {
			a.mirrors.SetStatus(p)
			return
		}
		cb(p)
	})
}

// OnTerminated wraps the engine's OnTerminated hook (next:
// podwriter.DeleteOnTerminated): a static pod has no API object of its
// own to delete (its mirror has another UID); its completed termination is
// recorded in source, and the mirror client deletes its mirror pod if the
// manifest is gone.
func OnTerminated(next func(context.Context, *v1.Pod) error, source *Source, mirrors *Mirrors) func(context.Context, *v1.Pod) error {
	return func(ctx context.Context, pod *v1.Pod) error {
		if !IsStatic(pod) {
			return next(ctx, pod)
		}
		source.Terminated(pod)
		mirrors.Kick()
		return nil
	}
}

// WithStatic returns list's pods and the static pods: the pods housekeeping
// must not take for orphans (lifecycle.Config.APIPods).
func WithStatic(list func() ([]*v1.Pod, error), source *Source) func() ([]*v1.Pod, error) {
	return func() ([]*v1.Pod, error) {
		pods, err := list()
		if err != nil {
			return nil, err
		}
		return append(pods, source.Pods()...), nil
	}
}
