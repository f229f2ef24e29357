package vknode

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	corev1informers "k8s.io/client-go/informers/core/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// This file builds the few client-go pieces virtual-kubelet's controllers
// need from the typed core client alone. crivk does not link the
// aggregated clientset, the informer factory or virtual-kubelet's nodeutil
// (which brings k8s.io/apiserver's admission plugins, CEL and etcd client
// into the binary): a third of the binary, and of the agent's resident
// memory, for code a node agent never runs (docs/benchmarks.md).

// PodInformer is the node's pod informer: only pods bound to this node
// (the field selector the kubelet uses). Node runs it; its users read its
// Lister and add handlers to its Informer before.
type PodInformer struct {
	informer cache.SharedIndexInformer
}

var _ corev1informers.PodInformer = PodInformer{}

// NewPodInformer returns the informer of the pods bound to nodeName, listed
// and watched through pods and resynced every resync (crivk: a minute, like
// virtual-kubelet's own).
func NewPodInformer(pods corev1client.PodsGetter, nodeName string, resync time.Duration) PodInformer {
	selector := fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			return pods.Pods(v1.NamespaceAll).List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return pods.Pods(v1.NamespaceAll).Watch(ctx, opts)
		},
	}
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, pods), &v1.Pod{}, resync,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	// Before the informer runs, so that no pod is cached with them. It
	// fails only once the informer has started, which it has not.
	if err := inf.SetTransform(DropManagedFields); err != nil {
		panic(fmt.Sprintf("pod informer: %v", err))
	}
	return PodInformer{informer: inf}
}

// DropManagedFields is a cache.TransformFunc that clears an object's
// metadata.managedFields before the informer caches it and hands it to its
// handlers, as the kube-scheduler's pod informer does
// (pkg/scheduler/scheduler.go newPodInformer), to save memory: the field
// managers' records are a fifth to a half of a pod's size, copied into every
// copy of the pod crivk and virtual-kubelet keep, and nothing in crivk
// reads them.
//
// An update written from a cached object therefore carries managedFields
// nil, which the API server reads as "keep the stored ones" (apimachinery's
// managedfields decodeLiveOrNew; a non-nil empty list would reset them,
// hence nil, never empty); a status write ignores the request's
// managedFields in any case. Other objects, such as a
// cache.DeletedFinalStateUnknown, are returned unchanged.
func DropManagedFields(obj any) (any, error) {
	if a, err := meta.Accessor(obj); err == nil && a.GetManagedFields() != nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

// Informer is the shared informer; add handlers to it, do not run it.
func (i PodInformer) Informer() cache.SharedIndexInformer { return i.informer }

// Lister reads the informer's view.
func (i PodInformer) Lister() corev1listers.PodLister {
	return corev1listers.NewPodLister(i.informer.GetIndexer())
}

// idleInformers satisfy virtual-kubelet's PodControllerConfig, which
// requires ConfigMap, Secret and Service informers for its own environment
// resolution. crivk turns that resolution off (SkipDownwardAPIResolution)
// and reads objects with per-object watches (apiobjects.Reader), so these
// are never started: their listers stay empty and nothing is listed or
// watched cluster-wide (docs/rbac.md).
type idleInformers struct {
	indexer cache.Indexer
}

func newIdleInformers() idleInformers {
	return idleInformers{indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})}
}

// idleListWatch fails: an idle informer that is started by mistake says so
// in its error instead of listing the cluster.
var idleListWatch = &cache.ListWatch{
	ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
		return nil, fmt.Errorf("crivk does not list this resource cluster-wide")
	},
	WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
		return nil, fmt.Errorf("crivk does not watch this resource cluster-wide")
	},
}

type idleConfigMaps struct{ idleInformers }
type idleSecrets struct{ idleInformers }
type idleServices struct{ idleInformers }

func (i idleConfigMaps) Informer() cache.SharedIndexInformer {
	return cache.NewSharedIndexInformer(idleListWatch, &v1.ConfigMap{}, 0, cache.Indexers{})
}
func (i idleConfigMaps) Lister() corev1listers.ConfigMapLister {
	return corev1listers.NewConfigMapLister(i.indexer)
}
func (i idleSecrets) Informer() cache.SharedIndexInformer {
	return cache.NewSharedIndexInformer(idleListWatch, &v1.Secret{}, 0, cache.Indexers{})
}
func (i idleSecrets) Lister() corev1listers.SecretLister {
	return corev1listers.NewSecretLister(i.indexer)
}
func (i idleServices) Informer() cache.SharedIndexInformer {
	return cache.NewSharedIndexInformer(idleListWatch, &v1.Service{}, 0, cache.Indexers{})
}
func (i idleServices) Lister() corev1listers.ServiceLister {
	return corev1listers.NewServiceLister(i.indexer)
}

var (
	_ corev1informers.ConfigMapInformer = idleConfigMaps{}
	_ corev1informers.SecretInformer    = idleSecrets{}
	_ corev1informers.ServiceInformer   = idleServices{}
)
