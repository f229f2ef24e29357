package nodeagent

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/crivk/crivk/apiobjects"
	"github.com/crivk/crivk/credentialprovider"
	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/devicemanager"
	"github.com/crivk/crivk/eviction"
	"github.com/crivk/crivk/internal/vknode"
	"github.com/crivk/crivk/lifecycle"
	"github.com/crivk/crivk/lifecycle/pleg"
	"github.com/crivk/crivk/lifecycle/volume"
	"github.com/crivk/crivk/nodeapi"
	"github.com/crivk/crivk/nodeapi/stats"
	"github.com/crivk/crivk/nodestatus"
	"github.com/crivk/crivk/podwriter"
	"github.com/crivk/crivk/provider"
	"github.com/crivk/crivk/staticpods"
	"github.com/crivk/crivk/userns"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// agent is what startEngine started, for the node controllers.
type agent struct {
	engine       *lifecycle.Engine
	provider     *provider.Provider
	nodeProvider *nodestatus.NodeProvider
	objects      *apiobjects.Reader
	nodes        *nodestatus.View
	mux          *http.ServeMux
	// statusWrites is shared by the deletion path and virtual-kubelet's
	// status writes (podwriter.DeleteGuard).
	statusWrites *podwriter.StatusWrites
	// relist is the runtime's relist loop (the PLEG); its Healthy is the
	// health endpoint's runtime check.
	relist *pleg.PLEG
	// plugins are the CSI and DRA plugins registered through
	// <root-dir>/plugins_registry; nil for a node of many (startPlugins).
	plugins *nodePlugins
}

// startEngine builds the engine with its volumes, probes, PLEG (woken by
// containerd's task events), node provider, eviction manager, garbage
// collectors, static pods and log rotation, and starts their loops. It is
// long because construction has one order (the eviction manager before the
// engine that asks it, the engine before the PLEG, the collectors and the
// mirror client that ask the engine); each step is a call into its package.
func startEngine(ctx context.Context, n *node, rt *cri.Runtime, ver cri.VersionInfo, nodeObj *v1.Node, podInf vknode.PodInformer) (*agent, error) {
	o, clients, recorder, pods, agentMetrics := n.o, n.clients, n.recorder, n.pods, n.metrics
	a := &agent{mux: http.NewServeMux(), statusWrites: podwriter.NewStatusWrites()}
	apiPods := podInf.Lister()
	cache := pleg.NewCache()
	// Volumes: the objects pods reference are read with least privilege
	// (per-object watches, docs/rbac.md).
	a.objects = apiobjects.New(clients.core, clock.RealClock{})
	go a.objects.Run(ctx)
	// CSI and DRA drivers register through <root-dir>/plugins_registry
	// (pluginmanager); the volume manager reaches the CSI drivers. Not for
	// a node of many: one inotify instance each would exhaust the user's
	// (128 by default) at the fleet's sizes, and no driver's DaemonSet
	// knows a node's <root-dir>/nodes/<name>.
	var csiDrivers volume.CSI
	if !n.spec.Multi {
		var err error
		if a.plugins, err = startPlugins(ctx, o.RootDir, o.NodeName, clients.core, clients.storage); err != nil {
			return nil, err
		}
		csiDrivers = a.plugins.csi
	}
	allocatable := nodeObj.Status.Allocatable.DeepCopy()
	volumes, err := volume.New(volume.Config{
		RootDir: o.RootDir, Objects: a.objects,
		NodeAllocatable: func() v1.ResourceList { return allocatable },
		CSI:             csiDrivers, NodeName: o.NodeName,
	})
	if err != nil {
		return nil, err
	}
	probeMetrics := nodeapi.NewProbeMetrics()
	// Admission and the node status loop see the node as the API has it
	// (taints and labels set by others included) through a watch of the
	// node's own object, as the kubelet's node informer (nodestatus.View).
	nodes := nodestatus.NewView(nodeObj, ownNode(clients, o.NodeName))
	go nodes.Run(ctx, nodes.ListWatch(clients.core, o.NodeName))
	a.nodes = nodes
	// The node's events carry its UID once the watch has the Node (the
	// kubelet's nodeRefWithUID reads its node lister).
	n.ref.ResolveFrom(func() types.UID {
		if nd, ok := nodes.Watched(); ok {
			return nd.UID
		}
		return ""
	})
	var podCgroups lifecycle.PodCgroups
	if pods != nil {
		podCgroups = pods
	}
	st, err := nodeStats(n, rt)
	if err != nil {
		return nil, err
	}
	gcs := &reclaim{}
	evictions, err := newEvictionManager(n, st, gcs)
	if err != nil {
		return nil, err
	}
	// Static pods and their mirror pods, kept apart from virtual-kubelet's
	// pods (staticpods). The mirror client runs without
	// --pod-manifest-path too: it deletes mirror pods of no static pod.
	static := staticpods.NewSource(staticpods.SourceConfig{Path: o.PodManifestPath, NodeName: o.NodeName, Period: o.FileCheckFrequency})
	mirrors, err := staticpods.NewMirrors(staticpods.MirrorConfig{Client: clients.core, Pods: apiPods, NodeName: o.NodeName, Static: static,
		// The engine is made below, before the mirror client runs.
		PodStatus: func(uid types.UID) *v1.Pod { return a.engine.PublishedPod(uid) },
		Running: func(ctx context.Context, uid types.UID) (bool, error) {
			s, err := rt.Snapshot(ctx)
			if err != nil {
				return false, err
			}
			return s.Running(uid), nil
		},
		NodeUID: func() (types.UID, error) {
			if n, ok := nodes.Watched(); ok {
				return n.UID, nil
			}
			return "", nodestatus.ErrNodeNotSeen
		}})
	if err != nil {
		return nil, err
	}
	// Device plugins register on <root-dir>/device-plugins/kubelet.sock
	// (devicemanager).
	devices, err := devicemanager.New(devicemanager.Config{Dir: filepath.Join(o.RootDir, "device-plugins"), Runtime: rt.Services()})
	if err != nil {
		return nil, err
	}
	if err := devices.Start(ctx); err != nil {
		return nil, err
	}
	a.engine, err = lifecycle.NewEngine(ctx, lifecycle.Config{
		Devices:    devices,
		Pressure:   evictions,
		PodCgroups: podCgroups,
		Node:       nodes.Node,
		// The node's user namespace ranges, released with its pods.
		UserNamespaces: engineUserns(n.userns),
		Sysctls:        o.sysctls,
		// The node provider is made after the engine (it needs the PLEG,
		// which needs the engine) but before anything runs.
		NetworkError: func() error { return a.nodeProvider.NetworkError() },
		APIPod: func(namespace, name string) *v1.Pod {
			p, err := apiPods.Pods(namespace).Get(name)
			if err != nil {
				return nil
			}
			return p
		},
		// Runtime pods of no API pod are cleaned up once the informer
		// and the static pods synced (the kubelet's sourcesReady).
		APIPods:       staticpods.WithStatic(func() ([]*v1.Pod, error) { return apiPods.List(labels.Everything()) }, static),
		APIPodsSynced: lifecycle.SourcesReady(podInf.Informer().HasSynced, static.HasSynced),
		Runtime:       rt,
		Cache:         cache,
		RuntimeName:   ver.RuntimeName,
		NodeIP:        o.NodeIP,
		SyncInterval:  o.SyncInterval,
		OnTerminated: staticpods.OnTerminated(podwriter.DeleteOnTerminated(clients.core, apiPods,
			a.statusWrites), static, mirrors),
		Recorder:           recorder,
		RootDir:            o.RootDir,
		Objects:            a.objects,
		ResourceClaims:     clients.resourceClaims,
		Volumes:            volumes,
		NodeAllocatable:    nodeObj.Status.Allocatable,
		ClusterDomain:      o.ClusterDomain,
		ProbeRuntime:       rt,
		ProbeMetrics:       probeMetrics,
		ObserveSync:        agentMetrics.ObserveSync,
		ObservePodStart:    agentMetrics.ObservePodStart,
		ObservePodStartSLI: agentMetrics.ObservePodStartSLI,
		ObservePreemption:  agentMetrics.ObservePreemption,
		// The container GC's per-container limit, kept by every sync too.
		MaxDeadPerContainer:       o.GC.Container.MaxPerPodContainer,
		MaxContainerRestartPeriod: o.MaxContainerRestartPeriod,
		Host:                      n.host,
	})
	if err != nil {
		return nil, err
	}
	rt.SetRuntimeHelper(a.engine.RuntimeHelper())
	if o.credentialPlugins != nil {
		log.G(ctx).WithField("providers", o.credentialPlugins.Names()).WithField("configHash", o.credentialPlugins.ConfigHash()).
			Info("image credential provider plugins registered")
		// The image credential providers, as this node: its identity
		// reads its pods' service accounts (the kubelet GETs them) and
		// asks for tokens through the volumes' token cache (the kubelet's
		// one token manager).
		rt.SetCredentialProviders(o.credentialPlugins.Keyring(credentialprovider.Access{
			ServiceAccount: func(ctx context.Context, namespace, name string) (*v1.ServiceAccount, error) {
				return clients.core.ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
			},
			Token: volumes.ServiceAccountToken,
		}))
	}
	agentMetrics.WatchPods(a.engine.PodCounts)
	wake := make(chan struct{}, 1)
	if n.relistFeed == nil && o.RuntimeEvents && strings.HasPrefix(o.CRIEndpoint, "unix://") {
		go runtimeWaker(o, wake).Run(ctx)
	}
	relist, err := pleg.New(pleg.Config{Runtime: rt, Cache: cache, Period: o.RelistPeriod, Wake: wake, WakeSpacing: o.WakeSpacing, Feed: n.relistFeed, OnChange: a.engine.Kick,
		ObserveRelist: agentMetrics.ObserveRelist, ObserveRunning: agentMetrics.ObserveRunning})
	if err != nil {
		return nil, err
	}
	// Every node status period the conditions are compared with the
	// watched node, not a GET: the kubelet's tryUpdateNodeStatus reads
	// its first try from the node lister too.
	a.nodeProvider = nodestatus.NewNodeProvider(rt, nodeObj, o.NodeStatusUpdateFrequency, nodes.APINode, recorder, n.ref, evictions, relist.Healthy)
	a.nodeProvider.SetDevicePlugins(devices.Capacity)
	a.relist = relist
	if gcs.containers, gcs.images, err = startGC(ctx, n, rt, a.engine, a.nodeProvider); err != nil {
		return nil, err
	}
	go relist.Run(ctx)
	logMax := resource.MustParse(o.LogMaxSize)
	go rt.RunLogRotation(ctx, cri.LogRotation{MaxSize: logMax.Value(), MaxFiles: o.LogMaxFiles, Workers: o.LogMaxWorkers, Interval: o.LogMonitorInterval})
	go a.engine.Run(ctx)
	go evictions.Run(ctx, a.engine)
	go static.Run(ctx, a.engine)
	go mirrors.Run(ctx)
	a.provider = provider.New(staticpods.Apart(a.engine, mirrors), apiPods, podwriter.WriteTerminal(clients.core, apiPods, a.statusWrites))
	nodeAPI, err := nodeapi.New(nodeapi.Config{Engine: a.engine,
		APIPods:   func() ([]*v1.Pod, error) { return apiPods.List(labels.Everything()) },
		PodStatus: rt, Streams: rt.Services(), LogFollow: rt.Services(), Stats: st, KubeletConfig: o.Config.Effective,
		Metrics: agentMetrics.Handler(), ProbeMetrics: probeMetrics})
	if err != nil {
		return nil, err
	}
	a.mux.Handle("/", nodeAPI)
	a.objects.SetKick(func(namespace string) []*v1.Pod {
		pods, _ := apiPods.Pods(namespace).List(labels.Everything())
		return pods
	}, a.engine.Kick)
	if err := watchPods(ctx, podInf, a, mirrors); err != nil {
		return nil, err
	}
	return a, nil
}

// watchPods adds the engine's, the deletion path's and the mirror
// client's handlers to the node's pod informer, before it runs.
// engineUserns is un as the engine takes it: nil (no allocator, the gate
// off) stays a nil interface.
func engineUserns(un *userns.Manager) lifecycle.UserNamespaces {
	if un == nil {
		return nil
	}
	return un
}

func watchPods(ctx context.Context, podInf vknode.PodInformer, a *agent, mirrors *staticpods.Mirrors) error {
	if _, err := podInf.Informer().AddEventHandler(vknode.ReadinessGateKicks(a.engine.Kick)); err != nil {
		log.L.WithError(err).Warn("readiness gates are seen at each pod's resync only")
	}
	if _, err := podInf.Informer().AddEventHandler(vknode.StatusReconciles(a.engine.ReconcileStatus)); err != nil {
		return err
	}
	// A pod-level in-place resize, which virtual-kubelet does not hand on.
	if _, err := podInf.Informer().AddEventHandler(vknode.PodResourcesUpdates(func(p *v1.Pod) { _ = a.provider.UpdatePod(ctx, p) })); err != nil {
		return err
	}
	if _, err := podInf.Informer().AddEventHandler(vknode.DeletedPodKills(func(p *v1.Pod) { a.engine.Kill(ctx, p) })); err != nil {
		return err
	}
	if _, err := podInf.Informer().AddEventHandler(podwriter.ForgetDeleted(a.statusWrites)); err != nil {
		return err
	}
	if _, err := podInf.Informer().AddEventHandler(mirrors.Handler()); err != nil {
		return err
	}
	// A static pod is synced again once its mirror pod is seen: its status
	// waits for the mirror's right after a restart (lifecycle's
	// holdStaticStatus).
	if _, err := podInf.Informer().AddEventHandler(staticpods.MirrorSeenKicks(a.engine.Kick)); err != nil {
		return err
	}
	return nil
}

// nodeStats is the node's one statistics provider (nodeapi/stats): the
// node API's /stats/summary, /metrics/resource and /metrics/cadvisor and
// the eviction manager's observations, so the volumes are walked and the
// CPU rates sampled once per node. Its summary has the containers' logs
// (the pod log directory); with pod cgroups (pods non-nil) kubepods, the
// processes and /metrics/cadvisor.
func nodeStats(n *node, rt *cri.Runtime) (stats.Handlers, error) {
	cfg := stats.Config{NodeName: n.o.NodeName, RootDir: n.o.RootDir, PodLogDir: n.o.PodLogDir, Runtime: rt.Services(), ImageFs: rt,
		MemoryCapacity: nodestatus.MemoryCapacity, Node: n.o.Cgroups, Owned: rt.Owned(), Sandboxes: rt.Services(), SandboxImage: rt}
	if n.pods != nil {
		cfg.Processes, cfg.PodsCgroup, cfg.Cgroups = n.pods, n.pods, n.pods
	}
	return stats.New(cfg)
}

// newEvictionManager is the eviction manager of the settings, observing
// the node through its statistics (nodeStats). With pod cgroups (pods
// non-nil) kubepods bounds the pods, as the kubelet's
// --enforce-node-allocatable=pods: the summary has its "pods" system
// container, and allocatableMemory.available is observed and twinned with
// each hard memory.available threshold. A node of many measures
// memory.available on its part of the machine too
// (eviction.Config.MemoryShare). Under disk pressure it reclaims through
// the garbage collectors (gcs, bound by startGC).
func newEvictionManager(n *node, st stats.Handlers, gcs *reclaim) (*eviction.Manager, error) {
	o, recorder, agentMetrics, pods := n.o, n.recorder, n.metrics, n.pods
	var podsMemcg string
	if pods != nil {
		podsMemcg, _ = pods.PodsDir("memory")
	}
	// A node of many: memory.available is also its part of the machine's
	// memory less its own pods' working set (docs/scale.md).
	memoryShare, err := n.portion.MemoryShare()
	if err != nil {
		return nil, err
	}
	return eviction.New(eviction.Config{
		Thresholds: o.evictionThresholds, PressureTransitionPeriod: o.EvictionPressureTransition,
		MaxPodGracePeriodSeconds: o.EvictionMaxPodGracePeriod, MonitoringPeriod: o.EvictionMonitoringPeriod,
		LocalStorageCapacityIsolation: true, Summary: st.Summarize, Recorder: recorder, NodeRef: n.ref.NameOnly(),
		ObserveEviction: agentMetrics.ObserveEviction, ObserveStatsAge: agentMetrics.ObserveEvictionStatsAge,
		ImageGC: gcs, ContainerGC: gcs, KernelMemcgNotification: o.KernelMemcgNotification, MemoryCgroup: o.Cgroups.MemcgDir(),
		EnforceNodeAllocatable: pods != nil, PodsMemoryCgroup: podsMemcg, MemoryShare: memoryShare,
	})
}

// serveNode runs the node and pod controllers until ctx ends.
func serveNode(ctx context.Context, o *Settings, n *vknode.Node, a *agent) error {
	go func() {
		if err := n.WaitReady(ctx); err != nil {
			return
		}
		log.G(ctx).WithField("address", o.NodeIP).Info("node registered and running")
	}()
	err := n.Run(ctx)
	if ctx.Err() != nil {
		// SIGINT/SIGTERM: stop serving; the pods keep running and are
		// picked up again at the next start.
		log.G(ctx).Info("shutting down; pods are left running")
		return nil
	}
	return err
}
