package apiobjects

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
)

// servicesSyncTimeout bounds how long a container start waits for the
// first list of Services (after crivk starts, or while the API server is
// away) before it fails with the kubelet's error and is retried.
const servicesSyncTimeout = 10 * time.Second

// errServicesNotSynced is the kubelet's error for a container environment
// asked for before the Services were ever read.
var errServicesNotSynced = errors.New("services have not yet been read at least once, cannot construct envvars")

// serviceCache is the node's view of every Service of the cluster, the
// kubelet's Service informer (one list, then one watch): the service-link
// environment variables of each container start read it instead of
// listing the API server. The Node authorizer grants a node get, list and
// watch of all Services for this.
type serviceCache struct {
	indexer cache.Indexer
	synced  cache.InformerSynced
}

// newServiceCache returns the cache and the controller that fills it
// (run it with the stop channel of the cache's life).
func newServiceCache(client corev1client.CoreV1Interface) (*serviceCache, cache.Controller) {
	c := client.Services(metav1.NamespaceAll)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return c.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, opts)
		},
	}
	store, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: cache.ToListWatcherWithWatchListSemantics(lw, client),
		ObjectType:    &v1.Service{},
		Handler:       cache.ResourceEventHandlerFuncs{}, // the informer needs one; pods read the cache when they start
		Indexers:      cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		Transform:     dropServiceManagedFields,
	})
	return &serviceCache{indexer: store.(cache.Indexer), synced: ctrl.HasSynced}, ctrl
}

// dropServiceManagedFields clears a Service's metadata.managedFields
// before the cache keeps it: the environment of a container reads names,
// cluster IPs and ports only, and in a cluster of many Services the field
// managers' records would be much of what every node holds. The pod
// informer does the same (vknode.DropManagedFields; apiobjects does not
// import vknode, docs/architecture.md). The cache is never written back.
func dropServiceManagedFields(obj any) (any, error) {
	if svc, ok := obj.(*v1.Service); ok {
		svc.ManagedFields = nil
	}
	return obj, nil
}

// list returns the Services of namespace as last seen (shared with the
// cache: read only). Before the first list has completed it waits for it,
// up to servicesSyncTimeout or ctx.
func (s *serviceCache) list(ctx context.Context, namespace string) ([]*v1.Service, error) {
	if !s.synced() {
		wctx, cancel := context.WithTimeout(ctx, servicesSyncTimeout)
		defer cancel()
		if !cache.WaitForCacheSync(wctx.Done(), s.synced) {
			return nil, errServicesNotSynced
		}
	}
	objs, err := s.indexer.ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		return nil, fmt.Errorf("services of namespace %s: %w", namespace, err)
	}
	out := make([]*v1.Service, 0, len(objs))
	for _, o := range objs {
		if svc, ok := o.(*v1.Service); ok {
			out = append(out, svc)
		}
	}
	return out, nil
}
