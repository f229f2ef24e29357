// Command crivk is a Kubernetes node agent: a virtual-kubelet provider that
// runs the node's pods on the local machine through a CRI runtime. This
// command declares and parses the flags and dispatches `crivk runtime`,
// `crivk uninstall` and `crivk config check`; the node agent itself is
// assembled and run by internal/nodeagent.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/crivk/crivk/cm"
	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/eviction"
	evictionapi "github.com/crivk/crivk/eviction/api"
	"github.com/crivk/crivk/images"
	"github.com/crivk/crivk/internal/nodeagent"
	"github.com/crivk/crivk/internal/subcmd/hostruntime"
	"github.com/crivk/crivk/internal/subcmd/uninstall"
	"github.com/crivk/crivk/kubeletconfig"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/grpclog"
)

// version is set at build time (-X main.version=...): the Kubernetes version
// crivk implements, then crivk's own build number.
var version = "v1.37.2-crivk.0"

// options are the parsed command line: the node agent's settings, and
// --version.
type options struct {
	nodeagent.Settings
	showVersion bool
}

// errHelp is returned by parseFlags for -h, -help and --help; it holds
// the usage, which main prints to stdout before exiting 0.
type errHelp struct{ usage string }

func (e *errHelp) Error() string { return "help requested" }

// inClusterTokenFile is the service account token every pod gets; with
// it and $KUBERNETES_SERVICE_HOST crivk runs in a pod (tests change it).
var inClusterTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// hostCgroups is the machine's cgroup filesystem the settings are checked
// against and run on (nodeagent.Settings.Cgroups); nil: the machine's,
// detected by Validate. Tests set a fixed one, so that parsing the flags
// does not depend on the machine's cgroup version.
var hostCgroups *cm.Host

// inPod reports whether crivk runs in a pod with a service account, so
// that rest.InClusterConfig can work.
func inPod() bool {
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" || os.Getenv("KUBERNETES_SERVICE_PORT") == "" {
		return false
	}
	_, err := os.Stat(inClusterTokenFile)
	return err == nil
}

// parseFlags declares every flag into a nodeagent.Settings, applies the
// configuration file and validates the result (Settings.Validate), so that
// a mistake is reported (exit 2) before crivk waits for anything. It is
// long because it declares every flag; the rules on their values are
// nodeagent's. "version" as the only argument is --version.
func parseFlags(args []string) (*options, error) {
	o := &options{Settings: nodeagent.Settings{AgentVersion: version, Cgroups: hostCgroups}}
	if len(args) > 0 && args[0] == "version" {
		if len(args) > 1 {
			return nil, fmt.Errorf("crivk version takes no arguments, got %q", args[1])
		}
		o.showVersion = true
		return o, nil
	}
	fs := flag.NewFlagSet("crivk", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	host, _ := os.Hostname()
	fs.StringVar(&o.Kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster to join (default $KUBECONFIG); empty in a pod: the pod's service account (rest.InClusterConfig), the API server $CRIVK_API_SERVER if set (charts/crivk's identity: rbac)")
	fs.StringVar(&o.BootstrapKubeconfig, "bootstrap-kubeconfig", "", "kubeconfig with a bootstrap token: when --kubeconfig has no valid client certificate, one for system:node:<node-name> is requested through a CertificateSigningRequest, written under <root-dir>/pki, rotated before expiry, and --kubeconfig is written to use it (the kubelet's TLS bootstrap); \"in-cluster\": the pod's service account is the bootstrap credential (charts/crivk), the API server $CRIVK_API_SERVER if set")
	fs.StringVar(&o.NodeName, "node-name", strings.ToLower(host), "name of the Node object")
	fs.IntVar(&o.NodeCount, "node-count", 1, "nodes served by this process over one runtime (docs/scale.md): above 1, <node-name>-0 ... <node-name>-<N-1>, each with the node API port --port+i and its own directories and cgroups under <root-dir>/nodes/<name>, <pod-log-dir>/<name> and <cgroup-root>/<name>")
	fs.StringVar(&o.NodeShares, "node-shares", "", "with --node-count above 1, each node's weight in the split of the machine, one integer per node (e.g. 2,1,1: half to <node-name>-0, a quarter to each other); node i gets its weight over their sum of the machine's capacity, of its allocatable and of its pod cgroup bound (the reservations taken once per machine), rounded down; its memory.available is measured against its part too (default: equal shares; docs/scale.md)")
	fs.StringVar(&o.CRIEndpoint, "cri-endpoint", "unix:///run/containerd/containerd.sock", "CRI runtime endpoint")
	fs.StringVar(&o.NodeIP, "node-ip", "", "the node's InternalIP (default: the source address of the default route)")
	fs.StringVar(&o.RootDir, "root-dir", "/var/lib/crivk", "directory for crivk's state")
	fs.StringVar(&o.PodLogDir, "pod-log-dir", "/var/log/pods", "directory of pod container logs")
	o.Config = kubeletconfig.AddFlags(fs)
	fs.StringVar(&o.PodManifestPath, "pod-manifest-path", "", "directory of static pod manifests (files starting with a dot are ignored), or a single manifest file, as the kubelet's; their pods run with mirror pods in the API (staticpods)")
	fs.DurationVar(&o.FileCheckFrequency, "file-check-frequency", 20*time.Second, "how often --pod-manifest-path is read again besides its change notifications, as the kubelet's")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", "", "serving certificate of the node API (default: self-signed under <root-dir>/pki)")
	fs.StringVar(&o.TLSKeyFile, "tls-private-key-file", "", "key of --tls-cert-file")
	fs.BoolVar(&o.RotateServerCerts, "rotate-server-certificates", false, "obtain the node API's serving certificate from the cluster (a CSR with signer kubernetes.io/kubelet-serving, which the cluster must approve) and renew it before it expires, as the kubelet's serverTLSBootstrap; excludes --tls-cert-file")
	fs.StringVar(&o.ClientCAFile, "client-ca-file", "", "client certificates of the node API signed by this CA authenticate as their CN (user) and O (groups)")
	fs.BoolVar(&o.AnonymousAuth, "anonymous-auth", false, "let requests to the node API without credentials in as system:anonymous (then subject to authorization)")
	fs.BoolVar(&o.TokenWebhook, "authentication-token-webhook", true, "authenticate bearer tokens of node API clients with a TokenReview")
	fs.StringVar(&o.AuthorizationMode, "authorization-mode", "Webhook", "how node API requests are authorized: Webhook (a SubjectAccessReview per request, as the kubelet) or AlwaysAllow")
	fs.StringVar(&o.Address, "address", "0.0.0.0", "address of the node API")
	fs.IntVar(&o.Port, "port", 10250, "port of the node API")
	fs.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.Int64Var(&o.MaxPods, "max-pods", 110, "pods capacity of the node")
	fs.StringVar(&o.NodeLabelsFlag, "node-labels", "", "labels to add when registering the node (key=value,...); labels in the kubernetes.io and k8s.io namespaces must begin with kubelet.kubernetes.io/ or node.kubernetes.io/ or be a well-known label, as for the kubelet")
	fs.StringVar(&o.TaintsFlag, "register-with-taints", "", "taints the node is registered with (comma-separated <key>=<value>:<effect>); only when crivk creates the Node, as the kubelet")
	fs.BoolVar(&o.Tracing, "tracing", false, "trace every pod sync and its CRI calls (OpenCensus through virtual-kubelet's trace package, with virtual-kubelet's own spans), all sampled, served by zpages at /debug/tracez on --profiling-address and/or written to --trace-file (one of them required)")
	fs.StringVar(&o.TraceFile, "trace-file", "", "with --tracing, append every span to this file as one JSON line (name, trace, span and parent span IDs, start, end, attributes); off by default")
	fs.StringVar(&o.UnsafeSysctls, "allowed-unsafe-sysctls", "", "comma-separated unsafe sysctls or patterns (ending in *) pods may set besides the safe ones, e.g. 'kernel.msg*,net.core.somaxconn'; each must be namespaced by the kernel (the kubelet's flag)")
	fs.StringVar(&o.ClusterDNS, "cluster-dns", "", "comma-separated cluster DNS server IPs for dnsPolicy ClusterFirst")
	fs.StringVar(&o.ClusterDomain, "cluster-domain", "cluster.local", "cluster DNS domain")
	fs.StringVar(&o.ResolvConf, "resolv-conf", "/etc/resolv.conf", "host resolver config for dnsPolicy Default (empty: none)")
	fs.DurationVar(&o.SyncInterval, "sync-interval", 10*time.Second, "how often a pod is resynced when the PLEG reports no change for it")
	fs.DurationVar(&o.RuntimeRequestTimeout, "runtime-request-timeout", 2*time.Minute, "timeout of every CRI call but image pulls (the kubelet's); the dial has its own 10 s")
	fs.DurationVar(&o.RelistPeriod, "pleg-relist-period", time.Second, "how often the PLEG lists the runtime's sandboxes and containers")
	fs.DurationVar(&o.WakeSpacing, "pleg-wake-spacing", 100*time.Millisecond, "the mean time between relists that the runtime's events trigger, after a burst of 4 at once (0: no limit): a batch of pods starting does not list the node back to back")
	fs.DurationVar(&o.NodeStatusUpdateFrequency, "node-status-update-frequency", 10*time.Second, "how often the node's conditions are computed and compared with the Node in the API (written when they differ), as the kubelet's")
	fs.DurationVar(&o.NodeStatusReportFrequency, "node-status-report-frequency", 5*time.Minute, "how often the node status is written when nothing changed, as the kubelet's")
	fs.Float64Var(&o.APIQPS, "kube-api-qps", 50, "QPS to the API server")
	fs.IntVar(&o.APIBurst, "kube-api-burst", 100, "burst to the API server")
	fs.Float64Var(&o.EventQPS, "event-qps", 50, "QPS of event creation, a limit of its own as the kubelet's (0: no limit)")
	fs.IntVar(&o.EventBurst, "event-burst", 100, "burst of event creation")
	fs.BoolVar(&o.RuntimeEvents, "runtime-events", true, "relist at once on containerd's task events (read on the CRI socket); the periodic relist stays")
	fs.StringVar(&o.ProfilingAddress, "profiling-address", "", "if set, serve net/http/pprof on this address (e.g. 127.0.0.1:6060); off by default")
	fs.BoolVar(&o.showVersion, "version", false, "print the version and exit")
	fs.IntVar(&o.MaxParallelSandboxes, "max-parallel-sandboxes", 8, "pod sandboxes created at once (0: no limit, as the kubelet); the others wait in ContainerCreating. 8 measured best of 0, 4 and 8 for a batch of 110 pods on 2 cores (docs/benchmarks.md)")
	fs.StringVar(&o.ImageCredentialProviderConfig, "image-credential-provider-config", "", "Path to a credential provider plugin config file (JSON/YAML/YML) or a directory of such files (merged in lexicographical order; non-recursive search), the kubelet's: the plugins give registry credentials for the images they match, tried after the pod's pull secrets (docs/security.md)")
	fs.StringVar(&o.ImageCredentialProviderBinDir, "image-credential-provider-bin-dir", "", "The path to the directory where credential provider plugin binaries are located (the kubelet's; each plugin named as its provider)")
	fs.IntVar(&o.MaxParallelPulls, "max-parallel-image-pulls", 1, "image pulls run at once (1: serialized, the kubelet's default; 0: no limit)")
	fs.StringVar(&o.LogMaxSize, "container-log-max-size", "10Mi", "size at which a container's log file is rotated")
	fs.IntVar(&o.LogMaxFiles, "container-log-max-files", 5, "log files kept per container, the current one included (at least 2)")
	fs.IntVar(&o.LogMaxWorkers, "container-log-max-workers", 1, "containers whose logs are rotated at once, the kubelet's containerLogMaxWorkers (at least 1; 1: one after the other)")
	fs.DurationVar(&o.LogMonitorInterval, "container-log-monitor-interval", 10*time.Second, "how often containers' logs are checked for rotation, the kubelet's containerLogMonitorInterval (at least 3s)")
	fs.IntVar(&o.OOMScoreAdj, "oom-score-adj", -999, "crivk's own oom_score_adj in [-1000, 1000], as the kubelet's: the kernel kills pods before the agent")
	fs.StringVar(&o.CgroupRoot, "cgroup-root", "/", "cgroup under which the pod cgroup tree (kubepods/...) is made; another root than a kubelet's lets both run on one machine")
	fs.BoolVar(&o.CgroupsPerQOS, "cgroups-per-qos", true, "make the QoS and pod cgroups and create sandboxes in them, as the kubelet (false: the runtime's default cgroup, container limits only)")
	fs.BoolVar(&o.FailCgroupV1, "fail-cgroupv1", true, "refuse to start on a host using cgroup v1, as the kubelet: on such a host crivk runs only with --fail-cgroupv1=false (or failCgroupV1: false in --config)")
	fs.StringVar(&o.SystemReserved, "system-reserved", "", "resources reserved for the system, e.g. cpu=100m,memory=500Mi,ephemeral-storage=1Gi (the kubelet's format)")
	fs.StringVar(&o.KubeReserved, "kube-reserved", "", "resources reserved for Kubernetes daemons, in --system-reserved's format")
	fs.Int64Var(&o.PodMaxPids, "pod-max-pids", -1, "Set the maximum number of processes per pod.  If -1, the kubelet defaults to the node allocatable pid capacity.")
	fs.StringVar(&o.EvictionHard, "eviction-hard", evictionapi.DefaultHard, "hard eviction thresholds (e.g. memory.available<1Gi): met, a pod is evicted; taken off the allocatable too (the kubelet's format and default)")
	fs.StringVar(&o.EvictionFlags.Soft, "eviction-soft", "", "soft eviction thresholds (e.g. memory.available<1.5Gi): met for their --eviction-soft-grace-period, a pod is evicted")
	fs.StringVar(&o.EvictionFlags.SoftGracePeriod, "eviction-soft-grace-period", "", "grace periods of the soft eviction thresholds (e.g. memory.available=1m30s)")
	fs.Int64Var(&o.EvictionMaxPodGracePeriod, "eviction-max-pod-grace-period", 0, "maximum grace period (seconds) of a pod evicted for a soft threshold")
	fs.StringVar(&o.EvictionFlags.MinimumReclaim, "eviction-minimum-reclaim", "", "minimum reclaims (e.g. imagefs.available=2Gi): a met threshold stays met until this much more is available")
	fs.DurationVar(&o.EvictionPressureTransition, "eviction-pressure-transition-period", eviction.DefaultPressureTransitionPeriod, "how long a pressure condition stays after its threshold was last met")
	fs.DurationVar(&o.EvictionMonitoringPeriod, "eviction-monitoring-period", eviction.DefaultMonitoringPeriod, "how often the eviction manager observes the node (the kubelet's fixed 10s)")
	fs.BoolVar(&o.KernelMemcgNotification, "kernel-memcg-notification", false, "be told by the kernel (memcg threshold notification, cgroup v1) when memory.available crosses an eviction threshold, rather than only polling")
	fs.IntVar(&o.HealthzPort, "healthz-port", 10248, "port of the plain-HTTP /healthz endpoint (the API connection, the runtime, the sync loop; internal/healthz), as the kubelet's; 0 disables it")
	fs.StringVar(&o.HealthzBindAddress, "healthz-bind-address", "127.0.0.1", "IP address the /healthz endpoint listens on")
	fs.IntVar(&o.ReadOnlyPort, "read-only-port", 0, "port of the kubelet's read-only node API on --address: /healthz, /pods, /stats/, /metrics... over plain HTTP without authentication (nodeapi.ReadOnly); 0 disables it")
	fs.StringVar(&o.ContainerLogsDir, "container-logs-dir", "/var/log/containers", "directory of the links <pod>_<namespace>_<container>-<container ID>.log to each container's log, the kubelet's /var/log/containers (which the kubelet has no flag for); empty: no links")
	fs.StringVar(&o.UserNamespacesRange, "user-namespaces-range", "kubelet", "where the IDs of pods with hostUsers: false come from: kubelet (the kubelet's: the kubelet user's subordinate range from getsubids, or every ID from one pod's range up), none (such pods are refused: for a crivk beside another agent that takes the same IDs, docs/coexistence.md) or FIRST:LENGTH")
	fs.Int64Var(&o.UserNamespacesIDsPerPod, "user-namespaces-ids-per-pod", 65536, "the length of the ID range of each pod with hostUsers: false, a multiple of 65536 (the KubeletConfiguration's userNamespaces.idsPerPod, which the kubelet has no flag for)")
	fs.DurationVar(&o.MaxContainerRestartPeriod, "max-container-restart-period", 300*time.Second, "the longest crash-loop back-off delay between restarts of a container, in [1s, 300s]; the first delay is 10s or this if shorter (the KubeletConfiguration's crashLoopBackOff.maxContainerRestartPeriod, which the kubelet has no flag for)")
	addGCFlags(fs, &o.GC)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			var b strings.Builder
			writeUsage(&b, fs)
			return nil, &errHelp{usage: b.String()}
		}
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.showVersion {
		return o, nil
	}
	if err := o.Config.Apply(); err != nil {
		return nil, err
	}
	if o.Kubeconfig == "" && o.BootstrapKubeconfig != "" {
		return nil, errors.New("--bootstrap-kubeconfig needs --kubeconfig, where the node's kubeconfig is written")
	}
	if o.Kubeconfig == "" && !inPod() {
		return nil, errors.New("--kubeconfig (or $KUBECONFIG) is required outside a pod")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return o, nil
}

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "runtime" || os.Args[1] == "uninstall") {
		// The chart's other uses of the one image: the runtime container
		// (internal/subcmd/hostruntime) and the uninstall hooks (internal/subcmd/uninstall).
		ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer cancel()
		grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, os.Stderr))
		logrus.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
		run := hostruntime.Run
		if os.Args[1] == "uninstall" {
			run = uninstall.Run
		}
		if err := run(ctx, os.Args[2:]); err != nil {
			fmt.Fprintf(os.Stderr, "crivk %s: %v\n", os.Args[1], err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "config" {
		os.Exit(configCommand(os.Args[2:], os.Stdout, os.Stderr))
	}
	o, err := parseFlags(os.Args[1:])
	var help *errHelp
	if errors.As(err, &help) {
		fmt.Print(help.usage)
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "crivk: %v\nRun 'crivk --help' for the flags.\n", err)
		os.Exit(2)
	}
	if o.showVersion {
		fmt.Println("crivk", version)
		return
	}
	// gRPC's own warnings (reconnect attempts) would bury crivk's one-line
	// errors; crivk reports CRI failures itself.
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, os.Stderr))
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	if err := nodeagent.Run(ctx, &o.Settings); err != nil {
		fmt.Fprintf(os.Stderr, "crivk: %v\n", err)
		os.Exit(1)
	}
}

func addGCFlags(fs *flag.FlagSet, o *nodeagent.GCSettings) {
	o.Image, o.Container = images.DefaultPolicy, cri.DefaultGCPolicy
	fs.IntVar(&o.Image.HighThresholdPercent, "image-gc-high-threshold", o.Image.HighThresholdPercent, "the percent of disk usage of the image filesystem at or above which unused images are removed; 100 with --image-maximum-gc-age=0 turns image garbage collection off (the kubelet's)")
	fs.IntVar(&o.Image.LowThresholdPercent, "image-gc-low-threshold", o.Image.LowThresholdPercent, "the percent of disk usage image garbage collection frees down to; at most --image-gc-high-threshold")
	fs.DurationVar(&o.Image.MinAge, "image-minimum-gc-age", o.Image.MinAge, "minimum age of an unused image (since crivk first saw it) before it is removed")
	fs.DurationVar(&o.Image.MaxAge, "image-maximum-gc-age", o.Image.MaxAge, "an image unused for longer is removed whatever the disk usage (0: never)")
	fs.DurationVar(&o.Container.MinAge, "minimum-container-ttl-duration", o.Container.MinAge, "minimum age of a finished container before the container garbage collector removes it")
	fs.IntVar(&o.Container.MaxPerPodContainer, "maximum-dead-containers-per-container", o.Container.MaxPerPodContainer, "dead instances kept per container of a pod (negative: no limit for the collector; every sync keeps at most max(this, 1))")
	fs.IntVar(&o.Container.MaxContainers, "maximum-dead-containers", o.Container.MaxContainers, "dead containers kept on the node (negative: no limit)")
}
