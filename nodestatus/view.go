package nodestatus

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

// View is the node as the API has it (labels, taints, allocatable,
// conditions), kept by a watch of the node's own object: the kubelet's
// node informer (pkg/kubelet/kubelet.go, NewMainKubelet: an informer on
// nodes with the field selector metadata.name=<node>, no resync), which the
// Node authorizer allows a node for its own Node. It replaces a GET of the
// node every 2 s for admission and one every node status period for the
// node status loop (0.6 requests/s at idle, docs/benchmarks.md W5): a
// watch costs one list at start and one request per reconnection (every 5
// to 10 minutes, client-go's watch timeout).
//
// Admission (Node) never waits for the API: it gets the last node seen, at
// first the node crivk registered (the kubelet's getNodeAnyWay falls back
// to its initialNode the same way). When the watch fails the reflector
// retries with back-off and the view keeps the last node seen; a deleted
// node is kept too (virtual-kubelet's node controller reports it missing).
//
// The node status loop (APINode) must see the node lifecycle controller's
// Unknown as soon as the API server is back after an outage, not when the
// reflector's back-off (up to a minute) lets it reconnect: while the watch
// is not connected, APINode reads the node from the API instead, as every
// status check did before the watch.
type View struct {
	// get reads the node from the API: APINode's fallback while the watch
	// is not connected; nil: none.
	get func(ctx context.Context) (*v1.Node, error)

	mu   sync.Mutex
	node *v1.Node // guarded by mu; never nil
	// seen is whether node came from the API (guarded by mu).
	seen bool
	// connected is whether the watch's last list or watch call succeeded
	// and its stream has not ended since: then node is the API's up to
	// the watch's latency (guarded by mu).
	connected bool
	// calls counts list and watch calls, so that the end of a watch the
	// reflector already replaced does not mark its successor as ended
	// (guarded by mu).
	calls uint64
}

// NewView returns a view of initial, the node crivk registers; get, if
// set, reads the node from the API while the watch is not connected.
func NewView(initial *v1.Node, get func(ctx context.Context) (*v1.Node, error)) *View {
	return &View{node: initial.DeepCopy(), get: get}
}

// Node returns the last node seen, for admission. Callers must not modify it.
func (v *View) Node() *v1.Node {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.node
}

// Watched returns the node as the watch has it, and whether that is the
// API's node: the watch delivered it and is connected. Callers must not
// modify it.
func (v *View) Watched() (*v1.Node, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.node, v.seen && v.connected
}

// ErrNodeNotSeen is returned by APINode when the watch has not delivered
// the node, or is not connected, and the view has no way to read it.
var ErrNodeNotSeen = errors.New("the node has not been read from the API yet")

// APINode returns the node as the API has it, for the node status loop
// (NodeProvider compares its conditions with it every node status
// period, as the kubelet's tryUpdateNodeStatus reads its first try from
// its node lister): the watched node while the watch is connected, else
// the node read from the API. The node crivk registered is never returned:
// it says nothing of what the API has; a view without a read returns
// ErrNodeNotSeen instead.
func (v *View) APINode(ctx context.Context) (*v1.Node, error) {
	if n, ok := v.Watched(); ok {
		return n, nil
	}
	if v.get == nil {
		return nil, ErrNodeNotSeen
	}
	return v.get(ctx)
}

func (v *View) set(obj any) {
	n, ok := obj.(*v1.Node)
	if !ok {
		log.L.WithField("type", fmt.Sprintf("%T", obj)).Warn("node watch: not a node; ignored")
		return
	}
	v.mu.Lock()
	v.node, v.seen = n, true
	v.mu.Unlock()
}

// called records a list or watch call's outcome and returns its number.
func (v *View) called(err error) uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.calls++
	v.connected = err == nil
	return v.calls
}

// watchEnded records that the stream of watch call n ended.
func (v *View) watchEnded(n uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.calls == n {
		v.connected = false
	}
}

// Run watches the node through lw (ListWatch) until ctx ends.
func (v *View) Run(ctx context.Context, lw cache.ListerWatcher) {
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

// ListWatch lists and watches the node's own object (field selector
// metadata.name), as the kubelet's node informer, and tells the view
// whether the watch is connected. nodes should be the pods client (rate
// limited, no timeout), as the kubelet's informers use its kubeClient: the
// heartbeat client times requests out after one node status period, which
// would cut every watch.
func (v *View) ListWatch(nodes corev1client.NodesGetter, name string) cache.ListerWatcher {
	selector := fields.OneTermEqualSelector(metav1.ObjectNameField, name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			l, err := nodes.Nodes().List(ctx, opts)
			v.called(err)
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			w, err := nodes.Nodes().Watch(ctx, opts)
			n := v.called(err)
			if err != nil {
				return nil, err
			}
			return newTrackedWatch(w, func() { v.watchEnded(n) }), nil
		},
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, nodes)
}

// trackedWatch forwards a watch's events and calls ended once when its
// stream ends or carries an error.
type trackedWatch struct {
	w      watch.Interface
	out    chan watch.Event
	stop   chan struct{}
	once   sync.Once
	ending sync.Once
	ended  func()
}

func newTrackedWatch(w watch.Interface, ended func()) *trackedWatch {
	t := &trackedWatch{w: w, out: make(chan watch.Event), stop: make(chan struct{}), ended: ended}
	go t.forward()
	return t
}

func (t *trackedWatch) forward() {
	defer close(t.out)
	defer t.ending.Do(t.ended)
	for ev := range t.w.ResultChan() {
		if ev.Type == watch.Error {
			t.ending.Do(t.ended)
		}
		select {
		case t.out <- ev:
		case <-t.stop:
			return
		}
	}
}

func (t *trackedWatch) ResultChan() <-chan watch.Event { return t.out }

func (t *trackedWatch) Stop() {
	t.once.Do(func() { close(t.stop) })
	t.w.Stop()
}
