package vknode

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1informers "k8s.io/client-go/informers/core/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// Node runs virtual-kubelet's node and pod controllers like
// nodeutil.Node, but without its cluster-wide ConfigMap, Secret and Service
// informers (doc.go says why). The node API is not served here: package
// nodeapi owns its servers (nodeapi.ServeTLS).
type Node struct {
	nc          *node.NodeController
	pc          *node.PodController
	podInformer PodInformer
	workers     int
	ready       chan struct{}
}

// PodProvider is what the pod controller drives: crivk's provider.Provider.
type PodProvider interface {
	node.PodLifecycleHandler
	node.PodNotifier
}

// Config is what New needs. Node, Nodes, Leases, PodClient, Provider,
// NodeProvider, Recorder and PodInformer are required.
type Config struct {
	// Node is the Node object to register and keep.
	Node *v1.Node
	// Nodes and Leases are the heartbeat clients: the Node status and the
	// node Lease are written through them.
	Nodes  corev1client.NodesGetter
	Leases coordinationv1client.LeasesGetter
	// PodClient is the only client the pod controller writes pods through
	// (their status, and virtual-kubelet's removals). crivk hands it
	// podwriter.DeleteGuard: no pod object goes before its containers stop.
	PodClient corev1client.PodsGetter
	// Provider is handed the pods bound to this node.
	Provider     PodProvider
	NodeProvider node.NodeProvider
	Recorder     record.EventRecorder
	// Workers is how many pods the pod controller syncs at once.
	Workers int
	// StatusReport is how often the node status is written when nothing
	// changed (--node-status-report-frequency).
	StatusReport time.Duration
	// Watched, if set, is the node as a watch keeps it (nodeView.Watched):
	// the node controller's reads before each status write are served
	// from it while the watch is connected (viewedNodes).
	Watched func() (*v1.Node, bool)
	// PodInformer is the node's pod informer (NewPodInformer); the node
	// runs it.
	PodInformer PodInformer
}

// New builds the node's controllers; nothing runs before Run.
func New(cfg Config) (*Node, error) {
	switch {
	case cfg.Node == nil, cfg.Nodes == nil, cfg.Leases == nil, cfg.PodClient == nil,
		cfg.Provider == nil, cfg.NodeProvider == nil, cfg.Recorder == nil,
		cfg.PodInformer.informer == nil:
		return nil, errors.New("vknode: Node, Nodes, Leases, PodClient, Provider, NodeProvider, Recorder and PodInformer are required")
	}
	podInformer := cfg.PodInformer
	var nodes corev1client.NodeInterface = cfg.Nodes.Nodes()
	if cfg.Watched != nil {
		nodes = &viewedNodes{NodeInterface: nodes, name: cfg.Node.Name, watched: cfg.Watched}
	}
	nc, err := node.NewNodeController(cfg.NodeProvider, cfg.Node, nodes,
		node.WithNodeEnableLeaseV1(cfg.Leases.Leases(v1.NamespaceNodeLease), node.DefaultLeaseDuration),
		// The kubelet's nodeStatusReportFrequency: with the Lease renewed
		// every 10 s, the Node status is patched when a condition changes
		// or the API's node differs (NotifyNodeStatus) and otherwise every
		// report period (5 minutes), not every minute as virtual-kubelet's
		// default (a GET and a PATCH each time).
		node.WithNodeStatusUpdateInterval(cfg.StatusReport))
	if err != nil {
		return nil, fmt.Errorf("creating the node controller: %w", err)
	}
	// virtual-kubelet's handler sees the informer's updates through the
	// filter (filter.go), which keeps from it those it would ignore.
	filter := newVKUpdateFilter()
	pc, err := node.NewPodController(podControllerConfig(cfg.PodClient,
		vkRecorder{cfg.Recorder}, // no Provider*Success events
		notifyingProvider{PodProvider: cfg.Provider, f: filter}, filter.podInformer(podInformer)))
	if err != nil {
		return nil, fmt.Errorf("creating the pod controller: %w", err)
	}
	return &Node{nc: nc, pc: pc, podInformer: podInformer, workers: cfg.Workers, ready: make(chan struct{})}, nil
}

// podControllerConfig is virtual-kubelet's pod controller as crivk runs
// it: pods written through client, events to recorder, the pods of
// informer handed to provider, virtual-kubelet's own environment resolution
// off, and crivk's retry limiters.
func podControllerConfig(client corev1client.PodsGetter, recorder record.EventRecorder, provider node.PodLifecycleHandler, informer corev1informers.PodInformer) node.PodControllerConfig {
	// Required by NewPodController, unused with SkipDownwardAPIResolution.
	idle := newIdleInformers()
	return node.PodControllerConfig{
		PodClient:                 client,
		EventRecorder:             recorder,
		Provider:                  provider,
		PodInformer:               informer,
		SecretInformer:            idleSecrets{idle},
		ConfigMapInformer:         idleConfigMaps{idle},
		ServiceInformer:           idleServices{idle},
		SkipDownwardAPIResolution: true,
		// No shared 10/s bucket in front of the provider (ratelimit.go).
		SyncPodsFromKubernetesRateLimiter:    newRetryBackoff(30 * time.Second),
		DeletePodsFromKubernetesRateLimiter:  newRetryBackoff(30 * time.Second),
		SyncPodStatusFromProviderRateLimiter: newRetryBackoff(30 * time.Second),
	}
}

// Run runs the pod informer and the controllers (the pod controller
// first, the node controller once it is ready) and returns when one of
// them stops or ctx ends.
func (n *Node) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go n.podInformer.Informer().RunWithContext(ctx)
	go n.pc.Run(ctx, n.workers) //nolint:errcheck // reported through Done/Err
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-n.pc.Ready():
	case <-n.pc.Done():
		return n.pc.Err()
	}
	go n.nc.Run(ctx) //nolint:errcheck // reported through Done/Err
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-n.nc.Ready():
	case <-n.nc.Done():
		return n.nc.Err()
	}
	close(n.ready)
	select {
	case <-ctx.Done():
		<-n.pc.Done()
		return ctx.Err()
	case <-n.nc.Done():
		return n.nc.Err()
	case <-n.pc.Done():
		return n.pc.Err()
	}
}

// WaitReady returns once both controllers run.
func (n *Node) WaitReady(ctx context.Context) error {
	select {
	case <-n.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// viewedNodes is the node controller's Node client with reads of this node
// served from the watched node. virtual-kubelet's updateNodeStatus GETs the
// node before every status PATCH (to compute a three-way patch); the
// kubelet's tryUpdateNodeStatus reads its first try from its node lister
// and only its retries after a conflict from the API server, so does this:
// a Get of the node goes to the API only while the watch has not delivered
// the node (at registration: virtual-kubelet creates the node on NotFound)
// or is not connected, or after a write of it conflicted. Everything else
// is the heartbeat client's.
type viewedNodes struct {
	corev1client.NodeInterface
	name string
	// watched is the node as the watch has it, and whether the watch
	// delivered it and is connected (nodeView.Watched).
	watched func() (*v1.Node, bool)
	// fromAPI makes the next Get read the API: the last write conflicted.
	fromAPI atomic.Bool
}

func (c *viewedNodes) Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Node, error) {
	if name == c.name && opts.ResourceVersion == "" && !c.fromAPI.Swap(false) {
		if n, ok := c.watched(); ok {
			return n.DeepCopy(), nil
		}
	}
	return c.NodeInterface.Get(ctx, name, opts)
}

func (c *viewedNodes) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.Node, error) {
	n, err := c.NodeInterface.Patch(ctx, name, pt, data, opts, subresources...)
	if apierrors.IsConflict(err) {
		c.fromAPI.Store(true)
	}
	return n, err
}
