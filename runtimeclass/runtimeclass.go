package runtimeclass

import (
	"context"
	"errors"
	"fmt"

	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	nodev1client "k8s.io/client-go/kubernetes/typed/node/v1"
	nodev1listers "k8s.io/client-go/listers/node/v1"
	"k8s.io/client-go/tools/cache"
)

// Manager is a cache of the cluster's RuntimeClasses.
type Manager struct {
	lister nodev1listers.RuntimeClassLister
	synced cache.InformerSynced
}

// ErrNotSynced is returned by LookupRuntimeHandler before the cache has
// listed the RuntimeClasses once.
var ErrNotSynced = errors.New("the RuntimeClass cache has not synced yet")

// Start starts the cache of client's RuntimeClasses, which runs until ctx
// ends, and returns at once.
func Start(ctx context.Context, client nodev1client.RuntimeClassesGetter) *Manager {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.RuntimeClasses().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.RuntimeClasses().Watch(ctx, o)
		},
	}
	// As client-go's generated informers: a client that cannot stream
	// a watch list (the fake) is listed and watched the old way.
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, client), &nodev1.RuntimeClass{}, 0, cache.Indexers{})
	m := &Manager{lister: nodev1listers.NewRuntimeClassLister(inf.GetIndexer()), synced: inf.HasSynced}
	go inf.RunWithContext(ctx)
	return m
}

// LookupRuntimeHandler returns the handler of the RuntimeClass name: the
// API's NotFound error for an unknown one (errors.IsNotFound), one that
// wraps ErrNotSynced before the cache is filled.
func (m *Manager) LookupRuntimeHandler(name string) (string, error) {
	if !m.synced() {
		return "", fmt.Errorf("RuntimeClass %q: %w", name, ErrNotSynced)
	}
	rc, err := m.lister.Get(name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return "", err
		}
		return "", fmt.Errorf("failed to lookup RuntimeClass %s: %w", name, err)
	}
	return rc.Handler, nil
}
