package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
)

// nodeView is the node as the API has it (labels, taints, allocatable,
// conditions), kept by a watch of the node's own object: the kubelet's
// node informer (pkg/kubelet/kubelet.go, NewMainKubelet: an informer on
// nodes with the field selector metadata.name=<node>, no resync), which the
// Node authorizer allows a node for its own Node. It replaces a GET of the
// node every 2 s for admission and one every node status period for the
// node status loop (0.6 requests/s at idle, docs/benchmarks.md W5): a
// watch costs one list at start and one request per reconnection (every 5
// to 10 minutes, client-go's watch timeout).
//
// Readers never wait for the API: Node returns the last node seen, at
// first the node crivk registered (the kubelet's getNodeAnyWay falls back
// to its initialNode the same way). When the watch fails the reflector
// relists with back-off and the view keeps the last node seen; a deleted
// node is kept too (virtual-kubelet's node controller reports it missing).
type nodeView struct {
	mu   sync.Mutex
	node *v1.Node // guarded by mu; never nil
	// seen is whether node came from the API (guarded by mu).
	seen bool
}

func newNodeView(initial *v1.Node) *nodeView {
	return &nodeView{node: initial.DeepCopy()}
}

// Node returns the last node seen, for admission. Callers must not modify it.
func (v *nodeView) Node() *v1.Node {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.node
}

// errNodeNotSeen is returned by APINode until the watch has delivered the
// node.
var errNodeNotSeen = errors.New("the node has not been read from the API yet")

// APINode returns the last node read from the API, for the node status
// loop (provider.NodeProvider compares its conditions with it, as the
// kubelet's tryUpdateNodeStatus reads its first try from the node lister).
// Until the watch has delivered the node it returns errNodeNotSeen: the
// node crivk registered says nothing of what the API has.
func (v *nodeView) APINode(context.Context) (*v1.Node, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.seen {
		return nil, errNodeNotSeen
	}
	return v.node, nil
}

func (v *nodeView) set(obj any) {
	n, ok := obj.(*v1.Node)
	if !ok {
		log.L.WithField("type", fmt.Sprintf("%T", obj)).Warn("node watch: not a node; ignored")
		return
	}
	v.mu.Lock()
	v.node, v.seen = n, true
	v.mu.Unlock()
}

// run watches the node through lw until ctx ends.
func (v *nodeView) run(ctx context.Context, lw cache.ListerWatcher) {
	_, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &v1.Node{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    v.set,
			UpdateFunc: func(_, n any) { v.set(n) },
			DeleteFunc: func(any) {
				log.G(ctx).Warn("node watch: the node was deleted; admission keeps the last node seen")
			},
		},
	})
	ctrl.RunWithContext(ctx)
}

// ownNodeWatch lists and watches the node's own object (field selector
// metadata.name), as the kubelet's node informer. It goes through the pods
// client (rate limited, no timeout), as the kubelet's informers go through
// its kubeClient: the heartbeat client times requests out after one node
// status period, which would cut every watch.
func ownNodeWatch(nodes corev1client.NodesGetter, name string) cache.ListerWatcher {
	selector := fields.OneTermEqualSelector(metav1.ObjectNameField, name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			return nodes.Nodes().List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return nodes.Nodes().Watch(ctx, opts)
		},
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, nodes)
}
