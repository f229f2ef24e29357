package evictionapi

import (
	"fmt"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Signal is an eviction signal: a quantity the node observes, with the
// kubelet's name.
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

// Resources a signal reclaims besides v1's: inodes and process IDs.
const (
	ResourceInodes v1.ResourceName = "inodes"
	ResourcePIDs   v1.ResourceName = "pids"
)

// signalResource is the resource each signal reclaims (the kubelet's
// signalToResource); it is the list of signals: one not in it is not valid.
var signalResource = map[Signal]v1.ResourceName{
	SignalMemoryAvailable:            v1.ResourceMemory,
	SignalAllocatableMemoryAvailable: v1.ResourceMemory,
	SignalNodeFsAvailable:            v1.ResourceEphemeralStorage,
	SignalImageFsAvailable:           v1.ResourceEphemeralStorage,
	SignalContainerFsAvailable:       v1.ResourceEphemeralStorage,
	SignalNodeFsInodesFree:           ResourceInodes,
	SignalImageFsInodesFree:          ResourceInodes,
	SignalContainerFsInodesFree:      ResourceInodes,
	SignalPIDAvailable:               ResourcePIDs,
}

// Resource is the resource s reclaims; "" for a signal that is not one of
// the kubelet's.
func (s Signal) Resource() v1.ResourceName { return signalResource[s] }

// Valid reports whether s is one of the kubelet's signals.
func (s Signal) Valid() bool {
	_, ok := signalResource[s]
	return ok
}

// Value is a threshold's or a minimum reclaim's amount: a quantity, or a
// fraction of the signal's capacity.
type Value struct {
	Quantity   *resource.Quantity
	Percentage float64 // 0.1 for 10%
}

// Of is the value as a quantity of capacity (the kubelet's
// GetThresholdQuantity): the quantity, or the fraction of capacity rounded
// down.
func (v Value) Of(capacity *resource.Quantity) *resource.Quantity {
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

// Hard reports whether pods are evicted as soon as t is met.
func (t Threshold) Hard() bool { return t.GracePeriod == 0 }

func (t Threshold) String() string {
	if !t.Hard() {
		return fmt.Sprintf("%s<%s (soft, grace %s)", t.Signal, t.Value, t.GracePeriod)
	}
	return fmt.Sprintf("%s<%s", t.Signal, t.Value)
}

// HardFor is the hard threshold of signal s in ts, if any (at most one per
// signal: ParseThresholds rejects a signal given twice).
func HardFor(ts []Threshold, s Signal) (Threshold, bool) {
	for _, t := range ts {
		if t.Signal == s && t.Hard() {
			return t, true
		}
	}
	return Threshold{}, false
}
