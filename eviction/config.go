package eviction

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"context"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/record"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"
)

// Signal is an eviction signal: a quantity the node observes, with the
// kubelet's name (pkg/kubelet/eviction/api).
type Signal string

// The kubelet's signals. containerfs.* is accepted and ignored, as the
// kubelet does (it follows nodefs or imagefs). allocatableMemory.available
// is observed on the node-allocatable cgroup, kubepods (the summary's
// "pods" system container): without pod cgroups (--cgroups-per-qos=false)
// it has no observation and never triggers.
const (
	SignalMemoryAvailable            Signal = "memory.available"
	SignalNodeFsAvailable            Signal = "nodefs.available"
	SignalNodeFsInodesFree           Signal = "nodefs.inodesFree"
	SignalImageFsAvailable           Signal = "imagefs.available"
	SignalImageFsInodesFree          Signal = "imagefs.inodesFree"
	SignalContainerFsAvailable       Signal = "containerfs.available"
	SignalContainerFsInodesFree      Signal = "containerfs.inodesFree"
	SignalAllocatableMemoryAvailable Signal = "allocatableMemory.available"
	SignalPIDAvailable               Signal = "pid.available"
)

// The local storage "signals" of evictions for a limit rather than node
// pressure: the kubelet's labels of kubelet_evictions.
const (
	signalEphemeralContainerFsLimit = "ephemeralcontainerfs.limit"
	signalEphemeralPodFsLimit       = "ephemeralpodfs.limit"
	signalEmptyDirFsLimit           = "emptydirfs.limit"
)

// Resources a signal reclaims besides v1's: inodes and process IDs.
const (
	resourceInodes v1.ResourceName = "inodes"
	resourcePIDs   v1.ResourceName = "pids"
)

// signalResource is the resource each signal reclaims (the kubelet's
// signalToResource); a signal not in it is not valid.
var signalResource = map[Signal]v1.ResourceName{
	SignalMemoryAvailable:            v1.ResourceMemory,
	SignalAllocatableMemoryAvailable: v1.ResourceMemory,
	SignalNodeFsAvailable:            v1.ResourceEphemeralStorage,
	SignalImageFsAvailable:           v1.ResourceEphemeralStorage,
	SignalContainerFsAvailable:       v1.ResourceEphemeralStorage,
	SignalNodeFsInodesFree:           resourceInodes,
	SignalImageFsInodesFree:          resourceInodes,
	SignalContainerFsInodesFree:      resourceInodes,
	SignalPIDAvailable:               resourcePIDs,
}

// signalCondition is the node condition a met threshold of each signal
// reports (the kubelet's signalToNodeCondition).
var signalCondition = map[Signal]v1.NodeConditionType{
	SignalMemoryAvailable:            v1.NodeMemoryPressure,
	SignalAllocatableMemoryAvailable: v1.NodeMemoryPressure,
	SignalNodeFsAvailable:            v1.NodeDiskPressure,
	SignalNodeFsInodesFree:           v1.NodeDiskPressure,
	SignalImageFsAvailable:           v1.NodeDiskPressure,
	SignalImageFsInodesFree:          v1.NodeDiskPressure,
	SignalContainerFsAvailable:       v1.NodeDiskPressure,
	SignalContainerFsInodesFree:      v1.NodeDiskPressure,
	SignalPIDAvailable:               v1.NodePIDPressure,
}

// Value is a threshold's or a minimum reclaim's amount: a quantity, or a
// fraction of the signal's capacity.
type Value struct {
	Quantity   *resource.Quantity
	Percentage float64 // 0.1 for 10%
}

// of is the value as a quantity of capacity.
func (v Value) of(capacity *resource.Quantity) *resource.Quantity {
	if v.Quantity != nil {
		q := v.Quantity.DeepCopy()
		return &q
	}
	return resource.NewQuantity(int64(float64(capacity.Value())*v.Percentage), resource.BinarySI)
}

func (v Value) String() string {
	if v.Quantity != nil {
		return v.Quantity.String()
	}
	return strconv.FormatFloat(v.Percentage*100, 'f', -1, 64) + "%"
}

// Threshold is one eviction threshold: met when the signal's available
// amount is below Value. A hard threshold has no GracePeriod; a soft one
// must be met for its GracePeriod before pods are evicted for it.
type Threshold struct {
	Signal      Signal
	Value       Value
	GracePeriod time.Duration
	// MinReclaim, when set, keeps the threshold met until the available
	// amount is above Value + MinReclaim.
	MinReclaim *Value
}

// hard reports whether pods are evicted as soon as t is met.
func (t Threshold) hard() bool { return t.GracePeriod == 0 }

// key identifies a threshold: at most one hard and one soft per signal.
type key struct {
	signal Signal
	soft   bool
}

func (t Threshold) key() key { return key{t.Signal, !t.hard()} }

func (t Threshold) String() string {
	op := "<"
	if !t.hard() {
		return fmt.Sprintf("%s%s%s (soft, grace %s)", t.Signal, op, t.Value, t.GracePeriod)
	}
	return fmt.Sprintf("%s%s%s", t.Signal, op, t.Value)
}

// Flags are the kubelet's eviction flags as given on the command line.
type Flags struct {
	// Hard is --eviction-hard, e.g. "memory.available<100Mi,nodefs.available<10%".
	Hard string
	// Soft is --eviction-soft, in Hard's format.
	Soft string
	// SoftGracePeriod is --eviction-soft-grace-period, e.g. "memory.available=1m30s".
	SoftGracePeriod string
	// MinimumReclaim is --eviction-minimum-reclaim, e.g. "imagefs.available=2Gi".
	MinimumReclaim string
}

// DefaultHard is the kubelet's --eviction-hard default on Linux
// (pkg/kubelet/eviction/defaults_linux.go).
const DefaultHard = "memory.available<100Mi,nodefs.available<10%,imagefs.available<15%,nodefs.inodesFree<5%,imagefs.inodesFree<5%"

// ParseThresholds parses the kubelet's eviction flags into thresholds, with
// the kubelet's rules (ParseThresholdConfig): each soft threshold needs a
// grace period; 0% and 100% thresholds are ignored; a quantity must be
// positive; a minimum reclaim applies to both thresholds of its signal.
// containerfs.* thresholds are dropped: they follow nodefs here (one
// filesystem for containers and the node, as the kubelet without a split
// image filesystem).
func ParseThresholds(f Flags) ([]Threshold, error) {
	hard, err := parseStatements("--eviction-hard", f.Hard)
	if err != nil {
		return nil, err
	}
	soft, err := parseStatements("--eviction-soft", f.Soft)
	if err != nil {
		return nil, err
	}
	grace, err := parseMap("--eviction-soft-grace-period", f.SoftGracePeriod, func(s Signal, v string) (time.Duration, error) {
		d, err := time.ParseDuration(v)
		if err != nil {
			return 0, err
		}
		if d < 0 {
			return 0, fmt.Errorf("invalid eviction grace period specified: %v, must be a positive value", v)
		}
		return d, nil
	})
	if err != nil {
		return nil, err
	}
	minReclaim, err := parseMap("--eviction-minimum-reclaim", f.MinimumReclaim, func(s Signal, v string) (Value, error) {
		if p, ok := strings.CutSuffix(v, "%"); ok {
			pct, err := strconv.ParseFloat(p, 64)
			if err != nil {
				return Value{}, err
			}
			if pct <= 0 {
				return Value{}, fmt.Errorf("eviction percentage minimum reclaim %v must be positive: %s", s, v)
			}
			return Value{Percentage: pct / 100}, nil
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return Value{}, err
		}
		if q.Sign() < 0 {
			return Value{}, fmt.Errorf("negative eviction minimum reclaim specified for %v", s)
		}
		return Value{Quantity: &q}, nil
	})
	if err != nil {
		return nil, err
	}
	for i := range soft {
		d, ok := grace[soft[i].Signal]
		if !ok {
			return nil, fmt.Errorf("grace period must be specified for the soft eviction threshold %v", soft[i].Signal)
		}
		soft[i].GracePeriod = d
	}
	var out []Threshold
	for _, t := range append(hard, soft...) {
		if t.Signal == SignalContainerFsAvailable || t.Signal == SignalContainerFsInodesFree {
			continue
		}
		if r, ok := minReclaim[t.Signal]; ok {
			r := r
			t.MinReclaim = &r
		}
		out = append(out, t)
	}
	return out, nil
}

// parseStatements parses "signal<value,..." (a flag's name for errors).
func parseStatements(flag, s string) ([]Threshold, error) {
	var out []Threshold
	seen := map[Signal]bool{}
	for _, st := range splitList(s) {
		k, v, ok := strings.Cut(st, "<")
		if !ok {
			return nil, fmt.Errorf("%s: %q is not signal<value", flag, st)
		}
		sig := Signal(strings.TrimSpace(k))
		v = strings.TrimSpace(v)
		if _, valid := signalResource[sig]; !valid {
			return nil, fmt.Errorf("%s: unsupported eviction signal %v", flag, sig)
		}
		if seen[sig] {
			return nil, fmt.Errorf("%s: %v given twice", flag, sig)
		}
		seen[sig] = true
		if p, isPct := strings.CutSuffix(v, "%"); isPct {
			if v == "0%" || v == "100%" {
				continue // the kubelet ignores them
			}
			pct, err := strconv.ParseFloat(p, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %v<%s: %w", flag, sig, v, err)
			}
			if pct < 0 {
				return nil, fmt.Errorf("%s: eviction percentage threshold %v must be >= 0%%: %s", flag, sig, v)
			}
			if pct > 100 {
				return nil, fmt.Errorf("%s: eviction percentage threshold %v must be <= 100%%: %s", flag, sig, v)
			}
			out = append(out, Threshold{Signal: sig, Value: Value{Percentage: pct / 100}})
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %v<%s: %w", flag, sig, v, err)
		}
		if q.Sign() <= 0 {
			return nil, fmt.Errorf("%s: eviction threshold %v must be positive: %s", flag, sig, &q)
		}
		out = append(out, Threshold{Signal: sig, Value: Value{Quantity: &q}})
	}
	return out, nil
}

// parseMap parses "signal=value,..." with parse for each value.
func parseMap[T any](flag, s string, parse func(Signal, string) (T, error)) (map[Signal]T, error) {
	out := map[Signal]T{}
	for _, st := range splitList(s) {
		k, v, ok := strings.Cut(st, "=")
		if !ok {
			return nil, fmt.Errorf("%s: %q is not signal=value", flag, st)
		}
		sig := Signal(strings.TrimSpace(k))
		if _, valid := signalResource[sig]; !valid {
			return nil, fmt.Errorf("%s: unsupported eviction signal %v", flag, sig)
		}
		x, err := parse(sig, strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%s: %v: %w", flag, sig, err)
		}
		out[sig] = x
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

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
	Thresholds []Threshold
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
	// v1 only; on cgroup v2 it is logged as not supported and ignored.
	KernelMemcgNotification bool
	// MemoryCgroup is the memory cgroup the notification watches; "":
	// DefaultMemoryCgroup.
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
	// Recorder receives the node's EvictionThresholdMet events; nil drops
	// them. NodeName names the node in them.
	Recorder record.EventRecorder
	NodeName string
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
	if cfg.MemoryCgroup == "" {
		cfg.MemoryCgroup = DefaultMemoryCgroup
	}
	if cfg.EnforceNodeAllocatable {
		cfg.Thresholds = addAllocatableThresholds(cfg.Thresholds)
	}
	seen := map[key]bool{}
	for _, t := range cfg.Thresholds {
		if _, ok := signalResource[t.Signal]; !ok {
			return fmt.Errorf("eviction: unsupported eviction signal %v", t.Signal)
		}
		if seen[t.key()] {
			return fmt.Errorf("eviction: two thresholds for %v", t)
		}
		seen[t.key()] = true
	}
	sort.SliceStable(cfg.Thresholds, func(i, j int) bool { return cfg.Thresholds[i].hard() && !cfg.Thresholds[j].hard() })
	return nil
}

// addAllocatableThresholds returns ts with an allocatableMemory.available
// twin of each hard memory.available threshold (the kubelet's), none if ts
// has a hard allocatableMemory.available threshold already. ts is not
// modified.
func addAllocatableThresholds(ts []Threshold) []Threshold {
	out := append([]Threshold(nil), ts...)
	for _, t := range ts {
		if t.Signal == SignalAllocatableMemoryAvailable && t.hard() {
			return out
		}
	}
	for _, t := range ts {
		if t.Signal == SignalMemoryAvailable && t.hard() {
			out = append(out, Threshold{Signal: SignalAllocatableMemoryAvailable, Value: t.Value, MinReclaim: t.MinReclaim})
		}
	}
	return out
}
