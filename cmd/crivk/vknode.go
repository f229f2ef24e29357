package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/crivk/crivk/provider"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
)

// vkNode runs virtual-kubelet's node and pod controllers like
// nodeutil.Node, but without its cluster-wide ConfigMap, Secret and Service
// informers: nodeutil.NewNode always lists and watches every Secret of the
// cluster, which a node agent must not need (docs/rbac.md). crivk does not
// import nodeutil at all (informers.go says why). crivk reads
// the objects its pods reference itself (provider.Objects) and resolves
// environments in the engine, so the pod controller is told to skip its
// own resolution and gets informers that are never started.
type vkNode struct {
	nc          *node.NodeController
	pc          *node.PodController
	podInformer podInformer
	pods        corev1listers.PodLister
	srv         *http.Server
	handler     http.Handler
	listenAddr  string
	tlsConfig   *tls.Config
	workers     int
	ready       chan struct{}
}

type vkNodeConfig struct {
	Clients      *apiClients
	Node         *v1.Node
	Provider     *provider.Provider
	NodeProvider node.NodeProvider
	Recorder     record.EventRecorder
	Mux          *http.ServeMux
	ListenAddr   string
	TLS          []func(*tls.Config) error
	Workers      int
	// Auth wraps the node API with authentication and authorization.
	Auth func(http.Handler) http.Handler
	// StatusReport is how often the node status is written when nothing
	// changed (--node-status-report-frequency).
	StatusReport time.Duration
	// Watched, if set, is the node as a watch keeps it (nodeView.Watched):
	// the node controller's reads before each status write are served
	// from it while the watch is connected (viewedNodes).
	Watched func() (*v1.Node, bool)
	// PodInformer is the node's pod informer (newPodInformer); the node
	// runs it.
	PodInformer podInformer
	// StatusWrites records the status writes of the pod controller's
	// client (deleteGuard); nil: not recorded.
	StatusWrites *provider.StatusWrites
}

func newVKNode(cfg vkNodeConfig) (*vkNode, error) {
	if _, _, err := net.SplitHostPort(cfg.ListenAddr); err != nil {
		return nil, fmt.Errorf("listen address %q: %w", cfg.ListenAddr, err)
	}
	tlsCfg := &tls.Config{
		// Go's default cipher suites, as the kubelet without --tls-cipher-suites.
		MinVersion: tls.VersionTLS12,
		ClientAuth: tls.RequestClientCert,
	}
	for _, o := range cfg.TLS {
		if err := o(tlsCfg); err != nil {
			return nil, err
		}
	}
	podInformer := cfg.PodInformer
	// Required by NewPodController, unused with SkipDownwardAPIResolution.
	idle := newIdleInformers()
	pods := podInformer.Lister()
	var nodes corev1client.NodeInterface = cfg.Clients.nodes.Nodes()
	if cfg.Watched != nil {
		nodes = &viewedNodes{NodeInterface: nodes, name: cfg.Node.Name, watched: cfg.Watched}
	}
	nc, err := node.NewNodeController(cfg.NodeProvider, cfg.Node, nodes,
		node.WithNodeEnableLeaseV1(cfg.Clients.leases.Leases(v1.NamespaceNodeLease), node.DefaultLeaseDuration),
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
	// filter (vkfilter.go), which keeps from it those it would ignore.
	filter := newVKUpdateFilter()
	pc, err := node.NewPodController(node.PodControllerConfig{
		// Removals with grace 0 become crivk's own termination
		// (deleteguard.go): no object goes before its containers stop.
		PodClient:     deleteGuard{PodsGetter: cfg.Clients.core, pods: pods, terminate: cfg.Provider.DeletePod, writes: cfg.StatusWrites},
		EventRecorder: vkRecorder{cfg.Recorder}, // no Provider*Success events

		Provider:                  notifyingProvider{Provider: cfg.Provider, f: filter},
		PodInformer:               filter.podInformer(podInformer),
		SecretInformer:            idleSecrets{idle},
		ConfigMapInformer:         idleConfigMaps{idle},
		ServiceInformer:           idleServices{idle},
		SkipDownwardAPIResolution: true,
		// No shared 10/s bucket in front of the provider (ratelimit.go).
		SyncPodsFromKubernetesRateLimiter:    newRetryBackoff(30 * time.Second),
		DeletePodsFromKubernetesRateLimiter:  newRetryBackoff(30 * time.Second),
		SyncPodStatusFromProviderRateLimiter: newRetryBackoff(30 * time.Second),
	})
	if err != nil {
		return nil, fmt.Errorf("creating the pod controller: %w", err)
	}
	var handler http.Handler = cfg.Mux
	if cfg.Auth != nil {
		handler = cfg.Auth(handler)
	}
	return &vkNode{nc: nc, pc: pc, podInformer: podInformer, pods: pods, listenAddr: cfg.ListenAddr,
		handler: handler, tlsConfig: tlsCfg, workers: cfg.Workers, ready: make(chan struct{})}, nil
}

// Run serves the node API, runs the controllers and returns when one of
// them stops or ctx ends.
func (n *vkNode) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l, err := tls.Listen("tcp", n.listenAddr, n.tlsConfig)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", n.listenAddr, err)
	}
	n.srv = &http.Server{Handler: n.handler, TLSConfig: n.tlsConfig, ReadHeaderTimeout: 30 * time.Second}
	return n.run(ctx, l)
}

func (n *vkNode) run(ctx context.Context, l net.Listener) error {
	go func() {
		if err := n.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.G(ctx).WithError(err).Error("node API server stopped")
		}
	}()
	defer n.srv.Close()
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
func (n *vkNode) WaitReady(ctx context.Context) error {
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

// ownNode reads this node from the API server's watch cache (resourceVersion
// 0, as the kubelet's first try did before its node lister) through the
// heartbeat client: the node status loop's read while the node watch is
// not connected (nodeView.APINode).
func ownNode(c *apiClients, name string) func(ctx context.Context) (*v1.Node, error) {
	return func(ctx context.Context) (*v1.Node, error) {
		return c.nodes.Nodes().Get(ctx, name, metav1.GetOptions{ResourceVersion: "0"})
	}
}
