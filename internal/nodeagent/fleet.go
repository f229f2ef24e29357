package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
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
	"github.com/crivk/crivk/internal/vknode"
	"github.com/crivk/crivk/lifecycle"
	"github.com/crivk/crivk/lifecycle/pleg"
	"github.com/crivk/crivk/metrics"
	"github.com/crivk/crivk/nodeapi"
	"github.com/crivk/crivk/nodeapi/stats"
	"github.com/crivk/crivk/nodestatus"
	"github.com/crivk/crivk/podwriter"
	"github.com/crivk/crivk/runtimeclass"
	"github.com/crivk/crivk/userns"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"
)

// fleetSpecs is the nodes this process serves (internal/fleet): one, the
// settings unchanged (Spec.Multi false), without --node-count.
func (o *Settings) fleetSpecs() ([]fleet.Spec, error) {
	shares, err := fleet.ParseShares(o.NodeShares)
	if err != nil {
		return nil, err
	}
	return fleet.Specs(fleet.Settings{Count: o.NodeCount, Name: o.NodeName, Shares: shares,
		Port: o.Port, ReadOnlyPort: o.ReadOnlyPort, HealthzPort: o.HealthzPort,
		RootDir: o.RootDir, PodLogDir: o.PodLogDir, CgroupRoot: o.CgroupRoot,
		Kubeconfig: o.Kubeconfig, Bootstrap: o.BootstrapKubeconfig != "",
		Labels: o.nodeLabels, Taints: o.taints})
}

// nodeSettings is node s's copy of the process' settings: its name,
// ports, directories, cgroup root, kubeconfig, labels and taints
// (fleet.Spec's own copies); every other field is only read after
// Validate. Its NodeCount stays the process'. For a single node (a count
// of 1) it equals the process' settings.
func nodeSettings(o *Settings, s fleet.Spec) *Settings {
	n := *o
	n.NodeName, n.Port, n.ReadOnlyPort = s.Name, s.Port, s.ReadOnlyPort
	n.RootDir, n.PodLogDir, n.CgroupRoot, n.Kubeconfig = s.RootDir, s.PodLogDir, s.CgroupRoot, s.Kubeconfig
	n.nodeLabels, n.taints = s.Labels, s.Taints
	return &n
}

// portionOf is node s's part of the machine: its weight of the total, or
// the whole for a single node (a weight of 0 of 0).
func portionOf(s fleet.Spec) nodestatus.Portion {
	return nodestatus.Portion{Weight: s.Weight, Total: s.TotalWeight}
}

// node is one node of the process: what newNode made before the runtime
// is up, and what the process' shared parts give it (startShared).
type node struct {
	spec     fleet.Spec
	o        *Settings
	clients  *apiClients
	pods     *cm.Manager // nil with --cgroups-per-qos=false
	eb       record.EventBroadcaster
	recorder record.EventRecorder
	// ref is what the node's events are recorded on: its name, and its
	// UID once the node watch has it (resolved in the agent's wiring).
	ref      *nodestatus.NodeRef
	metrics  *metrics.Agent
	nodeCfg  nodestatus.NodeConfig
	awaiting *nodestatus.NotReadyReporter
	// portion is the node's part of the machine (its fleet.Spec weight):
	// setupCgroups bounds its kubepods by it, its Node's capacity is
	// scaled by it and its eviction manager measures memory.available
	// against it; the whole for a single node.
	portion nodestatus.Portion
	// ports is a node of many's view of the host's ports (its engine's
	// lifecycle.Config.Host), watching the engine once it exists; host is
	// the same view as the engine's admitter. Both nil for a single node,
	// which refuses no port of its own (fleet.HostPorts).
	ports *fleet.NodePorts
	host  lifecycle.HostAdmitter
	// relistFeed is a node of many's share of the process' one walk of
	// the runtime (pleg.Shared); nil for a single node, whose PLEG lists
	// the runtime and hears its task events itself.
	relistFeed *pleg.Feed
	// sharedImages is the process' image collector for a node of many,
	// run by runNodes; nil for a single node, which makes and runs its
	// own (startGC).
	sharedImages *images.Manager
	// userns allocates the user namespaces of the node's pods from the
	// process' pool (userNamespacePool); nil when the pool could not be
	// made, usernsErr says why (its pods with hostUsers: false are
	// refused).
	userns    *userns.Manager
	usernsErr error
}

// usernsAllocator is the node's allocator as cri takes it.
func (n *node) usernsAllocator() cri.UserNamespaces {
	if n.userns != nil {
		return n.userns
	}
	return usernsRefusal{err: n.usernsErr}
}

// wrap names the node in err for a node of many; a single node's errors
// are the process' own.
func (n *node) wrap(err error) error {
	if err == nil || !n.spec.Multi {
		return err
	}
	return fmt.Errorf("node %s: %w", n.spec.Name, err)
}

// runNodes runs the nodes of the settings (docs/scale.md), one or
// --node-count, after the process-wide phases, by one path: a single node
// is a fleet of one (fleet.Specs, Spec.Multi false). In order: the host's
// directories and node IP; each node's API clients, pod cgroup tree and
// NotReady registration (newNode); one runtime connection, waited for
// while every node is registered NotReady, refused for many nodes while it
// holds a single-node crivk's sandboxes (fleet.RefuseUnlabelled); for many
// nodes the parts they share (startShared: one walk of the runtime, one
// image collector); then each node's stack (startNode) until ctx ends or
// a node fails. What differs between one node and many is data on
// Spec.Multi: a single node's runtime is the base itself (it owns every
// crivk sandbox, labelled or not, so it adopts those of earlier versions),
// with its pod cgroups and pod log directory; its PLEG lists the runtime
// and is woken by its own task-event stream; it runs its own image
// collector and refuses no host port of its own (no fleet.HostPorts).
func runNodes(ctx context.Context, o *Settings, health *healthz.Checks, contact *healthz.Contact) error {
	specs, err := o.fleetSpecs()
	if err != nil {
		return err
	}
	if err := prepareHost(ctx, o); err != nil {
		return err
	}
	var hostPorts *fleet.HostPorts
	if specs[0].Multi {
		// One machine, one set of ports: every node's admission refuses
		// a host port another node's pod holds, or the process' own
		// listeners (docs/scale.md).
		hostPorts = &fleet.HostPorts{}
		hostPorts.Listening(fleet.Listeners(specs, fleet.Addresses{Node: o.Address, HealthzPort: o.HealthzPort, HealthzBindAddress: o.HealthzBindAddress, Profiling: o.ProfilingAddress}))
	}
	pool, perr := userNamespacePool(o, len(specs))
	if perr != nil {
		perr = fmt.Errorf("user namespaces: %w", perr)
		log.G(ctx).WithError(perr).Warn("pods with hostUsers: false will be refused")
	}
	nodes := make([]*node, len(specs))
	for i, s := range specs {
		if nodes[i], err = newNode(ctx, o, s, hostPorts, contact); err != nil {
			return err
		}
		if pool != nil {
			nodes[i].userns = pool.Manager(filepath.Join(nodes[i].o.RootDir, "pods"))
		} else {
			nodes[i].usernsErr = perr
		}
	}
	contact.Start()
	base, ver, rd, err := connectNodesRuntime(ctx, o, nodes)
	if err != nil {
		return err
	}
	defer base.Close()
	if err := fleet.RefuseUnlabelled(ctx, specs, base); err != nil {
		return err
	}
	base.SetRuntimeClasses(runtimeclass.Start(ctx, nodes[0].clients.runtimeClasses))
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	if specs[0].Multi {
		if err := startShared(ctx, o, base, nodes); err != nil {
			return err
		}
	}
	return serveNodes(ctx, stop, o, nodes, base, ver, rd, health)
}

// newNode makes node s's API clients, pod cgroup tree, event recorder,
// metrics and NotReady reporter: all a node needs before the runtime is
// up.
func newNode(ctx context.Context, o *Settings, s fleet.Spec, hostPorts *fleet.HostPorts, contact *healthz.Contact) (*node, error) {
	n := &node{spec: s, o: nodeSettings(o, s), metrics: metrics.NewAgent(o.AgentVersion), portion: portionOf(s)}
	if hostPorts != nil {
		n.ports = hostPorts.Node(s.Name)
		n.host = n.ports
	}
	if s.Index == 0 {
		// client-go's metrics are process-wide: node 0's /metrics,
		// counted from the first API request on.
		n.metrics.RegisterClientMetrics()
	}
	for _, d := range []string{n.o.RootDir, n.o.PodLogDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, n.wrap(fmt.Errorf("creating %s: %w", d, err))
		}
	}
	nctx := log.WithLogger(ctx, log.G(ctx).WithField("node", s.Name))
	var err error
	if n.clients, err = connectAPI(nctx, n.o, contact.WrapTransport); err != nil {
		return nil, n.wrap(err)
	}
	if n.pods, err = setupCgroups(nctx, n.o, n.portion); err != nil {
		return nil, n.wrap(err)
	}
	n.eb = record.NewBroadcaster()
	n.recorder = n.eb.NewRecorder(scheme.Scheme, v1.EventSource{Component: "kubelet", Host: s.Name})
	n.ref = nodestatus.NewNodeRef(s.Name)
	n.nodeCfg = nodestatus.NodeConfig{
		Name: s.Name, InternalIP: o.NodeIP, KubeletPort: int32(s.Port), MaxPods: o.MaxPods,
		RootDir: n.o.RootDir, AgentVersion: o.AgentVersion, Reservations: o.reservations,
		Labels: s.Labels, Taints: s.Taints, Portion: n.portion,
	}
	cfg := n.nodeCfg
	// While the runtime is not up, the node is registered NotReady.
	n.awaiting = &nodestatus.NotReadyReporter{
		Name: s.Name, Nodes: n.clients.nodes.Nodes(), Period: o.NodeStatusUpdateFrequency, Now: time.Now,
		Build: func(rd cri.Readiness, now time.Time) (*v1.Node, error) { return nodestatus.BuildNode(cfg, rd, now) },
	}
	return n, nil
}

// connectNodesRuntime is the one runtime connection, waited for while
// every node is registered NotReady. A single node's pod cgroups are the
// base runtime's own (it is the node's runtime); each node of many gets
// its own in its share (nodeRuntime). The CRI call metrics of the one
// connection are the process': node 0's.
func connectNodesRuntime(ctx context.Context, o *Settings, nodes []*node) (*cri.Runtime, cri.VersionInfo, cri.Readiness, error) {
	var pods *cm.Manager
	var un cri.UserNamespaces
	if !nodes[0].spec.Multi {
		pods, un = nodes[0].pods, nodes[0].usernsAllocator()
	}
	return connectRuntime(ctx, o, nodes[0].recorder, pods, un, nodes[0].metrics, func(ctx context.Context) {
		var wg sync.WaitGroup
		for _, n := range nodes {
			wg.Add(1)
			go func() { defer wg.Done(); n.awaiting.Run(ctx) }()
		}
		wg.Wait()
	})
}

// startShared starts what the nodes of many share: one walk of the
// runtime per relist period, woken by one task-event stream, from which
// each node's PLEG relists (pleg.Shared), and one image collector (the
// images are the runtime's, not a node's).
func startShared(ctx context.Context, o *Settings, base *cri.Runtime, nodes []*node) error {
	wake := make(chan struct{}, 1)
	walk, err := pleg.NewShared(pleg.SharedConfig{Runtime: base, Period: o.RelistPeriod, Wake: wake, WakeSpacing: o.WakeSpacing})
	if err != nil {
		return err
	}
	imageGC, err := sharedImageGC(o, base, nodes)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		n.relistFeed = walk.Feed(n.spec.Name)
		n.sharedImages = imageGC
	}
	go imageGC.Run(ctx)
	if o.RuntimeEvents && strings.HasPrefix(o.CRIEndpoint, "unix://") {
		go runtimeWaker(o, wake).Run(ctx)
	}
	go walk.Run(ctx)
	return nil
}

// serveNodes starts every node's stack and serves them until ctx ends or
// one fails: one node failing stops the process (stop), as a single-node
// crivk exits; the others stop serving, their pods run on.
func serveNodes(ctx context.Context, stop func(), o *Settings, nodes []*node, base *cri.Runtime, ver cri.VersionInfo, rd cri.Readiness, health *healthz.Checks) error {
	healthHandler := health.Handler(func(err error) { log.G(ctx).WithError(err).Warn("health check failed") })
	var runtimeChecks, loopChecks []namedCheck
	errs := make(chan error, len(nodes))
	for _, n := range nodes {
		a, serve, err := startNode(ctx, n, base, ver, rd, healthHandler)
		if err != nil {
			return n.wrap(err)
		}
		runtimeChecks = append(runtimeChecks, namedCheck{n.spec.Name, a.relist.Healthy})
		loopChecks = append(loopChecks, namedCheck{n.spec.Name, healthz.SyncLoopCheck(nil, a.engine.LatestLoopEntryTime, o.SyncInterval)})
		go func() {
			defer n.eb.Shutdown()
			errs <- n.wrap(serve())
		}()
	}
	health.Set(healthz.CheckRuntime, allOf(runtimeChecks))
	health.Set(healthz.CheckSyncLoop, allOf(loopChecks))
	var all []error
	for range nodes {
		if err := <-errs; err != nil {
			all = append(all, err)
			stop()
		}
	}
	return errors.Join(all...)
}

// nodeRuntime is node n's runtime: for a single node the base itself,
// which owns every crivk sandbox, labelled or not (no node label or
// selector), and so adopts those of earlier versions; for a node of many
// its share of the base (cri.Runtime.ForNode: its node label, pod log
// directory, pod cgroups and recorder).
func nodeRuntime(base *cri.Runtime, n *node) (*cri.Runtime, error) {
	if !n.spec.Multi {
		return base, nil
	}
	view := cri.NodeView{Node: n.spec.RuntimeNode(), PodLogDir: n.o.PodLogDir, Recorder: n.recorder}
	if n.pods != nil {
		view.CgroupParent, view.PodCgroups = n.pods.PodCgroup, n.pods
	}
	view.UserNamespaces = n.usernsAllocator()
	return base.ForNode(view)
}

// startNode builds node n's stack over its runtime (nodeRuntime): its
// Node object, the node API's security, its pod informer, engine and
// loops (startEngine), its read-only port and virtual-kubelet's node and
// pod controllers, and returns its engine and the function that serves it
// until ctx ends.
func startNode(ctx context.Context, n *node, base *cri.Runtime, ver cri.VersionInfo, rd cri.Readiness, health http.Handler) (*agent, func() error, error) {
	ctx = log.WithLogger(ctx, log.G(ctx).WithField("node", n.spec.Name))
	rt, err := nodeRuntime(base, n)
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
	// The node's pod informer (only pods bound to this node), run by the
	// virtual-kubelet node; the engine, the provider and the objects read
	// its view.
	podInf := vknode.NewPodInformer(n.clients.core, n.spec.Name, time.Minute)
	a, err := startEngine(ctx, n, rt, ver, nodeObj, podInf)
	if err != nil {
		return nil, nil, err
	}
	if n.ports != nil {
		// Before the informer runs (vknode.New's node does): no pod was
		// admitted yet.
		n.ports.Watch(a.engine.HoldingPods)
	}
	if n.o.ReadOnlyPort > 0 {
		ro := nodeapi.ReadOnly(a.mux, health)
		if _, err := nodeapi.ServeReadOnly(ctx, net.JoinHostPort(n.o.Address, strconv.Itoa(n.o.ReadOnlyPort)), ro); err != nil {
			return nil, nil, err
		}
	}
	// Not nodeutil.NewNode: it lists and watches every ConfigMap, Secret
	// and Service of the cluster (internal/vknode).
	// The node API on its port, bound here so that a port in use stops
	// the start (nodeapi owns both servers and the mux).
	if _, err := nodeapi.ServeTLS(ctx, net.JoinHostPort(n.o.Address, strconv.Itoa(n.o.Port)), a.mux, auth.Wrap, tlsOpts); err != nil {
		return nil, nil, err
	}
	vn, err := vknode.New(vknode.Config{
		Nodes: n.clients.nodes, Leases: n.clients.leases, Node: nodeObj, Provider: a.provider, NodeProvider: a.nodeProvider, Recorder: n.recorder,
		Workers:      10,
		StatusReport: n.o.NodeStatusReportFrequency, Watched: a.nodes.Watched, PodInformer: podInf,
		// Removals with grace 0 become crivk's own termination: no
		// object goes before its containers stop (podwriter).
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
func sharedImageGC(o *Settings, base *cri.Runtime, nodes []*node) (*images.Manager, error) {
	return images.New(images.Config{Policy: o.GC.Image, Runtime: base, Recorder: everyNode(nodes), NodeRef: nodes[0].ref.NameOnly(), NodeRefWithUID: nodes[0].ref.WithUID,
		FsStats:        func(ctx context.Context) (*statsapi.FsStats, error) { return stats.ImageFsStats(ctx, base) },
		ObserveRemoved: nodes[0].metrics.ObserveImageRemoved, ObserveCollection: nodes[0].metrics.ObserveImageGC})
}

// everyNode records an event about the machine on each node's own Node,
// with that node's recorder, whatever node it is given: the reference of
// each is that node's of the same kind, with its UID when the one given
// has one (nodestatus.NodeRef.WithUID), else without (NameOnly).
type everyNode []*node

var _ images.EventRecorder = everyNode(nil)

func (e everyNode) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...interface{}) {
	withUID := false
	if ref, ok := obj.(*v1.ObjectReference); ok && ref.UID != "" {
		withUID = true
	}
	for _, n := range e {
		ref := n.ref.NameOnly()
		if withUID {
			ref = n.ref.WithUID()
		}
		n.recorder.Eventf(ref, eventtype, reason, messageFmt, args...)
	}
}

// namedCheck is one node's health check.
type namedCheck struct {
	node  string
	check func() error
}

// allOf passes when every node's check passes; it names the failing ones
// when there are several nodes, and returns a single node's error as is.
func allOf(checks []namedCheck) func() error {
	if len(checks) == 1 {
		return checks[0].check
	}
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

// runtimeWaker wakes a PLEG (a single node's, or the fleet's shared walk)
// on containerd's task events (cri/taskevents).
func runtimeWaker(o *Settings, wake chan<- struct{}) *taskevents.Waker {
	return &taskevents.Waker{Endpoint: o.CRIEndpoint, Namespace: "k8s.io", Wake: wake, Settle: []time.Duration{10 * time.Millisecond, 30 * time.Millisecond, 100 * time.Millisecond}, Retry: 5 * time.Second, Clock: clock.RealClock{}}
}
