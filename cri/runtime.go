package cri

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	"github.com/crivk/crivk/cri/pullrecords"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Config configures a Runtime. Connect validates it and fills defaults.
type Config struct {
	// Endpoint is the CRI socket, unix:///run/containerd/containerd.sock or
	// a bare path; only unix sockets are supported.
	Endpoint string
	// ConnectTimeout bounds Connect: the dial and the first Version call
	// that checks the runtime answers. Default 10 s.
	ConnectTimeout time.Duration
	// RequestTimeout is the kubelet's --runtime-request-timeout: the
	// deadline of every unary CRI call after Connect, with the kubelet's
	// exceptions (RunPodSandbox gets twice as long, StopContainer and
	// ExecSync get it on top of the grace period and of the command's own
	// timeout; image pulls have none). Default 2 minutes.
	RequestTimeout time.Duration
	// PodLogDir is where pod log directories are created
	// (<PodLogDir>/<ns>_<name>_<uid>/<container>/<attempt>.log).
	PodLogDir string
	// ContainerLogsDir is where each started container's log is linked
	// from (<pod>_<namespace>_<container>-<id>.log, logsymlink.go): the
	// kubelet's /var/log/containers. Empty: no links. The directory must
	// exist.
	ContainerLogsDir string
	// DNS holds the cluster DNS settings used for dnsPolicy ClusterFirst.
	DNS DNSConfig
	// RuntimeHandler is the CRI runtime handler of pods without a
	// RuntimeClass (empty: the runtime's default). A pod's RuntimeClass
	// names its own (SetRuntimeClasses).
	RuntimeHandler string
	// SeccompProfileRoot is where Localhost seccomp profiles are
	// resolved: <root-dir>/seccomp, the kubelet's. Empty: the profile name
	// is passed to the runtime as given.
	SeccompProfileRoot string
	// CgroupParent returns the cgroup parent of a pod's sandbox: its pod
	// cgroup (package cm), under which containerd puts the sandbox and
	// every container of the pod. nil means the runtime's default.
	CgroupParent func(pod *v1.Pod) string
	// PodCgroups resizes the pod cgroup around an in-place resize of its
	// containers (resize.go); nil: only the containers are resized.
	PodCgroups PodCgroupResizer
	// DeleteTask kills and deletes a container's task behind the CRI's
	// back (containerd's task API): used only when RemoveContainer fails
	// because containerd still holds a task its CRI plugin lost track of.
	// nil: such a container stays (and is reported) until removed by hand.
	DeleteTask func(ctx context.Context, containerID string) error
	// Recorder receives the kubelet's container and pod events (Pulled,
	// Created, Started, Killing, ...); nil drops them.
	Recorder EventRecorder
	// ObserveCall, if set, is told every CRI call's operation (the
	// kubelet's operation_type: run_podsandbox, create_container,
	// list_containers, ...), duration and error (the kubelet's
	// kubelet_runtime_operations_* metrics).
	ObserveCall func(operation string, took time.Duration, err error)
	// ObserveUserNamespacedStart, if set, is told of every sync that
	// creates the sandbox of a pod with hostUsers false, and whether that
	// sync failed anywhere (the kubelet's
	// kubelet_started_user_namespaced_pods_total and _errors_total).
	ObserveUserNamespacedStart func(failed bool)
	// MemoryCapacity is the node's memory in bytes: Burstable containers'
	// OOM score adjustment is relative to it (resources.go).
	MemoryCapacity int64
	// Swap is the host's swap controller (SwapControllerOf, the
	// kubelet's check): every container gets the kubelet's NoSwap limit
	// for it, at creation and at an in-place resize (swap.go). The zero
	// value, NoSwapController, sends no swap limit.
	Swap SwapController
	// OOMKillGroup makes every container's cgroup an OOM group
	// (memory.oom.group 1, through the resources' Unified map): the
	// kernel's OOM killer kills all the container's processes together,
	// not only the biggest. The kubelet's, on cgroup v2 unless
	// singleProcessOOMKill (internal/nodeagent decides; runc takes the
	// unified map on cgroup v2 only), at creation and at an in-place
	// resize (oomgroup.go).
	OOMKillGroup bool
	// MaxParallelImagePulls bounds how many image pulls run at once; 0 means
	// no limit (the kubelet's default is one at a time:
	// --serialize-image-pulls). Concurrent pulls of one image are always
	// made once.
	MaxParallelImagePulls int
	// MaxParallelSandboxes bounds how many RunPodSandbox calls run at once
	// (0: no limit, the kubelet's behaviour). Creating a sandbox sets up
	// its network namespace and CNI, starts a shim and writes containerd's
	// metadata store; a few hundred at once make containerd thrash and
	// finish the whole batch later than a bounded queue does. Pods waiting
	// for their turn stay in ContainerCreating.
	MaxParallelSandboxes int
	// Node, when not empty, makes this Runtime one node's view of a
	// runtime that several nodes of one crivk process share
	// (docs/scale.md): every sandbox and container it creates carries
	// LabelNode=Node, and every listing of its own objects (Snapshot and
	// ListPods, GetPodStatus, the container GC, log rotation, the dead
	// log link sweep) selects OwnedSelector(Node), so that it never
	// sees, syncs or removes another node's. Empty, a single-node crivk:
	// no node label is written and every crivk object (LabelManagedBy)
	// is its own, those of earlier versions included. The images in use
	// (ContainerImages) stay the whole runtime's either way.
	Node string
	// Clock times hooks (sleep, the preStop share of the grace period);
	// nil is the real clock.
	Clock clock.WithTicker
	// PulledImages are the records of crivk's image pulls and the
	// credentials they succeeded with, and the policy deciding whether a
	// pod may use an image already present without pulling it with its
	// own credentials (package pullrecords; the kubelet's
	// KubeletEnsureSecretPulledImages, imagePullCredentialsVerificationPolicy
	// and preloadedImagesVerificationAllowlist). Dir is
	// <root-dir>/image_manager; New refuses an invalid policy. Dir empty:
	// no records and no check, every pod uses any image present (tests,
	// and the e2e suite's own runtime connection).
	PulledImages PulledImagesConfig
	// SELinuxEnabled reports whether the host has SELinux enabled, which
	// decides whether the mounts that ask for it are relabelled
	// (selinux.go). nil is go-selinux's GetEnabled, the kubelet's check.
	SELinuxEnabled func() bool
	// UserNamespaces gives a pod with spec.hostUsers: false its ID
	// mappings (package userns, the kubelet's userns manager); nil: such a
	// pod is refused on any runtime, since it must not run in the host's
	// user namespace.
	UserNamespaces UserNamespaces
}

// UserNamespaces allocates a pod's user namespace: its mappings, the same
// at every call until the pod's allocation is released (userns.Manager).
type UserNamespaces interface {
	PodMappings(uid types.UID) (*runtimeapi.UserNamespace, error)
}

// PulledImagesConfig is pullrecords.Config: the records' directory, the
// policy and its allowlist.
type PulledImagesConfig = pullrecords.Config

// EventRecorder receives the kubelet-style events of the runtime manager
// (Pulling, Pulled, Created, Killing, FailedPostStartHook, ...); client-go's
// record.EventRecorder is one.
type EventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// Runtime talks to one CRI endpoint. It is safe for concurrent use; it keeps
// no per-pod state.
type Runtime struct {
	cfg    Config
	rs     RuntimeService
	is     ImageService
	resolv resolvConf
	// helper is set once by SetRuntimeHelper before the first SyncPod and
	// only read after that.
	helper RuntimeHelper
	// providers are the node's credential providers, set once by
	// SetCredentialProviders before the first SyncPod and only read after
	// that; nil: none.
	providers CredentialProviders
	// classes is set once by SetRuntimeClasses before the first SyncPod
	// and only read after that.
	classes RuntimeClasses
	// recorder is Config.Recorder; nil drops events.
	recorder EventRecorder
	clock    clock.WithTicker
	puller   *puller
	// pulls are the image pull records (Config.PulledImages); nil: none.
	// One Manager for the runtime, shared by every node's view (ForNode).
	pulls *pullrecords.Manager
	// sandboxes holds a token per RunPodSandbox in flight; nil: no limit.
	sandboxes chan struct{}
	// started is when this Runtime was made: a container still created
	// but not started from before then was left by an agent that stopped
	// between CreateContainer and StartContainer (RemoveInterrupted).
	started time.Time

	handlersMu sync.Mutex
	// rroHandlers are the runtime handlers the last CRI Status said support
	// recursive read-only mounts (the kubelet's runtimeState's handlers,
	// refreshed by the node status loop's Status). Guarded by handlersMu.
	rroHandlers map[string]bool

	// actuated holds the memory requests in-place resizes sent
	// (resize.go).
	actuated actuatedMemory

	// logRotation is held by RotateLogs for a whole pass (logrotate.go):
	// two passes never overlap, so no log is rotated by two at once.
	logRotation sync.Mutex
}

// ErrUnreachable is returned by Connect when the CRI endpoint does not answer.
var ErrUnreachable = errors.New("CRI endpoint unreachable")

// Connect dials the CRI endpoint and checks that it answers Version, within
// cfg.ConnectTimeout. The error names the endpoint and wraps ErrUnreachable
// when nothing answers. The runtime and image services share one
// connection.
func Connect(ctx context.Context, cfg Config) (*Runtime, error) {
	if cfg.Endpoint == "" {
		return nil, fmt.Errorf("no CRI endpoint given")
	}
	if cfg.ConnectTimeout < 0 || cfg.RequestTimeout < 0 {
		return nil, fmt.Errorf("negative CRI timeout (connect %s, request %s)", cfg.ConnectTimeout, cfg.RequestTimeout)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = defaultConnectTimeout
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = defaultRequestTimeout
	}
	if cfg.PodLogDir == "" {
		return nil, fmt.Errorf("no pod log directory given")
	}
	if !filepath.IsAbs(cfg.PodLogDir) {
		return nil, fmt.Errorf("pod log directory %q is not an absolute path", cfg.PodLogDir)
	}
	if cfg.ContainerLogsDir != "" && !filepath.IsAbs(cfg.ContainerLogsDir) {
		return nil, fmt.Errorf("container logs directory %q is not an absolute path", cfg.ContainerLogsDir)
	}
	if err := cfg.DNS.validate(); err != nil {
		return nil, err
	}
	c, err := dialRemote(ctx, cfg.Endpoint, cfg.ConnectTimeout, cfg.RequestTimeout, cfg.ObserveCall)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnreachable, cfg.Endpoint, err)
	}
	r, err := New(cfg, c, c)
	if err != nil {
		c.Close()
		return nil, err
	}
	return r, nil
}

// The kubelet's defaults.
const (
	defaultConnectTimeout = 10 * time.Second
	defaultRequestTimeout = 2 * time.Minute
)

// New builds a Runtime over already connected services (tests pass fakes).
func New(cfg Config, rs RuntimeService, is ImageService) (*Runtime, error) {
	if cfg.MaxParallelSandboxes < 0 {
		return nil, fmt.Errorf("MaxParallelSandboxes %d is negative", cfg.MaxParallelSandboxes)
	}
	if cfg.MaxParallelImagePulls < 0 {
		return nil, fmt.Errorf("MaxParallelImagePulls %d is negative", cfg.MaxParallelImagePulls)
	}
	r := &Runtime{cfg: cfg, rs: rs, is: is, clock: cfg.Clock, puller: newPuller(cfg.MaxParallelImagePulls), recorder: cfg.Recorder}
	if cfg.MaxParallelSandboxes > 0 {
		r.sandboxes = make(chan struct{}, cfg.MaxParallelSandboxes)
	}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	r.started = r.clock.Now()
	if cfg.PulledImages.Dir != "" {
		m, err := pullrecords.New(cfg.PulledImages, r.imagesForRecords)
		if err != nil {
			return nil, err
		}
		r.pulls = m
	}
	if cfg.DNS.ResolvConf != "" {
		rc, err := parseResolvConfFile(cfg.DNS.ResolvConf)
		if err != nil {
			return nil, err
		}
		r.resolv = rc
	}
	return r, nil
}

// Close releases the connection (the services may be one object; closing
// it twice is harmless).
func (r *Runtime) Close() error {
	var errs []error
	for _, s := range []any{r.rs, r.is} {
		if c, ok := s.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// Services exposes the underlying CRI services to readers that need the raw
// API (log streaming follows a container through ContainerStatus).
func (r *Runtime) Services() RuntimeService { return r.rs }

// VersionInfo is what the node reports about its runtime.
type VersionInfo struct {
	RuntimeName, RuntimeVersion, RuntimeAPIVersion string
}

// Version asks the runtime for its name and version.
func (r *Runtime) Version(ctx context.Context) (VersionInfo, error) {
	v, err := r.rs.Version(ctx, "v1")
	if err != nil {
		return VersionInfo{}, fmt.Errorf("CRI Version on %s: %w", r.cfg.Endpoint, err)
	}
	return VersionInfo{RuntimeName: v.RuntimeName, RuntimeVersion: v.RuntimeVersion, RuntimeAPIVersion: v.RuntimeApiVersion}, nil
}

// Readiness is the runtime's own view of whether it can run pods.
type Readiness struct {
	RuntimeReady bool
	NetworkReady bool
	// Message explains what is not ready, in the runtime's words.
	Message string
	// Handlers are the runtime handlers the runtime reports, in its
	// order, with their features (the Node's status.runtimeHandlers); nil
	// when the runtime did not answer.
	Handlers []RuntimeHandler
}

// RuntimeHandler is one runtime handler of the CRI Status ("" is the
// default handler) and the features it supports.
type RuntimeHandler struct {
	Name                    string
	RecursiveReadOnlyMounts bool
	UserNamespaces          bool
}

// Status returns the RuntimeReady and NetworkReady conditions of the runtime.
func (r *Runtime) Status(ctx context.Context) (Readiness, error) {
	resp, err := r.rs.Status(ctx, false)
	if err != nil {
		return Readiness{}, fmt.Errorf("CRI Status on %s: %w", r.cfg.Endpoint, err)
	}
	rro := map[string]bool{}
	handlers := []RuntimeHandler{}
	for _, h := range resp.GetRuntimeHandlers() {
		rro[h.GetName()] = h.GetFeatures().GetRecursiveReadOnlyMounts()
		handlers = append(handlers, RuntimeHandler{
			Name:                    h.GetName(),
			RecursiveReadOnlyMounts: h.GetFeatures().GetRecursiveReadOnlyMounts(),
			UserNamespaces:          h.GetFeatures().GetUserNamespaces(),
		})
	}
	r.handlersMu.Lock()
	r.rroHandlers = rro
	r.handlersMu.Unlock()
	rd := Readiness{Handlers: handlers}
	var msgs []string
	for _, c := range resp.GetStatus().GetConditions() {
		switch c.Type {
		case runtimeapi.RuntimeReady:
			rd.RuntimeReady = c.Status
		case runtimeapi.NetworkReady:
			rd.NetworkReady = c.Status
		default:
			continue
		}
		if !c.Status {
			msgs = append(msgs, fmt.Sprintf("%s=false reason:%s message:%s", c.Type, c.Reason, c.Message))
		}
	}
	if len(msgs) > 0 {
		rd.Message = "container runtime not ready: " + joinComma(msgs)
	}
	return rd, nil
}

func joinComma(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ", "
		}
		out += v
	}
	return out
}

// runPodSandbox is RunPodSandbox with the runtime handler within
// Config.MaxParallelSandboxes.
func (r *Runtime) runPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	if r.sandboxes != nil {
		select {
		case r.sandboxes <- struct{}{}:
			defer func() { <-r.sandboxes }()
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for a turn to create the sandbox: %w", ctx.Err())
		}
	}
	return r.rs.RunPodSandbox(ctx, cfg, handler)
}
