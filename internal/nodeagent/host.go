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

	"github.com/crivk/crivk/certificate"
	"github.com/crivk/crivk/cm"
	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/cri/taskevents"
	"github.com/crivk/crivk/internal/debugserver"
	"github.com/crivk/crivk/internal/healthz"
	"github.com/crivk/crivk/internal/incluster"
	"github.com/crivk/crivk/internal/memrelease"
	"github.com/crivk/crivk/metrics"
	"github.com/crivk/crivk/nodestatus"
	"github.com/crivk/crivk/userns"
	"github.com/sirupsen/logrus"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	logruslogger "github.com/virtual-kubelet/virtual-kubelet/log/logrus"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Run is the node agent's life: it validates o, then runs the
// process-wide phases (tracing, profiling, logging, memory release, the
// /healthz endpoint) and the nodes (runNodes: one, or --node-count) until
// ctx ends, when it returns nil and leaves the pods running, or until a
// node fails.
func Run(ctx context.Context, o *Settings) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if o.Tracing {
		closeTraces, err := debugserver.EnableTracing(o.TraceFile)
		if err != nil {
			return err
		}
		defer func() {
			if err := closeTraces(); err != nil {
				log.G(ctx).WithError(err).Warn("closing --trace-file")
			}
		}()
	}
	if o.ProfilingAddress != "" {
		if err := debugserver.ServeProfiling(ctx, o.ProfilingAddress, o.Tracing); err != nil {
			return err
		}
	}
	ctx = setupLogging(ctx, o)
	if o.Cgroups.Version() == 1 {
		// Let through by --fail-cgroupv1=false: the kubelet's warning
		// (cm.CgroupV1DeprecatedWarning), which it also records as an event.
		log.G(ctx).Warn("cgroup v1 detected. cgroup v1 support is deprecated and will be removed in a future release. Please migrate to cgroup v2. More information at https://git.k8s.io/enhancements/keps/sig-node/5573-remove-cgroup-v1")
	}
	// The heap a burst of pod work leaves is returned once crivk is quiet
	// again, not at the runtime's forced collection up to two minutes later
	// (internal/memrelease).
	releaser, err := memrelease.New(memrelease.Config{})
	if err != nil {
		return err
	}
	go releaser.Run(ctx)
	// /healthz answers from the start; each check passes until what it
	// watches has started (internal/healthz).
	health := &healthz.Checks{}
	contact := healthz.NewContact(nil, 0)
	health.Set(healthz.CheckAPIServer, contact.Check)
	health.Set(healthz.CheckRuntime, nil)
	health.Set(healthz.CheckSyncLoop, nil)
	if o.HealthzPort > 0 {
		addr := net.JoinHostPort(o.HealthzBindAddress, strconv.Itoa(o.HealthzPort))
		if _, err := healthz.Serve(ctx, addr, health.Handler(func(err error) {
			log.G(ctx).WithError(err).Warn("health check failed")
		})); err != nil {
			return err
		}
	}
	return runNodes(ctx, o, health, contact)
}

// setupLogging configures logrus at --log-level with microsecond
// timestamps, as klog's: pod lifecycles are read across the agent's, the
// runtime's and the API server's logs.
func setupLogging(ctx context.Context, o *Settings) context.Context {
	lvl, _ := logrus.ParseLevel(o.LogLevel)
	logger := logrus.StandardLogger()
	logger.SetFormatter(&logrus.TextFormatter{FullTimestamp: true, TimestampFormat: "2006-01-02T15:04:05.000000Z07:00"})
	logger.SetLevel(lvl)
	log.L = logruslogger.FromLogrus(logrus.NewEntry(logger))
	return log.WithLogger(ctx, log.L.WithField("node", o.NodeName))
}

// prepareHost finds the node IP when not given, creates the root and pod
// log directories and sets crivk's own OOM score adjustment.
func prepareHost(ctx context.Context, o *Settings) error {
	setOOMScoreAdj(ctx, o.OOMScoreAdj)
	if o.NodeIP == "" {
		ip, err := nodestatus.DefaultNodeIP()
		if err != nil {
			return fmt.Errorf("--node-ip not given and none could be found: %w", err)
		}
		o.NodeIP = ip
	}
	for _, d := range []string{o.RootDir, o.PodLogDir, o.ContainerLogsDir} {
		if d == "" {
			continue
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	return nil
}

// setupCgroups makes the node's pod cgroup tree under --cgroup-root
// (package cm), bounded by the machine's capacity (nodestatus.MachineCapacity)
// less the reservations, of which a node of many gets its portion; nil with
// --cgroups-per-qos=false. A tree that cannot be made stops crivk, as the
// kubelet: pods would run without their pod-level limits.
func setupCgroups(ctx context.Context, o *Settings, portion nodestatus.Portion) (*cm.Manager, error) {
	if !o.CgroupsPerQOS {
		log.G(ctx).Warn("--cgroups-per-qos=false: no pod cgroups, only the containers' own limits apply")
		return nil, nil
	}
	capacity, err := nodestatus.MachineCapacity()
	if err != nil {
		return nil, err
	}
	if maxPID, err := cm.MaxPID("/proc"); err == nil {
		capacity["pid"] = *resource.NewQuantity(maxPID, resource.DecimalSI)
	}
	bound := portion.Of(o.reservations.PodsBound(capacity))
	m, err := cm.New(cm.Config{Root: o.CgroupRoot, PodsCPUMilli: bound.Cpu().MilliValue(), PodsMemory: bound.Memory().Value(),
		PodsPIDs: bound.Name("pid", resource.DecimalSI).Value(), PodPidsLimit: o.PodMaxPids, Host: o.Cgroups})
	if err != nil {
		return nil, err
	}
	if err := m.Start(); err != nil {
		return nil, fmt.Errorf("making the pod cgroup tree under %s: %w", o.CgroupRoot, err)
	}
	log.G(ctx).WithField("root", m.Root()).WithField("cgroupVersion", m.Version()).
		WithField("reservations", o.reservations.String()).Info("pod cgroup tree ready")
	return m, nil
}

// userNamespacePool is the process' user namespace IDs (package userns,
// the kubelet's userns manager): the machine's range (the `kubelet`
// user's subordinate range, or every ID from one pod's length up), shared
// by its nodes, with the ranges recorded in every pods directory under the
// root dir (the single node's and each node's of a fleet, whatever the
// node count was), so that no two pods get the same IDs. The range must
// hold maxPods pods of each of count nodes. (The UserNamespacesSupport
// gate is on: crivk takes every feature gate at the kubelet's default.)
func userNamespacePool(o *Settings, count int) (*userns.Pool, error) {
	ids := uint32(o.UserNamespacesIDsPerPod)
	var first, length uint32
	var err error
	switch r := o.UserNamespacesRange; r {
	case "", "kubelet":
		if first, length, err = userns.Mappings(ids); err != nil {
			return nil, fmt.Errorf("kubelet mappings: %w", err)
		}
	case "none":
		return nil, errors.New("off (--user-namespaces-range=none)")
	default:
		if first, length, err = parseIDRange(r); err != nil {
			return nil, err
		}
	}
	dirs := []string{filepath.Join(o.RootDir, "pods")}
	nodes, err := filepath.Glob(filepath.Join(o.RootDir, "nodes", "*", "pods"))
	if err != nil {
		return nil, err
	}
	return userns.New(userns.Config{PodsDirs: append(dirs, nodes...), IDsPerPod: ids, First: first, Length: length,
		MaxPods: int(o.MaxPods) * count})
}

// parseIDRange reads --user-namespaces-range's FIRST:LENGTH.
func parseIDRange(r string) (uint32, uint32, error) {
	f, l, ok := strings.Cut(r, ":")
	first, ferr := strconv.ParseUint(f, 10, 32)
	length, lerr := strconv.ParseUint(l, 10, 32)
	if !ok || ferr != nil || lerr != nil {
		return 0, 0, fmt.Errorf("--user-namespaces-range %q: want kubelet, none or FIRST:LENGTH (two numbers below 2^32)", r)
	}
	return uint32(first), uint32(length), nil
}

// usernsRefusal is the user namespace allocator of the nodes of a process
// whose pool could not be made: a pod with hostUsers: false is refused,
// with why, and nothing of the rest of the node changes.
type usernsRefusal struct{ err error }

func (r usernsRefusal) PodMappings(types.UID) (*runtimeapi.UserNamespace, error) {
	return nil, fmt.Errorf("can't set `spec.hostUsers: false`, user namespaces are not available on this node: %w", r.err)
}

// setOOMScoreAdj writes crivk's oom_score_adj, as the kubelet does for
// itself. Lowering it needs CAP_SYS_RESOURCE: without it (this project's
// test machines) the kernel refuses, which is logged and not fatal, as the
// kubelet logs it.
func setOOMScoreAdj(ctx context.Context, v int) {
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(v)), 0o644); err != nil {
		cur, _ := os.ReadFile("/proc/self/oom_score_adj")
		log.G(ctx).WithError(err).WithField("current", strings.TrimSpace(string(cur))).Warnf("could not set crivk's oom_score_adj to %d (lowering it needs CAP_SYS_RESOURCE)", v)
		return
	}
	log.G(ctx).WithField("oomScoreAdj", v).Debug("crivk's oom_score_adj set")
}

// connectAPI builds the API clients from --kubeconfig, or from the node's
// own rotating client certificate with --bootstrap-kubeconfig, or in a pod
// without --kubeconfig from its service account; every request goes
// through wrap (the health endpoint's record of the API's answers).
func connectAPI(ctx context.Context, o *Settings, wrap func(http.RoundTripper) http.RoundTripper) (*apiClients, error) {
	var restCfg *rest.Config
	var err error
	if o.BootstrapKubeconfig != "" {
		restCfg, err = certificate.NodeClientConfig(ctx, certificate.BootstrapConfig{
			NodeName: o.NodeName, Kubeconfig: o.Kubeconfig, BootstrapKubeconfig: o.BootstrapKubeconfig,
			CertDir: filepath.Join(o.RootDir, "pki"),
		})
		if err != nil {
			return nil, fmt.Errorf("TLS bootstrap: %w", err)
		}
	} else if o.Kubeconfig == "" {
		if restCfg, err = incluster.Config(); err != nil {
			return nil, fmt.Errorf("no --kubeconfig, and the pod's service account: %w", err)
		}
	} else if restCfg, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig); err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", o.Kubeconfig, err)
	}
	restCfg.UserAgent = "crivk/" + o.AgentVersion
	restCfg.Wrap(wrap)
	return newAPIClients(restCfg, apiLimits{
		QPS: float32(o.APIQPS), Burst: o.APIBurst, EventQPS: float32(o.EventQPS), EventBurst: o.EventBurst,
		Heartbeat: o.NodeStatusUpdateFrequency,
	})
}

// connectRuntime is the runtime of the flags, waited for while it is not
// up (cri.Await; whileWaiting runs meanwhile).
func connectRuntime(ctx context.Context, o *Settings, recorder record.EventRecorder, pods *cm.Manager, un cri.UserNamespaces, agentMetrics *metrics.Agent, whileWaiting func(context.Context)) (*cri.Runtime, cri.VersionInfo, cri.Readiness, error) {
	var ver cri.VersionInfo
	var rd cri.Readiness
	dns := cri.DNSConfig{ClusterDomain: o.ClusterDomain, ResolvConf: o.ResolvConf}
	if o.ClusterDNS != "" {
		dns.ClusterDNS = strings.Split(o.ClusterDNS, ",")
	}
	memCapacity, err := nodestatus.MemoryCapacity()
	if err != nil {
		return nil, ver, rd, fmt.Errorf("reading the machine's memory: %w", err)
	}
	if strings.Contains(o.CRIEndpoint, "://") && !strings.HasPrefix(o.CRIEndpoint, "unix://") {
		return nil, ver, rd, fmt.Errorf("--cri-endpoint %q: only unix sockets are supported", o.CRIEndpoint)
	}
	cfg := cri.Config{Endpoint: o.CRIEndpoint, RequestTimeout: o.RuntimeRequestTimeout, PodLogDir: o.PodLogDir, ContainerLogsDir: o.ContainerLogsDir, DNS: dns,
		MemoryCapacity: memCapacity, MaxParallelImagePulls: o.MaxParallelPulls, MaxParallelSandboxes: o.MaxParallelSandboxes, Recorder: recorder,
		ObserveCall: agentMetrics.ObserveCall, ObserveUserNamespacedStart: agentMetrics.ObserveUserNamespacedStart,
		Swap: cri.SwapControllerOf(o.Cgroups.Version(), o.Cgroups.SwapAccounting()), OOMKillGroup: o.oomKillGroup()}
	if pods != nil {
		cfg.CgroupParent = pods.PodCgroup
		cfg.PodCgroups = pods
	}
	if un != nil {
		cfg.UserNamespaces = un
	}
	cfg.SeccompProfileRoot = filepath.Join(o.RootDir, "seccomp")
	// The kubelet's pulled-image records (KubeletEnsureSecretPulledImages).
	cfg.PulledImages = cri.PulledImagesConfig{Dir: filepath.Join(o.RootDir, "image_manager"), Policy: o.Config.ImagePullCredentialsVerificationPolicy, Allowlist: o.Config.PreloadedImagesVerificationAllowlist()}
	if strings.HasPrefix(o.CRIEndpoint, "unix://") {
		reaper, err := taskevents.NewReaper(o.CRIEndpoint, "k8s.io")
		if err != nil {
			return nil, ver, rd, err
		}
		cfg.DeleteTask = reaper.DeleteTask
	}
	return cri.Await(ctx, cfg, whileWaiting)
}
