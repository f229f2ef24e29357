package eviction

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"context"
	evictionapi "github.com/crivk/crivk/eviction/api"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"
)

// The local storage "signals" of evictions for a limit rather than node
// pressure: the kubelet's labels of kubelet_evictions.
const (
	signalEphemeralContainerFsLimit = "ephemeralcontainerfs.limit"
	signalEphemeralPodFsLimit       = "ephemeralpodfs.limit"
	signalEmptyDirFsLimit           = "emptydirfs.limit"
)

// signalCondition is the node condition a met threshold of each signal
// reports (the kubelet's signalToNodeCondition).
var signalCondition = map[evictionapi.Signal]v1.NodeConditionType{
	evictionapi.SignalMemoryAvailable:            v1.NodeMemoryPressure,
	evictionapi.SignalAllocatableMemoryAvailable: v1.NodeMemoryPressure,
	evictionapi.SignalNodeFsAvailable:            v1.NodeDiskPressure,
	evictionapi.SignalNodeFsInodesFree:           v1.NodeDiskPressure,
	evictionapi.SignalImageFsAvailable:           v1.NodeDiskPressure,
	evictionapi.SignalImageFsInodesFree:          v1.NodeDiskPressure,
	evictionapi.SignalContainerFsAvailable:       v1.NodeDiskPressure,
	evictionapi.SignalContainerFsInodesFree:      v1.NodeDiskPressure,
	evictionapi.SignalPIDAvailable:               v1.NodePIDPressure,
}

// key identifies a threshold: at most one hard and one soft per signal.
type key struct {
	signal evictionapi.Signal
	soft   bool
}

func keyOf(t evictionapi.Threshold) key { return key{t.Signal, !t.Hard()} }

// SummaryProvider is the node's statistics as the eviction manager reads
// them: nodeapi/stats's Handlers.Summarize (the kubelet's
// stats.SummaryProvider).
type SummaryProvider func(ctx context.Context) (*statsapi.Summary, error)

// ImageGC removes the images no container uses (package images), freeing
// disk on the image filesystem; it returns the bytes freed. The eviction
// manager calls it under disk pressure before evicting any pod.
type ImageGC interface {
	DeleteUnusedImages(ctx context.Context) (freed int64, err error)
}

// ContainerGC removes every dead container and sandbox no running pod
// needs (package images); called under disk pressure before ImageGC.
type ContainerGC interface {
	DeleteAllUnusedContainers(ctx context.Context) error
}

// Config configures a Manager; New validates it and fills its defaults.
type Config struct {
	// Thresholds are the hard and soft thresholds (ParseThresholds).
	Thresholds []evictionapi.Threshold
	// PressureTransitionPeriod is how long a pressure condition stays
	// after its threshold was last met (--eviction-pressure-transition-
	// period, default 5m).
	PressureTransitionPeriod time.Duration
	// MaxPodGracePeriodSeconds bounds the grace period of pods evicted for
	// a soft threshold (--eviction-max-pod-grace-period, default 0).
	MaxPodGracePeriodSeconds int64
	// MonitoringPeriod is how often synchronize runs (the kubelet's
	// evictionMonitoringPeriod, 10 s).
	MonitoringPeriod time.Duration
	// LocalStorageCapacityIsolation enforces ephemeral-storage limits and
	// emptyDir sizeLimit by eviction (the kubelet's default: true).
	LocalStorageCapacityIsolation bool
	// KernelMemcgNotification arms the kernel's memcg threshold
	// notification on each memory.available threshold (memcg.go): a round
	// runs as soon as the root memory cgroup crosses it, not at the next
	// MonitoringPeriod (--kernel-memcg-notification, default false). cgroup
	// v1 only; on cgroup v2 (no MemoryCgroup) it is logged as not
	// supported and ignored, as the kubelet's.
	KernelMemcgNotification bool
	// MemoryCgroup is the root memory cgroup's directory in the cgroup v1
	// memory hierarchy, which the notification watches (cm.Host.MemcgDir,
	// the one reader of the machine's cgroup layout); "": cgroup v2, which
	// has no threshold notification: memory.available is polled alone.
	MemoryCgroup string
	// PodsMemoryCgroup is the node-allocatable memory cgroup (kubepods'
	// directory in the memory hierarchy) the notification of an
	// allocatableMemory.available threshold watches, as the kubelet's
	// (memory mount + PodCgroupRoot); "": no notifier for those
	// thresholds (no pod cgroups), which are then polled.
	PodsMemoryCgroup string
	// EnforceNodeAllocatable tells that the pods are bounded together by
	// the node-allocatable cgroup, kubepods (pod cgroups, package cm: the
	// kubelet's --enforce-node-allocatable=pods). As the kubelet's
	// ParseThresholdConfig (addAllocatableThresholds), each hard
	// memory.available threshold then gets an allocatableMemory.available
	// twin of the same value and minimum reclaim, unless a hard
	// allocatableMemory.available threshold is given (the kubelet would keep
	// both; crivk keeps one threshold per signal and kind).
	EnforceNodeAllocatable bool
	// MemoryShare, on a node of many (one crivk process serving
	// --node-count nodes, docs/scale.md), is the node's part of the
	// machine's memory in bytes: its Node's memory capacity. Its
	// memory.available is then measured on the node too: MemoryShare less
	// the working set of its own pods (the summary's "pods" system
	// container, kubepods under <cgroup-root>/<node>), so that one node's
	// pods cannot push its neighbours into pressure; a memory.available
	// threshold is met when the node's measure or the machine's meets it,
	// so the machine's real pressure still evicts (every node then evicts
	// its own pods). 0: a single node, the machine's measure alone, as the
	// kubelet's.
	MemoryShare int64
	// Summary reads the node's statistics; required.
	Summary SummaryProvider
	// ImageGC and ContainerGC reclaim disk before pods are evicted; nil:
	// none (then pods are evicted at once under disk pressure).
	ImageGC     ImageGC
	ContainerGC ContainerGC
	// Recorder receives the node's EvictionThresholdMet events on NodeRef
	// (nodestatus.NodeRef.NameOnly, filled by the wiring: this package
	// does not import nodestatus): the node without its UID, as the
	// kubelet's eviction manager records on its nodeRef (not the
	// nodeRefWithUID of v1.37); either nil drops them.
	Recorder record.EventRecorder
	NodeRef  *v1.ObjectReference
	// Clock times thresholds and conditions; nil: the real clock.
	Clock clock.WithTicker
	// ObserveEviction counts an eviction by signal (kubelet_evictions);
	// ObserveStatsAge observes how old the stats of a met threshold were
	// at an eviction (kubelet_eviction_stats_age_seconds). nil: not
	// counted.
	ObserveEviction func(signal string)
	ObserveStatsAge func(signal string, age time.Duration)
}

// Defaults of the kubelet.
const (
	DefaultPressureTransitionPeriod = 5 * time.Minute
	DefaultMonitoringPeriod         = 10 * time.Second
)

// validate fills cfg's defaults and rejects what cannot work.
func (cfg *Config) validate() error {
	if cfg.Summary == nil {
		return errors.New("eviction: the node's statistics (Summary) are required")
	}
	if cfg.MemoryShare < 0 {
		return fmt.Errorf("eviction: negative memory share %d", cfg.MemoryShare)
	}
	if cfg.PressureTransitionPeriod < 0 {
		return fmt.Errorf("eviction: negative pressure transition period %s", cfg.PressureTransitionPeriod)
	}
	if cfg.MonitoringPeriod == 0 {
		cfg.MonitoringPeriod = DefaultMonitoringPeriod
	}
	if cfg.MonitoringPeriod < 0 {
		return fmt.Errorf("eviction: negative monitoring period %s", cfg.MonitoringPeriod)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	// A copy: the caller's slice is nodestatus's too (one parse), and it
	// is sorted below.
	cfg.Thresholds = append([]evictionapi.Threshold(nil), cfg.Thresholds...)
	if cfg.EnforceNodeAllocatable {
		cfg.Thresholds = addAllocatableThresholds(cfg.Thresholds)
	}
	seen := map[key]bool{}
	for _, t := range cfg.Thresholds {
		if !t.Signal.Valid() {
			return fmt.Errorf("eviction: unsupported eviction signal %v", t.Signal)
		}
		if seen[keyOf(t)] {
			return fmt.Errorf("eviction: two thresholds for %v", t)
		}
		seen[keyOf(t)] = true
	}
	sort.SliceStable(cfg.Thresholds, func(i, j int) bool { return cfg.Thresholds[i].Hard() && !cfg.Thresholds[j].Hard() })
	return nil
}

// addAllocatableThresholds returns ts with an allocatableMemory.available
// twin of each hard memory.available threshold (the kubelet's), none if ts
// has a hard allocatableMemory.available threshold already. ts is not
// modified.
func addAllocatableThresholds(ts []evictionapi.Threshold) []evictionapi.Threshold {
	out := append([]evictionapi.Threshold(nil), ts...)
	for _, t := range ts {
		if t.Signal == evictionapi.SignalAllocatableMemoryAvailable && t.Hard() {
			return out
		}
	}
	for _, t := range ts {
		if t.Signal == evictionapi.SignalMemoryAvailable && t.Hard() {
			out = append(out, evictionapi.Threshold{Signal: evictionapi.SignalAllocatableMemoryAvailable, Value: t.Value, MinReclaim: t.MinReclaim})
		}
	}
	return out
}
