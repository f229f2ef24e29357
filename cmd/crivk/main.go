// Command crivk is a Kubernetes node agent: a virtual-kubelet provider that
// runs the node's pods on the local machine through a CRI runtime.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/crivk/crivk/apiobjects"
	"github.com/crivk/crivk/cm"
	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/cri/taskevents"
	"github.com/crivk/crivk/eviction"
	evictionapi "github.com/crivk/crivk/eviction/api"
	"github.com/crivk/crivk/internal/certificate"
	"github.com/crivk/crivk/internal/debugserver"
	"github.com/crivk/crivk/internal/devicemanager"
	"github.com/crivk/crivk/internal/healthz"
	"github.com/crivk/crivk/internal/hostruntime"
	"github.com/crivk/crivk/internal/incluster"
	"github.com/crivk/crivk/internal/kubeletconfig"
	"github.com/crivk/crivk/internal/memrelease"
	"github.com/crivk/crivk/internal/runtimeclass"
	"github.com/crivk/crivk/internal/staticpods"
	"github.com/crivk/crivk/internal/uninstall"
	"github.com/crivk/crivk/internal/vknode"
	"github.com/crivk/crivk/lifecycle"
	"github.com/crivk/crivk/lifecycle/admission"
	"github.com/crivk/crivk/lifecycle/pleg"
	"github.com/crivk/crivk/lifecycle/volume"
	"github.com/crivk/crivk/metrics"
	"github.com/crivk/crivk/nodeapi"
	"github.com/crivk/crivk/nodeapi/stats"
	"github.com/crivk/crivk/nodestatus"
	"github.com/crivk/crivk/podwriter"
	"github.com/crivk/crivk/provider"
	"github.com/sirupsen/logrus"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	logruslogger "github.com/virtual-kubelet/virtual-kubelet/log/logrus"
	"google.golang.org/grpc/grpclog"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// version is set at build time (-X main.version=...): the Kubernetes version
// crivk implements, then crivk's own build number.
var version = "v1.35.4-crivk.0"

type options struct {
	kubeconfig string
	// bootstrapKubeconfig, when set, is the TLS bootstrap credential the
	// node's client certificate is requested with (internal/certificate).
	bootstrapKubeconfig string
	nodeName            string
	nodeCount           int // --node-count: nodes sharing the machine (fleet.go)
	criEndpoint         string
	nodeIP              string
	rootDir             string
	podLogDir           string
	tlsCert             string
	tlsKey              string
	clientCA            string
	// The node API's authentication and authorization (nodeapi.Auth).
	anonymousAuth     bool
	tokenWebhook      bool
	authorizationMode string
	address           string
	port              int
	logLevel          string
	maxPods           int64
	unsafeSysctls     string
	rotateServerCerts bool
	tracing           bool
	// traceFile, with tracing, is where every span is appended (tracing.go).
	traceFile      string
	nodeLabelsFlag string
	taintsFlag     string
	nodeLabels     map[string]string
	taints         []v1.Taint
	sysctls        *admission.Sysctls
	clusterDNS     string
	clusterDomain  string
	resolvConf     string
	syncInterval   time.Duration
	relistPeriod   time.Duration
	wakeSpacing    time.Duration
	// runtimeRequestTimeout is the kubelet's --runtime-request-timeout.
	runtimeRequestTimeout time.Duration
	apiQPS                float64
	apiBurst              int
	eventQPS              float64
	eventBurst            int
	showVersion           bool
	// maxParallelPulls bounds concurrent image pulls (0: no limit).
	maxParallelPulls int
	// maxParallelSandboxes bounds concurrent RunPodSandbox calls (0: none).
	maxParallelSandboxes int
	// Container log rotation (the kubelet's defaults 10Mi x 5).
	logMaxSize  string
	logMaxFiles int
	// The kubelet's containerLogMaxWorkers and containerLogMonitorInterval
	// (defaults 1 and 10s).
	logMaxWorkers      int
	logMonitorInterval time.Duration
	// profilingAddress serves net/http/pprof when set (profiling.go).
	profilingAddress string
	// runtimeEvents wakes the PLEG on containerd task events (cri/taskevents).
	runtimeEvents bool
	// The kubelet's node status loop: conditions computed and compared
	// with the API's node every update frequency, the whole status
	// reported at least every report frequency.
	nodeStatusUpdateFrequency time.Duration
	nodeStatusReportFrequency time.Duration
	// Resources: the pod cgroup tree (package cm) and what is taken off
	// the capacity before pods get it.
	cgroupRoot     string
	cgroupsPerQOS  bool
	systemReserved string
	kubeReserved   string
	evictionHard   string
	reservations   nodestatus.Reservations
	// podMaxPids is each pod cgroup's pids.max (-1: none).
	podMaxPids int64
	// oomScoreAdj is crivk's own OOM score adjustment (the kubelet's
	// --oom-score-adj).
	oomScoreAdj int
	// The health endpoint (internal/healthz): plain HTTP, port 0 off.
	healthzPort        int
	healthzBindAddress string
	// readOnlyPort is the kubelet's read-only port (nodeapi.ReadOnly):
	// plain HTTP, no authentication, 0 off.
	readOnlyPort int
	// containerLogsDir is where containers' logs are linked from (the
	// kubelet's /var/log/containers); empty: no links.
	containerLogsDir string
	// The eviction manager's flags (package eviction), the kubelet's.
	evictionFlags              evictionapi.Flags
	evictionThresholds         []evictionapi.Threshold
	evictionMaxPodGracePeriod  int64
	evictionPressureTransition time.Duration
	evictionMonitoringPeriod   time.Duration
	kernelMemcgNotification    bool
	// maxContainerRestartPeriod caps the crash-loop back-off.
	maxContainerRestartPeriod time.Duration

	// config is --config and --config-dir (internal/kubeletconfig).
	config *kubeletconfig.Files
	// podManifestPath is the static pods' directory or file (the kubelet's
	// staticPodPath), read every fileCheckFrequency (internal/staticpods).
	podManifestPath    string
	fileCheckFrequency time.Duration
	// gc: the image and container garbage collectors' flags (gc.go).
	gc gcOptions
	// hostAdmitter is a node of many's view of what the nodes share on
	// the machine (fleet.go); nil for a single node.
	hostAdmitter lifecycle.HostAdmitter
	// relistFeed is a node of many's share of the process' one walk of
	// the runtime (fleet.go, pleg.Shared); nil for a single node, whose
	// PLEG lists the runtime and hears its task events itself.
	relistFeed *pleg.Feed
	// nodeShares is --node-shares, the nodes' weights (fleet.ParseShares);
	// empty: equal shares.
	nodeShares string
	// portion is a node of many's part of the machine (its fleet.Spec
	// weight, nodeOptions); zero, the whole, for a single node.
	portion nodestatus.Portion
}

// errHelp is returned by parseFlags for -h, -help and --help; it holds
// the usage, which main prints to stdout before exiting 0.
type errHelp struct{ usage string }

func (e *errHelp) Error() string { return "help requested" }

// inClusterTokenFile is the service account token every pod gets; with
// it and $KUBERNETES_SERVICE_HOST crivk runs in a pod (tests change it).
var inClusterTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// inPod reports whether crivk runs in a pod with a service account, so
// that rest.InClusterConfig can work.
func inPod() bool {
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" || os.Getenv("KUBERNETES_SERVICE_PORT") == "" {
		return false
	}
	_, err := os.Stat(inClusterTokenFile)
	return err == nil
}

// It is long because it declares every flag; the checks of their values
// stay next to the declarations. Every check that needs no runtime and no
// API server is here, so that a mistake is reported (exit 2) before crivk
// waits for anything. "version" as the only argument is --version.
func parseFlags(args []string) (*options, error) {
	o := &options{}
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
	fs.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster to join (default $KUBECONFIG); empty in a pod: the pod's service account (rest.InClusterConfig), the API server $CRIVK_API_SERVER if set (charts/crivk's identity: rbac)")
	fs.StringVar(&o.bootstrapKubeconfig, "bootstrap-kubeconfig", "", "kubeconfig with a bootstrap token: when --kubeconfig has no valid client certificate, one for system:node:<node-name> is requested through a CertificateSigningRequest, written under <root-dir>/pki, rotated before expiry, and --kubeconfig is written to use it (the kubelet's TLS bootstrap); \"in-cluster\": the pod's service account is the bootstrap credential (charts/crivk), the API server $CRIVK_API_SERVER if set")
	fs.StringVar(&o.nodeName, "node-name", strings.ToLower(host), "name of the Node object")
	fs.IntVar(&o.nodeCount, "node-count", 1, "nodes served by this process over one runtime (docs/scale.md): above 1, <node-name>-0 ... <node-name>-<N-1>, each with the node API port --port+i and its own directories and cgroups under <root-dir>/nodes/<name>, <pod-log-dir>/<name> and <cgroup-root>/<name>")
	fs.StringVar(&o.nodeShares, "node-shares", "", "with --node-count above 1, each node's weight in the split of the machine, one integer per node (e.g. 2,1,1: half to <node-name>-0, a quarter to each other); node i gets its weight over their sum of the machine's capacity, of its allocatable and of its pod cgroup bound (the reservations taken once per machine), rounded down; its memory.available is measured against its part too (default: equal shares; docs/scale.md)")
	fs.StringVar(&o.criEndpoint, "cri-endpoint", "unix:///run/containerd/containerd.sock", "CRI runtime endpoint")
	fs.StringVar(&o.nodeIP, "node-ip", "", "the node's InternalIP (default: the source address of the default route)")
	fs.StringVar(&o.rootDir, "root-dir", "/var/lib/crivk", "directory for crivk's state")
	fs.StringVar(&o.podLogDir, "pod-log-dir", "/var/log/pods", "directory of pod container logs")
	o.config = kubeletconfig.AddFlags(fs)
	fs.StringVar(&o.podManifestPath, "pod-manifest-path", "", "directory of static pod manifests (files starting with a dot are ignored), or a single manifest file, as the kubelet's; their pods run with mirror pods in the API (internal/staticpods)")
	fs.DurationVar(&o.fileCheckFrequency, "file-check-frequency", 20*time.Second, "how often --pod-manifest-path is read again besides its change notifications, as the kubelet's")
	fs.StringVar(&o.tlsCert, "tls-cert-file", "", "serving certificate of the node API (default: self-signed under <root-dir>/pki)")
	fs.StringVar(&o.tlsKey, "tls-private-key-file", "", "key of --tls-cert-file")
	fs.BoolVar(&o.rotateServerCerts, "rotate-server-certificates", false, "obtain the node API's serving certificate from the cluster (a CSR with signer kubernetes.io/kubelet-serving, which the cluster must approve) and renew it before it expires, as the kubelet's serverTLSBootstrap; excludes --tls-cert-file")
	fs.StringVar(&o.clientCA, "client-ca-file", "", "client certificates of the node API signed by this CA authenticate as their CN (user) and O (groups)")
	fs.BoolVar(&o.anonymousAuth, "anonymous-auth", false, "let requests to the node API without credentials in as system:anonymous (then subject to authorization)")
	fs.BoolVar(&o.tokenWebhook, "authentication-token-webhook", true, "authenticate bearer tokens of node API clients with a TokenReview")
	fs.StringVar(&o.authorizationMode, "authorization-mode", "Webhook", "how node API requests are authorized: Webhook (a SubjectAccessReview per request, as the kubelet) or AlwaysAllow")
	fs.StringVar(&o.address, "address", "0.0.0.0", "address of the node API")
	fs.IntVar(&o.port, "port", 10250, "port of the node API")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.Int64Var(&o.maxPods, "max-pods", 110, "pods capacity of the node")
	fs.StringVar(&o.nodeLabelsFlag, "node-labels", "", "labels to add when registering the node (key=value,...); labels in the kubernetes.io and k8s.io namespaces must begin with kubelet.kubernetes.io/ or node.kubernetes.io/ or be a well-known label, as for the kubelet")
	fs.StringVar(&o.taintsFlag, "register-with-taints", "", "taints the node is registered with (comma-separated <key>=<value>:<effect>); only when crivk creates the Node, as the kubelet")
	fs.BoolVar(&o.tracing, "tracing", false, "trace every pod sync and its CRI calls (OpenCensus through virtual-kubelet's trace package, with virtual-kubelet's own spans), all sampled, served by zpages at /debug/tracez on --profiling-address and/or written to --trace-file (one of them required)")
	fs.StringVar(&o.traceFile, "trace-file", "", "with --tracing, append every span to this file as one JSON line (name, trace, span and parent span IDs, start, end, attributes); off by default")
	fs.StringVar(&o.unsafeSysctls, "allowed-unsafe-sysctls", "", "comma-separated unsafe sysctls or patterns (ending in *) pods may set besides the safe ones, e.g. 'kernel.msg*,net.core.somaxconn'; each must be namespaced by the kernel (the kubelet's flag)")
	fs.StringVar(&o.clusterDNS, "cluster-dns", "", "comma-separated cluster DNS server IPs for dnsPolicy ClusterFirst")
	fs.StringVar(&o.clusterDomain, "cluster-domain", "cluster.local", "cluster DNS domain")
	fs.StringVar(&o.resolvConf, "resolv-conf", "/etc/resolv.conf", "host resolver config for dnsPolicy Default (empty: none)")
	fs.DurationVar(&o.syncInterval, "sync-interval", 10*time.Second, "how often a pod is resynced when the PLEG reports no change for it")
	fs.DurationVar(&o.runtimeRequestTimeout, "runtime-request-timeout", 2*time.Minute, "timeout of every CRI call but image pulls (the kubelet's); the dial has its own 10 s")
	fs.DurationVar(&o.relistPeriod, "pleg-relist-period", time.Second, "how often the PLEG lists the runtime's sandboxes and containers")
	fs.DurationVar(&o.wakeSpacing, "pleg-wake-spacing", 100*time.Millisecond, "the mean time between relists that the runtime's events trigger, after a burst of 4 at once (0: no limit): a batch of pods starting does not list the node back to back")
	fs.DurationVar(&o.nodeStatusUpdateFrequency, "node-status-update-frequency", 10*time.Second, "how often the node's conditions are computed and compared with the Node in the API (written when they differ), as the kubelet's")
	fs.DurationVar(&o.nodeStatusReportFrequency, "node-status-report-frequency", 5*time.Minute, "how often the node status is written when nothing changed, as the kubelet's")
	fs.Float64Var(&o.apiQPS, "kube-api-qps", 50, "QPS to the API server")
	fs.IntVar(&o.apiBurst, "kube-api-burst", 100, "burst to the API server")
	fs.Float64Var(&o.eventQPS, "event-qps", 50, "QPS of event creation, a limit of its own as the kubelet's (0: no limit)")
	fs.IntVar(&o.eventBurst, "event-burst", 100, "burst of event creation")
	fs.BoolVar(&o.runtimeEvents, "runtime-events", true, "relist at once on containerd's task events (read on the CRI socket); the periodic relist stays")
	fs.StringVar(&o.profilingAddress, "profiling-address", "", "if set, serve net/http/pprof on this address (e.g. 127.0.0.1:6060); off by default")
	fs.BoolVar(&o.showVersion, "version", false, "print the version and exit")
	fs.IntVar(&o.maxParallelSandboxes, "max-parallel-sandboxes", 8, "pod sandboxes created at once (0: no limit, as the kubelet); the others wait in ContainerCreating. 8 measured best of 0, 4 and 8 for a batch of 110 pods on 2 cores (docs/benchmarks.md)")
	fs.IntVar(&o.maxParallelPulls, "max-parallel-image-pulls", 1, "image pulls run at once (1: serialized, the kubelet's default; 0: no limit)")
	fs.StringVar(&o.logMaxSize, "container-log-max-size", "10Mi", "size at which a container's log file is rotated")
	fs.IntVar(&o.logMaxFiles, "container-log-max-files", 5, "log files kept per container, the current one included (at least 2)")
	fs.IntVar(&o.logMaxWorkers, "container-log-max-workers", 1, "containers whose logs are rotated at once, the kubelet's containerLogMaxWorkers (at least 1; 1: one after the other)")
	fs.DurationVar(&o.logMonitorInterval, "container-log-monitor-interval", 10*time.Second, "how often containers' logs are checked for rotation, the kubelet's containerLogMonitorInterval (at least 3s)")
	fs.IntVar(&o.oomScoreAdj, "oom-score-adj", -999, "crivk's own oom_score_adj in [-1000, 1000], as the kubelet's: the kernel kills pods before the agent")
	fs.StringVar(&o.cgroupRoot, "cgroup-root", "/", "cgroup under which the pod cgroup tree (kubepods/...) is made; another root than a kubelet's lets both run on one machine")
	fs.BoolVar(&o.cgroupsPerQOS, "cgroups-per-qos", true, "make the QoS and pod cgroups and create sandboxes in them, as the kubelet (false: the runtime's default cgroup, container limits only)")
	fs.StringVar(&o.systemReserved, "system-reserved", "", "resources reserved for the system, e.g. cpu=100m,memory=500Mi,ephemeral-storage=1Gi (the kubelet's format)")
	fs.StringVar(&o.kubeReserved, "kube-reserved", "", "resources reserved for Kubernetes daemons, in --system-reserved's format")
	fs.Int64Var(&o.podMaxPids, "pod-max-pids", -1, "Set the maximum number of processes per pod.  If -1, the kubelet defaults to the node allocatable pid capacity.")
	fs.StringVar(&o.evictionHard, "eviction-hard", evictionapi.DefaultHard, "hard eviction thresholds (e.g. memory.available<1Gi): met, a pod is evicted; taken off the allocatable too (the kubelet's format and default)")
	fs.StringVar(&o.evictionFlags.Soft, "eviction-soft", "", "soft eviction thresholds (e.g. memory.available<1.5Gi): met for their --eviction-soft-grace-period, a pod is evicted")
	fs.StringVar(&o.evictionFlags.SoftGracePeriod, "eviction-soft-grace-period", "", "grace periods of the soft eviction thresholds (e.g. memory.available=1m30s)")
	fs.Int64Var(&o.evictionMaxPodGracePeriod, "eviction-max-pod-grace-period", 0, "maximum grace period (seconds) of a pod evicted for a soft threshold")
	fs.StringVar(&o.evictionFlags.MinimumReclaim, "eviction-minimum-reclaim", "", "minimum reclaims (e.g. imagefs.available=2Gi): a met threshold stays met until this much more is available")
	fs.DurationVar(&o.evictionPressureTransition, "eviction-pressure-transition-period", eviction.DefaultPressureTransitionPeriod, "how long a pressure condition stays after its threshold was last met")
	fs.DurationVar(&o.evictionMonitoringPeriod, "eviction-monitoring-period", eviction.DefaultMonitoringPeriod, "how often the eviction manager observes the node (the kubelet's fixed 10s)")
	fs.BoolVar(&o.kernelMemcgNotification, "kernel-memcg-notification", false, "be told by the kernel (memcg threshold notification, cgroup v1) when memory.available crosses an eviction threshold, rather than only polling")
	fs.IntVar(&o.healthzPort, "healthz-port", 10248, "port of the plain-HTTP /healthz endpoint (the API connection, the runtime, the sync loop; internal/healthz), as the kubelet's; 0 disables it")
	fs.StringVar(&o.healthzBindAddress, "healthz-bind-address", "127.0.0.1", "IP address the /healthz endpoint listens on")
	fs.IntVar(&o.readOnlyPort, "read-only-port", 0, "port of the kubelet's read-only node API on --address: /healthz, /pods, /stats/, /metrics... over plain HTTP without authentication (nodeapi.ReadOnly); 0 disables it")
	fs.StringVar(&o.containerLogsDir, "container-logs-dir", "/var/log/containers", "directory of the links <pod>_<namespace>_<container>-<container ID>.log to each container's log, the kubelet's /var/log/containers (which the kubelet has no flag for); empty: no links")
	fs.DurationVar(&o.maxContainerRestartPeriod, "max-container-restart-period", 300*time.Second, "the longest crash-loop back-off delay between restarts of a container, in [1s, 300s]; the first delay is 10s or this if shorter (the KubeletConfiguration's crashLoopBackOff.maxContainerRestartPeriod, which the kubelet has no flag for)")
	addGCFlags(fs, &o.gc)
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
	if err := o.config.Apply(); err != nil {
		return nil, err
	}
	if o.kubeconfig == "" && o.bootstrapKubeconfig != "" {
		return nil, errors.New("--bootstrap-kubeconfig needs --kubeconfig, where the node's kubeconfig is written")
	}
	if o.kubeconfig == "" && !inPod() {
		return nil, errors.New("--kubeconfig (or $KUBECONFIG) is required outside a pod")
	}
	if o.nodeName == "" {
		return nil, errors.New("--node-name is empty")
	}
	if o.nodeCount > 1 && o.podManifestPath != "" {
		return nil, errors.New("--pod-manifest-path with --node-count above 1: every node would run the same static pods")
	}
	if o.port <= 0 || o.port > 65535 {
		return nil, fmt.Errorf("--port %d is not a port number", o.port)
	}
	if o.maxContainerRestartPeriod < time.Second || o.maxContainerRestartPeriod > 300*time.Second {
		return nil, fmt.Errorf("--max-container-restart-period %s must be between 1s and 300s", o.maxContainerRestartPeriod)
	}
	if o.runtimeRequestTimeout <= 0 {
		return nil, fmt.Errorf("--runtime-request-timeout must be positive")
	}
	if o.syncInterval <= 0 || o.relistPeriod <= 0 {
		return nil, fmt.Errorf("--sync-interval and --pleg-relist-period must be positive")
	}
	if o.wakeSpacing < 0 || o.wakeSpacing >= o.relistPeriod {
		return nil, fmt.Errorf("--pleg-wake-spacing %s must be at least 0 and below --pleg-relist-period %s", o.wakeSpacing, o.relistPeriod)
	}
	if q, err := resource.ParseQuantity(o.logMaxSize); err != nil || q.Value() <= 0 {
		return nil, fmt.Errorf("--container-log-max-size %q is not a positive quantity", o.logMaxSize)
	}
	if o.logMaxFiles < 2 {
		return nil, fmt.Errorf("--container-log-max-files must be at least 2, got %d", o.logMaxFiles)
	}
	if o.logMaxWorkers < 1 {
		return nil, fmt.Errorf("invalid configuration: containerLogMaxWorkers must be greater than or equal to 1 (--container-log-max-workers=%d)", o.logMaxWorkers)
	}
	if o.logMonitorInterval.Seconds() < 3 {
		return nil, fmt.Errorf("invalid configuration: containerLogMonitorInterval must be a positive time duration greater than or equal to 3s (--container-log-monitor-interval=%s)", o.logMonitorInterval)
	}
	if o.maxParallelPulls < 0 {
		return nil, fmt.Errorf("--max-parallel-image-pulls must not be negative, got %d", o.maxParallelPulls)
	}
	if o.healthzPort < 0 || o.healthzPort > 65535 {
		return nil, fmt.Errorf("--healthz-port %d is not a port number (0 disables the endpoint)", o.healthzPort)
	}
	if net.ParseIP(o.healthzBindAddress) == nil {
		return nil, fmt.Errorf("--healthz-bind-address %q is not an IP address", o.healthzBindAddress)
	}
	if o.healthzPort == o.port {
		return nil, fmt.Errorf("--healthz-port %d is the node API's --port", o.healthzPort)
	}
	if o.readOnlyPort < 0 || o.readOnlyPort > 65535 {
		return nil, fmt.Errorf("--read-only-port %d is not a port number (0 disables it)", o.readOnlyPort)
	}
	if o.readOnlyPort > 0 && (o.readOnlyPort == o.port || o.readOnlyPort == o.healthzPort) {
		return nil, fmt.Errorf("--read-only-port %d is the node API's --port or the --healthz-port", o.readOnlyPort)
	}
	if o.containerLogsDir != "" && !filepath.IsAbs(o.containerLogsDir) {
		return nil, fmt.Errorf("--container-logs-dir %q is not an absolute path", o.containerLogsDir)
	}
	if o.apiQPS <= 0 || o.apiBurst <= 0 {
		return nil, fmt.Errorf("--kube-api-qps %v and --kube-api-burst %d must be positive", o.apiQPS, o.apiBurst)
	}
	// As the kubelet's: --event-qps 0 is no limit, and --event-burst
	// matters only with a limit.
	if o.eventQPS < 0 {
		return nil, fmt.Errorf("--event-qps %v must not be negative (0: no limit)", o.eventQPS)
	}
	if o.eventQPS > 0 && o.eventBurst <= 0 {
		return nil, fmt.Errorf("--event-burst %d must be positive when --event-qps limits events", o.eventBurst)
	}
	if o.eventBurst < 0 {
		return nil, fmt.Errorf("--event-burst %d must not be negative", o.eventBurst)
	}
	switch o.authorizationMode {
	case "Webhook", "AlwaysAllow":
	default:
		return nil, fmt.Errorf("--authorization-mode %q: must be Webhook or AlwaysAllow", o.authorizationMode)
	}
	if o.clientCA != "" {
		if _, err := certificate.LoadCAPool(o.clientCA); err != nil {
			return nil, fmt.Errorf("--client-ca-file: %w", err)
		}
	}
	var err error
	if o.nodeLabels, err = nodestatus.ParseNodeLabels(o.nodeLabelsFlag); err != nil {
		return nil, err
	}
	if o.taints, err = nodestatus.ParseTaints(o.taintsFlag); err != nil {
		return nil, fmt.Errorf("--register-with-taints: %w", err)
	}
	if o.tracing && o.profilingAddress == "" && o.traceFile == "" {
		return nil, fmt.Errorf("--tracing needs --profiling-address (traces are served there at /debug/tracez) or --trace-file")
	}
	if o.traceFile != "" && !o.tracing {
		return nil, fmt.Errorf("--trace-file needs --tracing")
	}
	if o.rotateServerCerts && (o.tlsCert != "" || o.tlsKey != "") {
		return nil, fmt.Errorf("--rotate-server-certificates and --tls-cert-file/--tls-private-key-file exclude each other")
	}
	var unsafe []string
	for _, p := range strings.Split(o.unsafeSysctls, ",") {
		if p = strings.TrimSpace(p); p != "" {
			unsafe = append(unsafe, p)
		}
	}
	if o.sysctls, err = admission.NewSysctls("", unsafe); err != nil {
		return nil, fmt.Errorf("--allowed-unsafe-sysctls: %w", err)
	}
	if o.maxPods <= 0 {
		return nil, fmt.Errorf("--max-pods must be positive, got %d", o.maxPods)
	}
	if o.reservations.SystemReserved, err = nodestatus.ParseResourceList(o.systemReserved); err != nil {
		return nil, fmt.Errorf("--system-reserved: %w", err)
	}
	if o.reservations.KubeReserved, err = nodestatus.ParseResourceList(o.kubeReserved); err != nil {
		return nil, fmt.Errorf("--kube-reserved: %w", err)
	}
	if err := o.gc.validate(); err != nil {
		return nil, err
	}
	o.evictionFlags.Hard = o.evictionHard
	if o.evictionThresholds, err = evictionapi.ParseThresholds(o.evictionFlags); err != nil {
		return nil, err
	}
	o.reservations.EvictionHard = o.evictionThresholds
	if o.oomScoreAdj < -1000 || o.oomScoreAdj > 1000 {
		return nil, fmt.Errorf("--oom-score-adj %d is not in [-1000, 1000]", o.oomScoreAdj)
	}
	if !strings.HasPrefix(o.cgroupRoot, "/") {
		return nil, fmt.Errorf("--cgroup-root %q is not an absolute cgroup path", o.cgroupRoot)
	}
	if _, err := logrus.ParseLevel(o.logLevel); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	if o.nodeIP != "" && net.ParseIP(o.nodeIP) == nil {
		return nil, fmt.Errorf("--node-ip %q is not an IP address", o.nodeIP)
	}
	for _, d := range []*string{&o.rootDir, &o.podLogDir} {
		abs, err := filepath.Abs(*d)
		if err != nil {
			return nil, err
		}
		*d = abs
	}
	if _, err := o.fleetSpecs(); err != nil {
		return nil, err
	}
	return o, nil
}

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "runtime" || os.Args[1] == "uninstall") {
		// The chart's other uses of the one image: the runtime container
		// (internal/hostruntime) and the uninstall hooks (internal/uninstall).
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
	if err := run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "crivk: %v\n", err)
		os.Exit(1)
	}
}

// run is crivk's life, in phases: logging, the host's directories and
// node IP, the API clients, the runtime, the node object, the node API's
// security, the engine and its loops (startEngine), then virtual-kubelet's
// node and pod controllers until ctx ends (serveNode).
// It stays one function: the phases share what each made (clients,
// runtime, node object, health checks) and their order is the start-up
// contract; each phase is a call into its package or a named function.
func run(ctx context.Context, o *options) error {
	if o.tracing {
		closeTraces, err := debugserver.EnableTracing(o.traceFile)
		if err != nil {
			return err
		}
		defer func() {
			if err := closeTraces(); err != nil {
				log.G(ctx).WithError(err).Warn("closing --trace-file")
			}
		}()
	}
	if o.profilingAddress != "" {
		if err := debugserver.ServeProfiling(ctx, o.profilingAddress, o.tracing); err != nil {
			return err
		}
	}
	ctx = setupLogging(ctx, o)
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
	if o.healthzPort > 0 {
		addr := net.JoinHostPort(o.healthzBindAddress, strconv.Itoa(o.healthzPort))
		if _, err := healthz.Serve(ctx, addr, health.Handler(func(err error) {
			log.G(ctx).WithError(err).Warn("health check failed")
		})); err != nil {
			return err
		}
	}
	if o.nodeCount > 1 {
		return runFleet(ctx, o, health, contact)
	}
	if err := prepareHost(ctx, o); err != nil {
		return err
	}
	// The kubelet's metrics of crivk's work, counted from the first API
	// request on.
	agentMetrics := metrics.NewAgent(version)
	agentMetrics.RegisterClientMetrics()
	clients, err := connectAPI(ctx, o, contact.WrapTransport)
	if err != nil {
		return err
	}
	contact.Start()
	pods, err := setupCgroups(ctx, o)
	if err != nil {
		return err
	}
	eb := record.NewBroadcaster()
	recorder := eb.NewRecorder(scheme.Scheme, v1.EventSource{Component: "kubelet", Host: o.nodeName})
	nodeCfg := nodestatus.NodeConfig{
		Name: o.nodeName, InternalIP: o.nodeIP, KubeletPort: int32(o.port), MaxPods: o.maxPods,
		RootDir: o.rootDir, AgentVersion: version, Reservations: o.reservations,
		Labels: o.nodeLabels, Taints: o.taints,
	}
	// While the runtime is not up, the node is registered NotReady.
	awaiting := &nodestatus.NotReadyReporter{
		Name: o.nodeName, Nodes: clients.nodes.Nodes(), Period: o.nodeStatusUpdateFrequency, Now: time.Now,
		Build: func(rd cri.Readiness, now time.Time) (*v1.Node, error) { return nodestatus.BuildNode(nodeCfg, rd, now) },
	}
	rt, ver, rd, err := connectRuntime(ctx, o, recorder, pods, agentMetrics, awaiting.Run)
	if err != nil {
		return err
	}
	defer rt.Close()
	rt.SetRuntimeClasses(runtimeclass.Start(ctx, clients.runtimeClasses))
	nodeCfg.RuntimeVersion = ver
	nodeObj, err := nodestatus.BuildNode(nodeCfg, rd, time.Now())
	if err != nil {
		return err
	}
	tlsOpts, auth, err := nodeAPISecurity(ctx, o, clients)
	if err != nil {
		return err
	}
	// The node's pod informer (only pods bound to this node), run by the
	// virtual-kubelet node; the engine, the provider and the objects read
	// its view.
	podInf := vknode.NewPodInformer(clients.core, o.nodeName, time.Minute)
	a, err := startEngine(ctx, o, clients, rt, ver, nodeObj, recorder, pods, agentMetrics, podInf)
	if err != nil {
		return err
	}
	health.Set(healthz.CheckRuntime, a.relist.Healthy)
	health.Set(healthz.CheckSyncLoop, healthz.SyncLoopCheck(nil, a.engine.LatestLoopEntryTime, o.syncInterval))
	if o.readOnlyPort > 0 {
		ro := nodeapi.ReadOnly(a.mux, health.Handler(func(err error) { log.G(ctx).WithError(err).Warn("health check failed") }))
		if _, err := nodeapi.ServeReadOnly(ctx, net.JoinHostPort(o.address, strconv.Itoa(o.readOnlyPort)), ro); err != nil {
			return err
		}
	}
	// Not nodeutil.NewNode: it lists and watches every ConfigMap, Secret
	// and Service of the cluster (internal/vknode).
	n, err := vknode.New(vknode.Config{
		Nodes: clients.nodes, Leases: clients.leases, Node: nodeObj, Provider: a.provider, NodeProvider: a.nodeProvider, Recorder: recorder,
		Mux: a.mux, ListenAddr: net.JoinHostPort(o.address, fmt.Sprint(o.port)), TLS: tlsOpts, Auth: auth.Wrap, Workers: 10,
		StatusReport: o.nodeStatusReportFrequency, Watched: a.nodes.Watched, PodInformer: podInf,
		// Removals with grace 0 become crivk's own termination: no
		// object goes before its containers stop (podwriter).
		PodClient: podwriter.NewDeleteGuard(clients.core, podInf.Lister(), a.provider.DeletePod, a.statusWrites),
	})
	if err != nil {
		return err
	}
	eb.StartRecordingToSink(&corev1client.EventSinkImpl{Interface: clients.events.Events("")})
	defer eb.Shutdown()
	return serveNode(ctx, o, n, a)
}

// setupLogging configures logrus at --log-level with microsecond
// timestamps, as klog's: pod lifecycles are read across the agent's, the
// runtime's and the API server's logs.
func setupLogging(ctx context.Context, o *options) context.Context {
	lvl, _ := logrus.ParseLevel(o.logLevel)
	logger := logrus.StandardLogger()
	logger.SetFormatter(&logrus.TextFormatter{FullTimestamp: true, TimestampFormat: "2006-01-02T15:04:05.000000Z07:00"})
	logger.SetLevel(lvl)
	log.L = logruslogger.FromLogrus(logrus.NewEntry(logger))
	return log.WithLogger(ctx, log.L.WithField("node", o.nodeName))
}

// prepareHost finds the node IP when not given, creates the root and pod
// log directories and sets crivk's own OOM score adjustment.
func prepareHost(ctx context.Context, o *options) error {
	setOOMScoreAdj(ctx, o.oomScoreAdj)
	if o.nodeIP == "" {
		ip, err := nodestatus.DefaultNodeIP()
		if err != nil {
			return fmt.Errorf("--node-ip not given and none could be found: %w", err)
		}
		o.nodeIP = ip
	}
	for _, d := range []string{o.rootDir, o.podLogDir, o.containerLogsDir} {
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
// (package cm), bounded by the capacity less the reservations; nil with
// --cgroups-per-qos=false. A tree that cannot be made stops crivk, as the
// kubelet: pods would run without their pod-level limits.
func setupCgroups(ctx context.Context, o *options) (*cm.Manager, error) {
	if !o.cgroupsPerQOS {
		log.G(ctx).Warn("--cgroups-per-qos=false: no pod cgroups, only the containers' own limits apply")
		return nil, nil
	}
	mem, err := nodestatus.MemoryCapacity()
	if err != nil {
		return nil, fmt.Errorf("reading the machine's memory: %w", err)
	}
	capacity := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewQuantity(int64(goruntime.NumCPU()), resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
	}
	if maxPID, err := cm.MaxPID("/proc"); err == nil {
		capacity["pid"] = *resource.NewQuantity(maxPID, resource.DecimalSI)
	}
	bound := o.portion.Of(o.reservations.PodsBound(capacity))
	m, err := cm.New(cm.Config{Root: o.cgroupRoot, PodsCPUMilli: bound.Cpu().MilliValue(), PodsMemory: bound.Memory().Value(),
		PodsPIDs: bound.Name("pid", resource.DecimalSI).Value(), PodPidsLimit: o.podMaxPids})
	if err != nil {
		return nil, err
	}
	if err := m.Start(); err != nil {
		return nil, fmt.Errorf("making the pod cgroup tree under %s: %w", o.cgroupRoot, err)
	}
	log.G(ctx).WithField("root", m.Root()).WithField("cgroupVersion", m.Version()).
		WithField("reservations", o.reservations.String()).Info("pod cgroup tree ready")
	return m, nil
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
func connectAPI(ctx context.Context, o *options, wrap func(http.RoundTripper) http.RoundTripper) (*apiClients, error) {
	var restCfg *rest.Config
	var err error
	if o.bootstrapKubeconfig != "" {
		restCfg, err = certificate.NodeClientConfig(ctx, certificate.BootstrapConfig{
			NodeName: o.nodeName, Kubeconfig: o.kubeconfig, BootstrapKubeconfig: o.bootstrapKubeconfig,
			CertDir: filepath.Join(o.rootDir, "pki"),
		})
		if err != nil {
			return nil, fmt.Errorf("TLS bootstrap: %w", err)
		}
	} else if o.kubeconfig == "" {
		if restCfg, err = incluster.Config(); err != nil {
			return nil, fmt.Errorf("no --kubeconfig, and the pod's service account: %w", err)
		}
	} else if restCfg, err = clientcmd.BuildConfigFromFlags("", o.kubeconfig); err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", o.kubeconfig, err)
	}
	restCfg.UserAgent = "crivk/" + version
	restCfg.Wrap(wrap)
	return newAPIClients(restCfg, apiLimits{
		QPS: float32(o.apiQPS), Burst: o.apiBurst, EventQPS: float32(o.eventQPS), EventBurst: o.eventBurst,
		Heartbeat: o.nodeStatusUpdateFrequency,
	})
}

// connectRuntime is the runtime of the flags, waited for while it is not
// up (cri.Await; whileWaiting runs meanwhile).
func connectRuntime(ctx context.Context, o *options, recorder record.EventRecorder, pods *cm.Manager, agentMetrics *metrics.Agent, whileWaiting func(context.Context)) (*cri.Runtime, cri.VersionInfo, cri.Readiness, error) {
	var ver cri.VersionInfo
	var rd cri.Readiness
	dns := cri.DNSConfig{ClusterDomain: o.clusterDomain, ResolvConf: o.resolvConf}
	if o.clusterDNS != "" {
		dns.ClusterDNS = strings.Split(o.clusterDNS, ",")
	}
	memCapacity, err := nodestatus.MemoryCapacity()
	if err != nil {
		return nil, ver, rd, fmt.Errorf("reading the machine's memory: %w", err)
	}
	if strings.Contains(o.criEndpoint, "://") && !strings.HasPrefix(o.criEndpoint, "unix://") {
		return nil, ver, rd, fmt.Errorf("--cri-endpoint %q: only unix sockets are supported", o.criEndpoint)
	}
	cfg := cri.Config{Endpoint: o.criEndpoint, RequestTimeout: o.runtimeRequestTimeout, PodLogDir: o.podLogDir, ContainerLogsDir: o.containerLogsDir, DNS: dns,
		MemoryCapacity: memCapacity, MaxParallelImagePulls: o.maxParallelPulls, MaxParallelSandboxes: o.maxParallelSandboxes, Recorder: recorder,
		ObserveCall: agentMetrics.ObserveCall, Swap: cri.DetectSwapController()}
	if pods != nil {
		cfg.CgroupParent = pods.PodCgroup
		cfg.PodCgroups = pods
	}
	cfg.SeccompProfileRoot = filepath.Join(o.rootDir, "seccomp")
	cfg.PulledImages = cri.PulledImagesConfig{Dir: filepath.Join(o.rootDir, "image_manager"), Policy: o.config.ImagePullCredentialsVerificationPolicy, Allowlist: o.config.PreloadedImagesVerificationAllowlist()}
	if strings.HasPrefix(o.criEndpoint, "unix://") {
		reaper, err := taskevents.NewReaper(o.criEndpoint, "k8s.io")
		if err != nil {
			return nil, ver, rd, err
		}
		cfg.DeleteTask = reaper.DeleteTask
	}
	return cri.Await(ctx, cfg, whileWaiting)
}

// nodeAPISecurity returns the node API's TLS options (serving
// certificate, client CAs) and its authentication and authorisation.
func nodeAPISecurity(ctx context.Context, o *options, clients *apiClients) ([]func(*tls.Config) error, *nodeapi.Auth, error) {
	serving, err := certificate.ServingTLS(ctx, certificate.ServingConfig{Rotate: o.rotateServerCerts, CSRs: clients.csrs,
		CertFile: o.tlsCert, KeyFile: o.tlsKey, Dir: filepath.Join(o.rootDir, "pki"), NodeName: o.nodeName, NodeIP: o.nodeIP})
	if err != nil {
		return nil, nil, err
	}
	tlsOpts := []func(*tls.Config) error{serving}
	nodeAuth, err := newNodeAPIAuth(o, clients)
	if err != nil {
		return nil, nil, err
	}
	if nodeAuth.ClientCAs != nil {
		tlsOpts = append(tlsOpts, certificate.WithClientCA(nodeAuth.ClientCAs))
	}
	auth, err := nodeapi.NewAuth(nodeAuth)
	if err != nil {
		return nil, nil, err
	}
	return tlsOpts, auth, nil
}

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
}

// startEngine builds the engine with its volumes, probes, PLEG (woken by
// containerd's task events), node provider, eviction manager, garbage
// collectors, static pods and log rotation, and starts their loops. It is
// long because construction has one order (the eviction manager before the
// engine that asks it, the engine before the PLEG, the collectors and the
// mirror client that ask the engine); each step is a call into its package.
func startEngine(ctx context.Context, o *options, clients *apiClients, rt *cri.Runtime, ver cri.VersionInfo, nodeObj *v1.Node, recorder record.EventRecorder, pods *cm.Manager, agentMetrics *metrics.Agent, podInf vknode.PodInformer) (*agent, error) {
	a := &agent{mux: http.NewServeMux(), statusWrites: podwriter.NewStatusWrites()}
	apiPods := podInf.Lister()
	cache := pleg.NewCache()
	// Volumes: the objects pods reference are read with least privilege
	// (per-object watches, docs/rbac.md).
	a.objects = apiobjects.New(clients.core, clock.RealClock{})
	go a.objects.Run(ctx)
	allocatable := nodeObj.Status.Allocatable.DeepCopy()
	volumes, err := volume.New(volume.Config{
		RootDir: o.rootDir, Objects: a.objects,
		NodeAllocatable: func() v1.ResourceList { return allocatable },
	})
	if err != nil {
		return nil, err
	}
	probeMetrics := nodeapi.NewProbeMetrics()
	// Admission and the node status loop see the node as the API has it
	// (taints and labels set by others included) through a watch of the
	// node's own object, as the kubelet's node informer (nodestatus.View).
	nodes := nodestatus.NewView(nodeObj, ownNode(clients, o.nodeName))
	go nodes.Run(ctx, nodes.ListWatch(clients.core, o.nodeName))
	a.nodes = nodes
	var podCgroups lifecycle.PodCgroups
	var processes stats.Processes
	var podsCgroup stats.PodsCgroup
	var cgroupStats stats.Cgroups
	if pods != nil {
		podCgroups = pods
		processes = pods
		podsCgroup = pods
		cgroupStats = pods
	}
	gcs := &reclaim{}
	evictions, err := newEvictionManager(o, rt, recorder, agentMetrics, gcs, processes, pods)
	if err != nil {
		return nil, err
	}
	// Static pods and their mirror pods, kept apart from virtual-kubelet's
	// pods (internal/staticpods). The mirror client runs without
	// --pod-manifest-path too: it deletes mirror pods of no static pod.
	static := staticpods.NewSource(staticpods.SourceConfig{Path: o.podManifestPath, NodeName: o.nodeName, Period: o.fileCheckFrequency})
	mirrors, err := staticpods.NewMirrors(staticpods.MirrorConfig{Client: clients.core, Pods: apiPods, NodeName: o.nodeName, Static: static,
		// The engine is made below, before the mirror client runs.
		PodStatus: func(uid types.UID) *v1.Pod { return a.engine.PublishedPod(uid) },
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
	// (internal/devicemanager).
	devices, err := devicemanager.New(devicemanager.Config{Dir: filepath.Join(o.rootDir, "device-plugins"), Runtime: rt.Services()})
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
		Sysctls:    o.sysctls,
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
		// synced (the kubelet's sourcesReady).
		APIPods:       staticpods.WithStatic(func() ([]*v1.Pod, error) { return apiPods.List(labels.Everything()) }, static),
		APIPodsSynced: func() bool { return podInf.Informer().HasSynced() && static.HasSynced() },
		Runtime:       rt,
		Cache:         cache,
		RuntimeName:   ver.RuntimeName,
		NodeIP:        o.nodeIP,
		SyncInterval:  o.syncInterval,
		OnTerminated: staticpods.OnTerminated(podwriter.DeleteOnTerminated(clients.core, apiPods,
			a.statusWrites), static, mirrors),
		Recorder:           recorder,
		RootDir:            o.rootDir,
		Objects:            a.objects,
		ResourceClaims:     clients.resourceClaims,
		Volumes:            volumes,
		NodeAllocatable:    nodeObj.Status.Allocatable,
		ClusterDomain:      o.clusterDomain,
		ProbeRuntime:       rt,
		ProbeMetrics:       probeMetrics,
		ObserveSync:        agentMetrics.ObserveSync,
		ObservePodStart:    agentMetrics.ObservePodStart,
		ObservePodStartSLI: agentMetrics.ObservePodStartSLI,
		ObservePreemption:  agentMetrics.ObservePreemption,
		// The container GC's per-container limit, kept by every sync too.
		MaxDeadPerContainer:       o.gc.container.MaxPerPodContainer,
		MaxContainerRestartPeriod: o.maxContainerRestartPeriod,
		Host:                      o.hostAdmitter,
	})
	if err != nil {
		return nil, err
	}
	rt.SetRuntimeHelper(a.engine.RuntimeHelper())
	agentMetrics.WatchPods(a.engine.PodCounts)
	wake := make(chan struct{}, 1)
	if o.relistFeed == nil && o.runtimeEvents && strings.HasPrefix(o.criEndpoint, "unix://") {
		go runtimeWaker(o, wake).Run(ctx)
	}
	relist, err := pleg.New(pleg.Config{Runtime: rt, Cache: cache, Period: o.relistPeriod, Wake: wake, WakeSpacing: o.wakeSpacing, Feed: o.relistFeed, OnChange: a.engine.Kick,
		ObserveRelist: agentMetrics.ObserveRelist, ObserveRunning: agentMetrics.ObserveRunning})
	if err != nil {
		return nil, err
	}
	// Every node status period the conditions are compared with the
	// watched node, not a GET: the kubelet's tryUpdateNodeStatus reads
	// its first try from the node lister too.
	a.nodeProvider = nodestatus.NewNodeProvider(rt, nodeObj, o.nodeStatusUpdateFrequency, nodes.APINode, recorder, evictions, relist.Healthy)
	a.nodeProvider.SetDevicePlugins(devices.Capacity)
	a.relist = relist
	if gcs.containers, gcs.images, err = startGC(ctx, o, rt, a.engine, a.nodeProvider, recorder, agentMetrics); err != nil {
		return nil, err
	}
	go relist.Run(ctx)
	logMax := resource.MustParse(o.logMaxSize)
	go rt.RunLogRotation(ctx, cri.LogRotation{MaxSize: logMax.Value(), MaxFiles: o.logMaxFiles, Workers: o.logMaxWorkers, Interval: o.logMonitorInterval})
	go a.engine.Run(ctx)
	go evictions.Run(ctx, a.engine)
	go static.Run(ctx, a.engine)
	go mirrors.Run(ctx)
	a.mux.Handle("/metrics/probes", probeMetrics.Handler())
	a.mux.Handle("GET /metrics", agentMetrics.Handler())
	a.provider = provider.New(staticpods.Apart(a.engine, mirrors), apiPods, podwriter.WriteTerminal(clients.core, apiPods, a.statusWrites))
	nodeAPI, err := nodeapi.New(nodeapi.Config{NodeName: o.nodeName, RootDir: o.rootDir, Engine: a.engine,
		APIPods:   func() ([]*v1.Pod, error) { return apiPods.List(labels.Everything()) },
		PodStatus: rt, Streams: rt.Services(), LogFollow: rt.Services(), Stats: rt.Services(), ImageFs: rt,
		MemoryCapacity: nodestatus.MemoryCapacity, KubeletConfig: o.config.Effective, Processes: processes, Owned: rt.Owned(), PodsCgroup: podsCgroup,
		Cgroups: cgroupStats, Sandboxes: rt.Services(), SandboxImage: rt})
	if err != nil {
		return nil, err
	}
	a.mux.Handle("/", nodeAPI)
	a.objects.SetKick(func(namespace string) []*v1.Pod {
		pods, _ := apiPods.Pods(namespace).List(labels.Everything())
		return pods
	}, a.engine.Kick)
	if _, err := podInf.Informer().AddEventHandler(vknode.ReadinessGateKicks(a.engine.Kick)); err != nil {
		log.L.WithError(err).Warn("readiness gates are seen at each pod's resync only")
	}
	if _, err := podInf.Informer().AddEventHandler(vknode.StatusReconciles(a.engine.ReconcileStatus)); err != nil {
		return nil, err
	}
	if _, err := podInf.Informer().AddEventHandler(vknode.DeletedPodKills(func(p *v1.Pod) { a.engine.Kill(ctx, p) })); err != nil {
		return nil, err
	}
	if _, err := podInf.Informer().AddEventHandler(podwriter.ForgetDeleted(a.statusWrites)); err != nil {
		return nil, err
	}
	if _, err := podInf.Informer().AddEventHandler(mirrors.Handler()); err != nil {
		return nil, err
	}
	// A static pod is synced again once its mirror pod is seen: its status
	// waits for the mirror's right after a restart (lifecycle's
	// holdStaticStatus).
	if _, err := podInf.Informer().AddEventHandler(staticpods.MirrorSeenKicks(a.engine.Kick)); err != nil {
		return nil, err
	}
	return a, nil
}

// newEvictionManager is the eviction manager of the flags, observing the
// node through its own nodeapi/stats summary (with the containers' logs).
// Image and container GC (package images) are not wired yet: disk
// pressure evicts pods at once. With pod cgroups (pods non-nil) kubepods
// bounds the pods, as the kubelet's --enforce-node-allocatable=pods: the
// summary has its "pods" system container, and allocatableMemory.available
// is observed and twinned with each hard memory.available threshold. A
// node of many measures memory.available on its part of the machine too
// (eviction.Config.MemoryShare).
func newEvictionManager(o *options, rt *cri.Runtime, recorder record.EventRecorder, agentMetrics *metrics.Agent, gcs *reclaim, processes stats.Processes, pods *cm.Manager) (*eviction.Manager, error) {
	var podsCgroup stats.PodsCgroup
	var podsMemcg string
	if pods != nil {
		podsCgroup = pods
		podsMemcg, _ = pods.PodsDir("memory")
	}
	st, err := stats.New(stats.Config{NodeName: o.nodeName, RootDir: o.rootDir, PodLogDir: o.podLogDir, Runtime: rt.Services(), ImageFs: rt,
		MemoryCapacity: nodestatus.MemoryCapacity, Processes: processes, Owned: rt.Owned(), PodsCgroup: podsCgroup})
	if err != nil {
		return nil, err
	}
	// A node of many: memory.available is also its part of the machine's
	// memory less its own pods' working set (docs/scale.md).
	var memoryShare int64
	if !o.portion.Whole() {
		mem, err := nodestatus.MemoryCapacity()
		if err != nil {
			return nil, fmt.Errorf("reading the machine's memory: %w", err)
		}
		memoryShare = o.portion.Scale(mem)
	}
	return eviction.New(eviction.Config{
		Thresholds: o.evictionThresholds, PressureTransitionPeriod: o.evictionPressureTransition,
		MaxPodGracePeriodSeconds: o.evictionMaxPodGracePeriod, MonitoringPeriod: o.evictionMonitoringPeriod,
		LocalStorageCapacityIsolation: true, Summary: st.Summarize, Recorder: recorder, NodeRef: nodestatus.NodeRef(o.nodeName),
		ObserveEviction: agentMetrics.ObserveEviction, ObserveStatsAge: agentMetrics.ObserveEvictionStatsAge,
		ImageGC: gcs, ContainerGC: gcs, KernelMemcgNotification: o.kernelMemcgNotification,
		EnforceNodeAllocatable: pods != nil, PodsMemoryCgroup: podsMemcg, MemoryShare: memoryShare,
	})
}

// serveNode runs the node and pod controllers until ctx ends.
func serveNode(ctx context.Context, o *options, n *vknode.Node, a *agent) error {
	go func() {
		if err := n.WaitReady(ctx); err != nil {
			return
		}
		log.G(ctx).WithField("address", o.nodeIP).Info("node registered and running")
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

// newNodeAPIAuth is the node API's authentication and authorization
// configuration from the flags.
func newNodeAPIAuth(o *options, c *apiClients) (nodeapi.AuthConfig, error) {
	cfg := nodeapi.AuthConfig{NodeName: o.nodeName, Anonymous: o.anonymousAuth}
	if o.clientCA != "" {
		pool, err := certificate.LoadCAPool(o.clientCA)
		if err != nil {
			return cfg, err
		}
		cfg.ClientCAs = pool
	}
	if o.tokenWebhook {
		cfg.TokenReviews = c.tokenReviews.TokenReviews()
	}
	switch o.authorizationMode {
	case "Webhook":
		cfg.SubjectAccessReviews = c.accessReviews.SubjectAccessReviews()
	case "AlwaysAllow":
	default:
		return cfg, fmt.Errorf("--authorization-mode %q: must be Webhook or AlwaysAllow", o.authorizationMode)
	}
	return cfg, nil
}
