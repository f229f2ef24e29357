package nodeagent

import (
	"errors"
	"fmt"
	"math"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/crivk/crivk/certificate"
	"github.com/crivk/crivk/cm"
	"github.com/crivk/crivk/credentialprovider"
	"github.com/crivk/crivk/cri"
	evictionapi "github.com/crivk/crivk/eviction/api"
	"github.com/crivk/crivk/images"
	"github.com/crivk/crivk/kubeletconfig"
	"github.com/crivk/crivk/lifecycle/admission"
	"github.com/crivk/crivk/nodestatus"
	"github.com/sirupsen/logrus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Settings are the node agent's settings: cmd/crivk's flags, after the
// configuration file (--config) was applied, each field the flag it is
// named after (usage.go has the flags' meanings). Validate checks the
// values and derives what the run reads from them (the unexported
// fields); Run validates again.
type Settings struct {
	// AgentVersion is crivk's version (cmd/crivk's build-time version):
	// the Node's kubeletVersion, the API clients' user agent, metrics.
	AgentVersion string
	Kubeconfig   string
	// bootstrapKubeconfig, when set, is the TLS bootstrap credential the
	// node's client certificate is requested with (certificate).
	BootstrapKubeconfig string
	NodeName            string
	NodeCount           int // --node-count: nodes sharing the machine (fleet.go)
	CRIEndpoint         string
	NodeIP              string
	RootDir             string
	PodLogDir           string
	TLSCertFile         string
	TLSKeyFile          string
	ClientCAFile        string
	// The node API's authentication and authorization (nodeapi.Auth).
	AnonymousAuth     bool
	TokenWebhook      bool
	AuthorizationMode string
	Address           string
	Port              int
	LogLevel          string
	MaxPods           int64
	UnsafeSysctls     string
	RotateServerCerts bool
	Tracing           bool
	// traceFile, with tracing, is where every span is appended (tracing.go).
	TraceFile      string
	NodeLabelsFlag string
	TaintsFlag     string
	ClusterDNS     string
	ClusterDomain  string
	ResolvConf     string
	SyncInterval   time.Duration
	RelistPeriod   time.Duration
	WakeSpacing    time.Duration
	// runtimeRequestTimeout is the kubelet's --runtime-request-timeout.
	RuntimeRequestTimeout time.Duration
	APIQPS                float64
	APIBurst              int
	EventQPS              float64
	EventBurst            int
	// maxParallelPulls bounds concurrent image pulls (0: no limit).
	MaxParallelPulls int
	// maxParallelSandboxes bounds concurrent RunPodSandbox calls (0: none).
	MaxParallelSandboxes int
	// Container log rotation (the kubelet's defaults 10Mi x 5).
	LogMaxSize  string
	LogMaxFiles int
	// The kubelet's containerLogMaxWorkers and containerLogMonitorInterval
	// (defaults 1 and 10s).
	LogMaxWorkers      int
	LogMonitorInterval time.Duration
	// profilingAddress serves net/http/pprof when set (profiling.go).
	ProfilingAddress string
	// runtimeEvents wakes the PLEG on containerd task events (cri/taskevents).
	RuntimeEvents bool
	// The kubelet's node status loop: conditions computed and compared
	// with the API's node every update frequency, the whole status
	// reported at least every report frequency.
	NodeStatusUpdateFrequency time.Duration
	NodeStatusReportFrequency time.Duration
	// Resources: the pod cgroup tree (package cm) and what is taken off
	// the capacity before pods get it.
	CgroupRoot    string
	CgroupsPerQOS bool
	// FailCgroupV1 refuses to start on a cgroup v1 host (the kubelet's
	// failCgroupV1, default true): a v1 host must say
	// --fail-cgroupv1=false.
	FailCgroupV1 bool
	// Cgroups is the machine's cgroup filesystem (package cm, the one
	// reader that knows cgroup v1 from v2): its version decides the v1
	// refusal and the containers' OOM groups, and every cgroup file of the
	// run is read through it. nil: Validate detects the machine's
	// (cm.DetectHost); tests give a fixed one.
	Cgroups        *cm.Host
	SystemReserved string
	KubeReserved   string
	EvictionHard   string
	// podMaxPids is each pod cgroup's pids.max (-1: none).
	PodMaxPids int64
	// oomScoreAdj is crivk's own OOM score adjustment (the kubelet's
	// --oom-score-adj).
	OOMScoreAdj int
	// The health endpoint (internal/healthz): plain HTTP, port 0 off.
	HealthzPort        int
	HealthzBindAddress string
	// readOnlyPort is the kubelet's read-only port (nodeapi.ReadOnly):
	// plain HTTP, no authentication, 0 off.
	ReadOnlyPort int
	// containerLogsDir is where containers' logs are linked from (the
	// kubelet's /var/log/containers); empty: no links.
	ContainerLogsDir string
	// The eviction manager's flags (package eviction), the kubelet's.
	EvictionFlags              evictionapi.Flags
	EvictionMaxPodGracePeriod  int64
	EvictionPressureTransition time.Duration
	EvictionMonitoringPeriod   time.Duration
	KernelMemcgNotification    bool
	// maxContainerRestartPeriod caps the crash-loop back-off.
	MaxContainerRestartPeriod time.Duration
	// UserNamespacesIDsPerPod is the length of each user-namespaced pod's
	// ID range (the KubeletConfiguration's userNamespaces.idsPerPod).
	UserNamespacesIDsPerPod int64
	// UserNamespacesRange is where the pods' user namespace IDs come
	// from: "kubelet" (the kubelet's: the `kubelet` user's subordinate
	// range, or every ID from one pod's length up), "none" (pods with
	// hostUsers: false are refused: beside another agent that takes the
	// same IDs) or FIRST:LENGTH.
	UserNamespacesRange string

	// config is --config and --config-dir (kubeletconfig).
	Config *kubeletconfig.Files
	// ImageCredentialProviderConfig and ImageCredentialProviderBinDir are
	// the kubelet's --image-credential-provider-config and
	// --image-credential-provider-bin-dir (package credentialprovider;
	// the KubeletConfiguration has no field for them): either given,
	// Validate registers the plugins, or fails as the kubelet exits.
	ImageCredentialProviderConfig string
	ImageCredentialProviderBinDir string
	// podManifestPath is the static pods' directory or file (the kubelet's
	// staticPodPath), read every fileCheckFrequency (staticpods).
	PodManifestPath    string
	FileCheckFrequency time.Duration
	// GC: the image and container garbage collectors' policies (gc.go).
	GC GCSettings
	// NodeShares is --node-shares, the nodes' weights (fleet.ParseShares);
	// empty: equal shares.
	NodeShares string

	// Derived by Validate from the fields above.
	nodeLabels         map[string]string
	taints             []v1.Taint
	sysctls            *admission.Sysctls
	reservations       nodestatus.Reservations
	evictionThresholds []evictionapi.Threshold
	// credentialPlugins are the registered credential provider plugins;
	// nil: neither flag was given.
	credentialPlugins *credentialprovider.Plugins
}

// GCSettings are the garbage collectors' policies (the kubelet's flags and
// defaults).
type GCSettings struct {
	Image     images.Policy
	Container cri.GCPolicy
}

func (g *GCSettings) validate() error {
	if err := g.Image.Validate(); err != nil {
		return err
	}
	return g.Container.Validate()
}

// Validate checks the settings' values, as the kubelet's
// ValidateKubeletConfiguration, and derives the parsed forms the run
// reads (labels, taints, sysctls, reservations, eviction thresholds,
// absolute directories). Every check that needs no runtime and no API
// server is here, so that a mistake is reported before crivk waits for
// anything. It is long because it is a list of independent checks, in
// the order the flags are documented.
func (o *Settings) Validate() error {
	if o.NodeName == "" {
		return errors.New("--node-name is empty")
	}
	if o.NodeCount > 1 && o.PodManifestPath != "" {
		return errors.New("--pod-manifest-path with --node-count above 1: every node would run the same static pods")
	}
	if o.Port <= 0 || o.Port > 65535 {
		return fmt.Errorf("--port %d is not a port number", o.Port)
	}
	if o.UserNamespacesIDsPerPod < 65536 || o.UserNamespacesIDsPerPod > math.MaxUint32 || o.UserNamespacesIDsPerPod%65536 != 0 {
		return fmt.Errorf("--user-namespaces-ids-per-pod %d must be a positive multiple of 65536 below 2^32", o.UserNamespacesIDsPerPod)
	}
	if r := o.UserNamespacesRange; r != "kubelet" && r != "none" {
		if _, _, err := parseIDRange(r); err != nil {
			return err
		}
	}
	if o.MaxContainerRestartPeriod < time.Second || o.MaxContainerRestartPeriod > 300*time.Second {
		return fmt.Errorf("--max-container-restart-period %s must be between 1s and 300s", o.MaxContainerRestartPeriod)
	}
	if o.RuntimeRequestTimeout <= 0 {
		return fmt.Errorf("--runtime-request-timeout must be positive")
	}
	if o.SyncInterval <= 0 || o.RelistPeriod <= 0 {
		return fmt.Errorf("--sync-interval and --pleg-relist-period must be positive")
	}
	if o.WakeSpacing < 0 || o.WakeSpacing >= o.RelistPeriod {
		return fmt.Errorf("--pleg-wake-spacing %s must be at least 0 and below --pleg-relist-period %s", o.WakeSpacing, o.RelistPeriod)
	}
	if q, err := resource.ParseQuantity(o.LogMaxSize); err != nil || q.Value() <= 0 {
		return fmt.Errorf("--container-log-max-size %q is not a positive quantity", o.LogMaxSize)
	}
	if o.LogMaxFiles < 2 {
		return fmt.Errorf("--container-log-max-files must be at least 2, got %d", o.LogMaxFiles)
	}
	if o.LogMaxWorkers < 1 {
		return fmt.Errorf("invalid configuration: containerLogMaxWorkers must be greater than or equal to 1 (--container-log-max-workers=%d)", o.LogMaxWorkers)
	}
	if o.LogMonitorInterval.Seconds() < 3 {
		return fmt.Errorf("invalid configuration: containerLogMonitorInterval must be a positive time duration greater than or equal to 3s (--container-log-monitor-interval=%s)", o.LogMonitorInterval)
	}
	if o.MaxParallelPulls < 0 {
		return fmt.Errorf("--max-parallel-image-pulls must not be negative, got %d", o.MaxParallelPulls)
	}
	if o.HealthzPort < 0 || o.HealthzPort > 65535 {
		return fmt.Errorf("--healthz-port %d is not a port number (0 disables the endpoint)", o.HealthzPort)
	}
	if net.ParseIP(o.HealthzBindAddress) == nil {
		return fmt.Errorf("--healthz-bind-address %q is not an IP address", o.HealthzBindAddress)
	}
	if o.HealthzPort == o.Port {
		return fmt.Errorf("--healthz-port %d is the node API's --port", o.HealthzPort)
	}
	if o.ReadOnlyPort < 0 || o.ReadOnlyPort > 65535 {
		return fmt.Errorf("--read-only-port %d is not a port number (0 disables it)", o.ReadOnlyPort)
	}
	if o.ReadOnlyPort > 0 && (o.ReadOnlyPort == o.Port || o.ReadOnlyPort == o.HealthzPort) {
		return fmt.Errorf("--read-only-port %d is the node API's --port or the --healthz-port", o.ReadOnlyPort)
	}
	if o.ContainerLogsDir != "" && !filepath.IsAbs(o.ContainerLogsDir) {
		return fmt.Errorf("--container-logs-dir %q is not an absolute path", o.ContainerLogsDir)
	}
	if o.APIQPS <= 0 || o.APIBurst <= 0 {
		return fmt.Errorf("--kube-api-qps %v and --kube-api-burst %d must be positive", o.APIQPS, o.APIBurst)
	}
	// As the kubelet's: --event-qps 0 is no limit, and --event-burst
	// matters only with a limit.
	if o.EventQPS < 0 {
		return fmt.Errorf("--event-qps %v must not be negative (0: no limit)", o.EventQPS)
	}
	if o.EventQPS > 0 && o.EventBurst <= 0 {
		return fmt.Errorf("--event-burst %d must be positive when --event-qps limits events", o.EventBurst)
	}
	if o.EventBurst < 0 {
		return fmt.Errorf("--event-burst %d must not be negative", o.EventBurst)
	}
	if _, err := authorizationWebhook(o.AuthorizationMode); err != nil {
		return err
	}
	if o.ClientCAFile != "" {
		if _, err := certificate.LoadCAPool(o.ClientCAFile); err != nil {
			return fmt.Errorf("--client-ca-file: %w", err)
		}
	}
	var err error
	if o.nodeLabels, err = nodestatus.ParseNodeLabels(o.NodeLabelsFlag); err != nil {
		return err
	}
	if o.taints, err = nodestatus.ParseTaints(o.TaintsFlag); err != nil {
		return fmt.Errorf("--register-with-taints: %w", err)
	}
	if o.Tracing && o.ProfilingAddress == "" && o.TraceFile == "" {
		return fmt.Errorf("--tracing needs --profiling-address (traces are served there at /debug/tracez) or --trace-file")
	}
	if o.TraceFile != "" && !o.Tracing {
		return fmt.Errorf("--trace-file needs --tracing")
	}
	if o.RotateServerCerts && (o.TLSCertFile != "" || o.TLSKeyFile != "") {
		return fmt.Errorf("--rotate-server-certificates and --tls-cert-file/--tls-private-key-file exclude each other")
	}
	var unsafe []string
	for _, p := range strings.Split(o.UnsafeSysctls, ",") {
		if p = strings.TrimSpace(p); p != "" {
			unsafe = append(unsafe, p)
		}
	}
	if o.sysctls, err = admission.NewSysctls("", unsafe); err != nil {
		return fmt.Errorf("--allowed-unsafe-sysctls: %w", err)
	}
	if o.MaxPods <= 0 {
		return fmt.Errorf("--max-pods must be positive, got %d", o.MaxPods)
	}
	if o.reservations.SystemReserved, err = nodestatus.ParseResourceList(o.SystemReserved); err != nil {
		return fmt.Errorf("--system-reserved: %w", err)
	}
	if o.reservations.KubeReserved, err = nodestatus.ParseResourceList(o.KubeReserved); err != nil {
		return fmt.Errorf("--kube-reserved: %w", err)
	}
	if err := o.GC.validate(); err != nil {
		return err
	}
	if err := o.registerCredentialProviders(); err != nil {
		return err
	}
	o.EvictionFlags.Hard = o.EvictionHard
	if o.evictionThresholds, err = evictionapi.ParseThresholds(o.EvictionFlags); err != nil {
		return err
	}
	// One parse for both readers: the eviction manager and the
	// allocatable (the kubelet's evictionapi.Threshold).
	o.reservations.EvictionHard = o.evictionThresholds
	if o.OOMScoreAdj < -1000 || o.OOMScoreAdj > 1000 {
		return fmt.Errorf("--oom-score-adj %d is not in [-1000, 1000]", o.OOMScoreAdj)
	}
	if !strings.HasPrefix(o.CgroupRoot, "/") {
		return fmt.Errorf("--cgroup-root %q is not an absolute cgroup path", o.CgroupRoot)
	}
	if _, err := logrus.ParseLevel(o.LogLevel); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	if o.NodeIP != "" && net.ParseIP(o.NodeIP) == nil {
		return fmt.Errorf("--node-ip %q is not an IP address", o.NodeIP)
	}
	for _, d := range []*string{&o.RootDir, &o.PodLogDir} {
		abs, err := filepath.Abs(*d)
		if err != nil {
			return err
		}
		*d = abs
	}
	if _, err := o.fleetSpecs(); err != nil {
		return err
	}
	return o.checkCgroups()
}

// registerCredentialProviders registers the image credential provider
// plugins when either flag is given (credentialprovider.New, the kubelet's
// RegisterCredentialProviderPlugins, whose failure stops the kubelet with
// "Failed to register CRI auth plugins").
func (o *Settings) registerCredentialProviders() error {
	opts := credentialprovider.Options{ConfigPath: o.ImageCredentialProviderConfig, BinDir: o.ImageCredentialProviderBinDir}
	if !opts.Enabled() {
		o.credentialPlugins = nil
		return nil
	}
	p, err := credentialprovider.New(opts)
	if err != nil {
		return fmt.Errorf("Failed to register CRI auth plugins: %w", err)
	}
	o.credentialPlugins = p
	return nil
}

// The kubelet's refusals of the host's cgroups
// (pkg/kubelet/apis/config/validation/validation_linux.go,
// validateKubeletOSConfiguration), in its words.
const (
	errFailCgroupV1         = "kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is unsupported and will be removed in a future release"
	errSingleProcessOOMKill = "invalid configuration: singleProcessOOMKill must not be explicitly set to false when using cgroup v1"
)

// checkCgroups refuses, as the kubelet's configuration validation, a
// cgroup v1 host unless --fail-cgroupv1=false, and singleProcessOOMKill
// set to false there (cgroup v1 kills one process at a time, whatever is
// asked). It detects the host's cgroups first when no Cgroups was given;
// it comes last in Validate, as the kubelet checks the host after the
// values.
func (o *Settings) checkCgroups() error {
	if o.Cgroups == nil {
		o.Cgroups = cm.DetectHost()
	}
	if o.Cgroups.Version() != 1 {
		return nil
	}
	if o.FailCgroupV1 {
		return errors.New(errFailCgroupV1)
	}
	if p := o.singleProcessOOMKill(); p != nil && !*p {
		return errors.New(errSingleProcessOOMKill)
	}
	return nil
}

// singleProcessOOMKill is --single-process-oom-kill (kubeletconfig.Files);
// nil: not given.
func (o *Settings) singleProcessOOMKill() *bool {
	if o.Config == nil {
		return nil
	}
	return o.Config.SingleProcessOOMKill
}

// oomKillGroup tells whether every container's cgroup is an OOM group
// (cri.Config.OOMKillGroup), as the kubelet's NewMainKubelet decides its
// singleProcessOOMKill: on cgroup v1 never (one process at a time is v1's
// only way); on v2 unless singleProcessOOMKill is true (unset is false).
// After Validate.
func (o *Settings) oomKillGroup() bool {
	if o.Cgroups.Version() != 2 {
		return false
	}
	p := o.singleProcessOOMKill()
	return p == nil || !*p
}
