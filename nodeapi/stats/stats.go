package stats

import (
	"context"
	"errors"
	"net/http"

	"github.com/crivk/crivk/cm"
	"github.com/crivk/crivk/cri"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"
)

// Runtime is what the statistics ask of the runtime's service
// (cri.RuntimeService implements it).
type Runtime interface {
	ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error)
}

// ImageFs reports the runtime's image filesystem (cri.Runtime implements
// it).
type ImageFs interface {
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
}

// Processes counts the processes of a running container, in its cgroup
// below its pod's (cm.Manager implements it): cAdvisor's ProcessCount,
// which the kubelet sums per pod into the summary's process_stats.
type Processes interface {
	ContainerProcesses(podUID types.UID, containerID string) (uint64, error)
}

// PodsCgroup reads the node-allocatable cgroup, kubepods (cm.Manager
// implements it): the summary's "pods" system container, from which the
// eviction manager observes allocatableMemory.available.
type PodsCgroup interface {
	// PodsMemory is the cgroup's memory usage, its working set (usage
	// less inactive file pages) and its limit in bytes (0: none).
	PodsMemory() (usage, workingSet, limit uint64, err error)
	// PodsCgroupSample reads the cgroup whole: the "pods" container's CPU
	// time and its RSS and page faults.
	PodsCgroupSample() (cm.CgroupSample, error)
}

var (
	_ PodsCgroup = (*cm.Manager)(nil)
	_ Runtime    = cri.RuntimeService(nil)
	_ ImageFs    = (*cri.Runtime)(nil)
)

// Config is what the statistics read. Runtime, ImageFs and MemoryCapacity
// are required.
type Config struct {
	// NodeName names the node in the summary.
	NodeName string
	// RootDir is crivk's root directory: the node's filesystem is the one
	// holding it, and the pods' volumes are under RootDir/pods.
	RootDir string
	Runtime Runtime
	ImageFs ImageFs
	// MemoryCapacity is the machine's memory in bytes (the node's
	// available memory is this minus its working set).
	MemoryCapacity func() (int64, error)
	// Node reads the node's root cgroup (the node's CPU and memory, and
	// so memory.available); nil: the machine's (cm.DetectHost).
	Node NodeCgroup
	// Clock dates the node's figures and the volume measures; nil: the
	// real clock. The summary's node start time is the time of New.
	Clock clock.PassiveClock
	// PodLogDir is where the pods' log directories are (--pod-log-dir):
	// the containers' Logs; "": none reported.
	PodLogDir string
	// ProcRoot is where /proc is read (the node's process limit and
	// count); "": /proc.
	ProcRoot string
	// Processes counts the containers' processes (the pods'
	// process_stats); nil: none reported (--cgroups-per-qos=false).
	Processes Processes
	// Owned is the label selector of the node's own containers and
	// sandboxes, the runtime's (cri.OwnedSelector of cri.Config.Node): a
	// node of a multi-node crivk reports and evicts only its own pods
	// (docs/scale.md). nil: every crivk container (a single-node crivk).
	Owned map[string]string
	// PodsCgroup reads kubepods (the "pods" system container); nil: no
	// system container reported and no pod network figures
	// (--cgroups-per-qos=false: no sandbox has the cgroup parent the
	// runtime's sandbox stats need).
	PodsCgroup PodsCgroup
	// Cgroups and Sandboxes are /metrics/cadvisor's sources: the pods'
	// and containers' cgroups, and the runtime's sandboxes. Either nil:
	// no Handlers.Cadvisor (--cgroups-per-qos=false, where crivk keeps
	// no pod cgroups). Cgroups is also the source of the swap figures of
	// /stats/summary and /metrics/resource (swap.go): nil, none.
	Cgroups   Cgroups
	Sandboxes Sandboxes
	// SandboxImage names the sandboxes' image (their image label); nil:
	// "".
	SandboxImage SandboxImager
	// SysRoot is where /sys is read (block device names); "": /sys.
	SysRoot string
}

// Handlers are the node API's statistics endpoints.
type Handlers struct {
	// Summary serves GET /stats/summary.
	Summary http.Handler
	// ResourceMetrics serves GET /metrics/resource.
	ResourceMetrics http.Handler
	// Cadvisor serves GET /metrics/cadvisor; nil without Config.Cgroups
	// or Config.Sandboxes.
	Cadvisor http.Handler
	// Summarize computes the summary Summary serves: the eviction
	// manager's observations (the kubelet's SummaryProvider).
	Summarize func(ctx context.Context) (*statsapi.Summary, error)
}

// New returns the handlers for cfg.
func New(cfg Config) (Handlers, error) {
	if cfg.Runtime == nil || cfg.ImageFs == nil || cfg.MemoryCapacity == nil {
		return Handlers{}, errors.New("stats: the runtime, its image filesystem and the memory capacity are required")
	}
	if cfg.Node == nil {
		cfg.Node = cm.DetectHost()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	node := func() nodeUsage { return readNodeUsage(cfg.Node, cfg.Clock.Now()) }
	var swap *swapReader
	if cfg.Cgroups != nil {
		swap = &swapReader{cgroups: cfg.Cgroups, procRoot: cfg.ProcRoot, now: cfg.Clock.Now}
	}
	volumes := newVolumeStats(cfg.RootDir)
	volumes.now = cfg.Clock.Now
	s := summary{runtime: cfg.Runtime, imageFs: cfg.ImageFs.ImageFsInfo, node: node,
		nodeName: cfg.NodeName, rootDir: cfg.RootDir, memCapacity: cfg.MemoryCapacity, started: cfg.Clock.Now(), volumes: volumes,
		podLogDir: cfg.PodLogDir, processes: cfg.Processes, owned: cfg.Owned, podsCgroup: cfg.PodsCgroup, rates: newCPURates(), procRoot: cfg.ProcRoot, swap: swap, rlimit: func(at metav1.Time) *statsapi.RlimitStats { return readRlimit(cfg.ProcRoot, at) }}
	if cfg.PodsCgroup != nil {
		// containerd answers a sandbox's stats only when the sandbox has a
		// cgroup parent, a pod cgroup: without pod cgroups every call
		// fails, the list and each sandbox's (summary.sandboxStats).
		s.sandboxes = cfg.Runtime.ListPodSandboxStats
	}
	h := Handlers{
		Summary:         s,
		ResourceMetrics: resourceMetrics{runtime: cfg.Runtime, node: node, owned: cfg.Owned, swap: swap},
		Summarize:       s.get,
	}
	if cfg.Cgroups != nil && cfg.Sandboxes != nil {
		if cfg.SysRoot == "" {
			cfg.SysRoot = "/sys"
		}
		h.Cadvisor = newCadvisorHandler(cadvisorSource{containers: cfg.Runtime, sandboxes: cfg.Sandboxes, sandboxImage: cfg.SandboxImage,
			cgroups: cfg.Cgroups, procRoot: cfg.ProcRoot, owned: cfg.Owned, clock: cfg.Clock}, cfg.SysRoot)
	}
	return h, nil
}
