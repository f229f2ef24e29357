package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/crivk/crivk/cm"
	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/cri/taskevents"
	"github.com/crivk/crivk/images"
	"github.com/crivk/crivk/internal/fleet"
	"github.com/crivk/crivk/internal/healthz"
	"github.com/crivk/crivk/internal/runtimeclass"
	"github.com/crivk/crivk/internal/vknode"
	"github.com/crivk/crivk/lifecycle/pleg"
	"github.com/crivk/crivk/metrics"
	"github.com/crivk/crivk/nodeapi"
	"github.com/crivk/crivk/nodeapi/stats"
	"github.com/crivk/crivk/nodestatus"
	"github.com/crivk/crivk/podwriter"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"
)

// fleetSpecs is the nodes this process serves (internal/fleet): one, the
// flags unchanged, without --node-count.
func (o *options) fleetSpecs() ([]fleet.Spec, error) {
	shares, err := fleet.ParseShares(o.nodeShares)
	if err != nil {
		return nil, err
	}
	return fleet.Specs(fleet.Settings{Count: o.nodeCount, Name: o.nodeName, Shares: shares,
		Port: o.port, ReadOnlyPort: o.readOnlyPort, HealthzPort: o.healthzPort,
		RootDir: o.rootDir, PodLogDir: o.podLogDir, CgroupRoot: o.cgroupRoot,
		Kubeconfig: o.kubeconfig, Bootstrap: o.bootstrapKubeconfig != "",
		Labels: o.nodeLabels, Taints: o.taints})
}

// nodeOptions is node s's copy of the process' options: its name, ports,
// directories, cgroup root, kubeconfig, labels and taints (fleet.Spec's
// own copies) and its part of the machine (portion: setupCgroups bounds
// the node's kubepods by it, the eviction manager measures its
// memory.available against it); every other field is only read after
// parseFlags. Its nodeCount stays the process'.
func nodeOptions(o *options, s fleet.Spec) *options {
	n := *o
	n.portion = nodestatus.Portion{Weight: s.Weight, Total: s.TotalWeight}
	n.nodeName, n.port, n.readOnlyPort = s.Name, s.Port, s.ReadOnlyPort
	n.rootDir, n.podLogDir, n.cgroupRoot, n.kubeconfig = s.RootDir, s.PodLogDir, s.CgroupRoot, s.Kubeconfig
	n.nodeLabels, n.taints = s.Labels, s.Taints
	return &n
}

// fleetNode is one node of the process until its runtime is up.
type fleetNode struct {
	spec     fleet.Spec
	o        *options
	clients  *apiClients
	pods     *cm.Manager // nil with --cgroups-per-qos=false
	eb       record.EventBroadcaster
	recorder record.EventRecorder
	metrics  *metrics.Agent
	nodeCfg  nodestatus.NodeConfig
	awaiting *nodestatus.NotReadyReporter
	// ports is the node's view of the host's ports (its engine's
	// lifecycle.Config.Host), watching the engine once it exists.
	ports *fleet.NodePorts
}

// runFleet is run for --node-count above 1 (docs/scale.md), after the
// process-wide phases (tracing, profiling, logging, /healthz): each
// node's API clients, pod cgroup tree and NotReady registration, then one
// runtime connection for all (refused while it holds a single-node
// crivk's sandboxes), then each node's stack over its share of the
// runtime (cri.Runtime.ForNode) as run builds the one node's, until ctx
// ends or a node fails. Each node gets its part of the machine, equal or
// by --node-shares (nodestatus.Portion: its Node's capacity and
// allocatable, its kubepods bound, its memory.available) and its
// admission refuses a host port another node's pod holds
// (fleet.HostPorts). The runtime is walked once per relist period for all
// nodes (pleg.Shared, woken by one task-event stream), each node's PLEG
// relisting from its share (docs/scale.md). The CRI call metrics of the one
// connection, the walk's included, are the process': node 0's /metrics,
// beside client-go's. It stays one function, as run does: the shared parts
// are built once in an order the nodes' stacks depend on, and each step is
// a call into its package.
func runFleet(ctx context.Context, o *options, health *healthz.Checks, contact *healthz.Contact) error {
	specs, err := o.fleetSpecs()
	if err != nil {
		return err
	}
	if err := prepareHost(ctx, o); err != nil {
		return err
	}
	nodes := make([]*fleetNode, len(specs))
	// One machine, one set of ports: every node's admission refuses a
	// host port another node's pod holds.
	hostPorts := &fleet.HostPorts{}
	// The process' own listeners are held too (docs/scale.md).
	hostPorts.Listening(fleet.Listeners(specs, fleet.Addresses{Node: o.address, HealthzPort: o.healthzPort, HealthzBindAddress: o.healthzBindAddress, Profiling: o.profilingAddress}))
	for i, s := range specs {
		n := &fleetNode{spec: s, o: nodeOptions(o, s), metrics: metrics.NewAgent(version)}
		n.ports = hostPorts.Node(s.Name)
		n.o.hostAdmitter = n.ports
		if i == 0 {
			// client-go's metrics are process-wide: node 0's /metrics.
			n.metrics.RegisterClientMetrics()
		}
		for _, d := range []string{n.o.rootDir, n.o.podLogDir} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("node %s: creating %s: %w", s.Name, d, err)
			}
		}
		nctx := log.WithLogger(ctx, log.G(ctx).WithField("node", s.Name))
		if n.clients, err = connectAPI(nctx, n.o, contact.WrapTransport); err != nil {
			return fmt.Errorf("node %s: %w", s.Name, err)
		}
		if n.pods, err = setupCgroups(nctx, n.o); err != nil {
			return fmt.Errorf("node %s: %w", s.Name, err)
		}
		n.eb = record.NewBroadcaster()
		n.recorder = n.eb.NewRecorder(scheme.Scheme, v1.EventSource{Component: "kubelet", Host: s.Name})
		n.nodeCfg = nodestatus.NodeConfig{
			Name: s.Name, InternalIP: o.nodeIP, KubeletPort: int32(s.Port), MaxPods: o.maxPods,
			RootDir: n.o.rootDir, AgentVersion: version, Reservations: o.reservations,
			Labels: s.Labels, Taints: s.Taints, Portion: n.o.portion,
		}
		cfg := n.nodeCfg
		n.awaiting = &nodestatus.NotReadyReporter{
			Name: s.Name, Nodes: n.clients.nodes.Nodes(), Period: o.nodeStatusUpdateFrequency, Now: time.Now,
			Build: func(rd cri.Readiness, now time.Time) (*v1.Node, error) { return nodestatus.BuildNode(cfg, rd, now) },
		}
		nodes[i] = n
	}
	contact.Start()
	// One connection; while it is not up every node is registered
	// NotReady.
	base, ver, rd, err := connectRuntime(ctx, o, nodes[0].recorder, nil, nodes[0].metrics, func(ctx context.Context) {
		var wg sync.WaitGroup
		for _, n := range nodes {
			wg.Add(1)
			go func() { defer wg.Done(); n.awaiting.Run(ctx) }()
		}
		wg.Wait()
	})
	if err != nil {
		return err
	}
	defer base.Close()
	if ids, err := base.UnlabelledSandboxes(ctx); err != nil {
		return err
	} else if len(ids) > 0 {
		return fmt.Errorf("the runtime holds %d sandboxes of a single-node crivk (%s first): drain them, or run with --node-count 1 (docs/scale.md)", len(ids), ids[0])
	}
	base.SetRuntimeClasses(runtimeclass.Start(ctx, nodes[0].clients.runtimeClasses))

	ctx, stop := context.WithCancel(ctx)
	defer stop()
	// One walk of the runtime per period for every node, woken by one
	// task-event stream: each node's PLEG relists from its share.
	wake := make(chan struct{}, 1)
	walk, err := pleg.NewShared(pleg.SharedConfig{Runtime: base, Period: o.relistPeriod, Wake: wake, WakeSpacing: o.wakeSpacing})
	if err != nil {
		return err
	}
	// One image collector: the images are the runtime's, not a node's.
	imageGC, err := sharedImageGC(o, base, nodes)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		n.o.relistFeed = walk.Feed(n.spec.Name)
		n.o.gc.sharedImages = imageGC
	}
	go imageGC.Run(ctx)
	if o.runtimeEvents && strings.HasPrefix(o.criEndpoint, "unix://") {
		go runtimeWaker(o, wake).Run(ctx)
	}
	go walk.Run(ctx)
	healthHandler := health.Handler(func(err error) { log.G(ctx).WithError(err).Warn("health check failed") })
	var runtimeChecks, loopChecks []namedCheck
	errs := make(chan error, len(nodes))
	for _, n := range nodes {
		a, serve, err := startFleetNode(ctx, n, base, ver, rd, healthHandler)
		if err != nil {
			return fmt.Errorf("node %s: %w", n.spec.Name, err)
		}
		runtimeChecks = append(runtimeChecks, namedCheck{n.spec.Name, a.relist.Healthy})
		loopChecks = append(loopChecks, namedCheck{n.spec.Name, healthz.SyncLoopCheck(nil, a.engine.LatestLoopEntryTime, o.syncInterval)})
		go func() {
			defer n.eb.Shutdown()
			if err := serve(); err != nil {
				errs <- fmt.Errorf("node %s: %w", n.spec.Name, err)
				return
			}
			errs <- nil
		}()
	}
	health.Set(healthz.CheckRuntime, allOf(runtimeChecks))
	health.Set(healthz.CheckSyncLoop, allOf(loopChecks))
	var all []error
	for range nodes {
		if err := <-errs; err != nil {
			// One node failing stops the process, as a single-node
			// crivk exits: the others stop serving, their pods run on.
			all = append(all, err)
			stop()
		}
	}
	return errors.Join(all...)
}

// startFleetNode builds node n's stack over its share of base, as run
// does for the one node, and returns its engine and the function that
// serves it until ctx ends.
func startFleetNode(ctx context.Context, n *fleetNode, base *cri.Runtime, ver cri.VersionInfo, rd cri.Readiness, health http.Handler) (*agent, func() error, error) {
	ctx = log.WithLogger(ctx, log.G(ctx).WithField("node", n.spec.Name))
	view := cri.NodeView{Node: n.spec.RuntimeNode(), PodLogDir: n.o.podLogDir, Recorder: n.recorder}
	if n.pods != nil {
		view.CgroupParent, view.PodCgroups = n.pods.PodCgroup, n.pods
	}
	rt, err := base.ForNode(view)
	if err != nil {
		return nil, nil, err
	}
	n.nodeCfg.RuntimeVersion = ver
	nodeObj, err := nodestatus.BuildNode(n.nodeCfg, rd, time.Now())
	if err != nil {
		return nil, nil, err
	}
	tlsOpts, auth, err := nodeAPISecurity(ctx, n.o, n.clients)
	if err != nil {
		return nil, nil, err
	}
	podInf := vknode.NewPodInformer(n.clients.core, n.spec.Name, time.Minute)
	a, err := startEngine(ctx, n.o, n.clients, rt, ver, nodeObj, n.recorder, n.pods, n.metrics, podInf)
	if err != nil {
		return nil, nil, err
	}
	// Before the informer runs (vknode.New's node does): no pod was
	// admitted yet.
	n.ports.Watch(a.engine.HoldingPods)
	if n.o.readOnlyPort > 0 {
		ro := nodeapi.ReadOnly(a.mux, health)
		if _, err := nodeapi.ServeReadOnly(ctx, net.JoinHostPort(n.o.address, strconv.Itoa(n.o.readOnlyPort)), ro); err != nil {
			return nil, nil, err
		}
	}
	vn, err := vknode.New(vknode.Config{
		Nodes: n.clients.nodes, Leases: n.clients.leases, Node: nodeObj, Provider: a.provider, NodeProvider: a.nodeProvider, Recorder: n.recorder,
		Mux: a.mux, ListenAddr: net.JoinHostPort(n.o.address, fmt.Sprint(n.o.port)), TLS: tlsOpts, Auth: auth.Wrap, Workers: 10,
		StatusReport: n.o.nodeStatusReportFrequency, Watched: a.nodes.Watched, PodInformer: podInf,
		PodClient: podwriter.NewDeleteGuard(n.clients.core, podInf.Lister(), a.provider.DeletePod, a.statusWrites),
	})
	if err != nil {
		return nil, nil, err
	}
	n.eb.StartRecordingToSink(&corev1client.EventSinkImpl{Interface: n.clients.events.Events("")})
	return a, func() error { return serveNode(ctx, n.o, vn, a) }, nil
}

// sharedImageGC is the process' image collector over the base runtime
// (package images): the images and the containers that use them are the
// one runtime's, so one collector lists them and removes the unused ones
// for every node. Each node reports its list as status.images and its
// eviction manager reclaims through it (startGC); its events are recorded
// on every node (the image filesystem is every node's), its metrics are
// the process' (node 0's /metrics, as the CRI calls').
func sharedImageGC(o *options, base *cri.Runtime, nodes []*fleetNode) (*images.Manager, error) {
	return images.New(images.Config{Policy: o.gc.image, Runtime: base, Recorder: everyNode(nodes), NodeRef: nodeRef(nodes[0].spec.Name),
		FsStats:        func(ctx context.Context) (*statsapi.FsStats, error) { return stats.ImageFsStats(ctx, base) },
		ObserveRemoved: nodes[0].metrics.ObserveImageRemoved, ObserveCollection: nodes[0].metrics.ObserveImageGC})
}

// nodeRef is the kubelet's reference to node name in its events: the
// name doubles as the UID.
func nodeRef(name string) *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Node", Name: name, UID: types.UID(name)}
}

// everyNode records an event about the machine on each node's own Node,
// with that node's recorder, whatever object it is given.
type everyNode []*fleetNode

var _ images.EventRecorder = everyNode(nil)

func (e everyNode) Eventf(_ runtime.Object, eventtype, reason, messageFmt string, args ...interface{}) {
	for _, n := range e {
		n.recorder.Eventf(nodeRef(n.spec.Name), eventtype, reason, messageFmt, args...)
	}
}

// namedCheck is one node's health check.
type namedCheck struct {
	node  string
	check func() error
}

// allOf passes when every node's check passes; it names the failing ones.
func allOf(checks []namedCheck) func() error {
	return func() error {
		var failed []string
		for _, c := range checks {
			if err := c.check(); err != nil {
				failed = append(failed, c.node+": "+err.Error())
			}
		}
		if len(failed) > 0 {
			return errors.New(strings.Join(failed, "; "))
		}
		return nil
	}
}

// runtimeWaker wakes the PLEG (or the fleet's shared walk) on containerd's
// task events (cri/taskevents).
func runtimeWaker(o *options, wake chan<- struct{}) *taskevents.Waker {
	return &taskevents.Waker{Endpoint: o.criEndpoint, Namespace: "k8s.io", Wake: wake, Settle: []time.Duration{10 * time.Millisecond, 30 * time.Millisecond, 100 * time.Millisecond}, Retry: 5 * time.Second, Clock: clock.RealClock{}}
}
