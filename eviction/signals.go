package eviction

import (
	"time"

	evictionapi "github.com/crivk/crivk/eviction/api"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// observation is one signal's measure: what is available of what capacity,
// and when it was measured.
type observation struct {
	available *resource.Quantity
	capacity  *resource.Quantity
	at        time.Time
	// On a node of many (Config.MemoryShare), memory.available is the
	// node's measure (of: measureNode) and machine the machine's own
	// beside it (of: measureMachine); a threshold is met by either
	// (facing). Empty and nil otherwise.
	of      string
	machine *observation
}

// The measures of memory.available on a node of many.
const (
	measureNode    = "node"
	measureMachine = "machine"
)

// meets reports whether o's available amount is below t's value (with
// minReclaim, below the value plus t's minimum reclaim), each a quantity
// or a fraction of o's capacity.
func (o observation) meets(t evictionapi.Threshold, minReclaim bool) bool {
	q := t.Value.Of(o.capacity)
	if minReclaim && t.MinReclaim != nil {
		q.Add(*t.MinReclaim.Of(o.capacity))
	}
	return q.Cmp(*o.available) > 0
}

// facing is the measure t is judged on: o itself, or on a node of many
// the machine's when it meets t and the node's does not (the host's
// pressure still evicts: the eviction message then gives the machine's
// figures).
func (o observation) facing(t evictionapi.Threshold, minReclaim bool) observation {
	if o.machine != nil && !o.meets(t, minReclaim) && o.machine.meets(t, minReclaim) {
		return *o.machine
	}
	return o
}

// cause is the measure that met t, for its message and log: the one that
// meets it without the minimum reclaim, else the one that meets it with it
// (a threshold held met by its minimum reclaim on the machine's measure).
// A single node's is o itself.
func (o observation) cause(t evictionapi.Threshold) observation {
	if f := o.facing(t, false); f.meets(t, false) {
		return f
	}
	return o.facing(t, true)
}

// observations maps each signal the summary measures to its measure.
type observations map[evictionapi.Signal]observation

// observe derives the signals from a summary as the kubelet's
// makeSignalObservations:
//
//	memory.available    node memory AvailableBytes (capacity - working set of the root
//	                    cgroup; capacity = available + working set)
//	allocatableMemory.available
//	                    the "pods" system container's memory AvailableBytes (kubepods'
//	                    limit - its working set; capacity = available + working set)
//	nodefs.*            the node filesystem (statfs of --root-dir): AvailableBytes of
//	                    CapacityBytes, InodesFree of Inodes
//	imagefs.*           the runtime's image filesystem (CRI ImageFsInfo, statfs of its
//	                    mountpoint), likewise
//	pid.available       Rlimit: MaxPID - NumOfRunningProcesses of MaxPID
//
// With memoryShare (Config.MemoryShare, a node of many) memory.available
// is the node's part of the machine's memory less its pods' working set
// (the "pods" system container: kubepods under the node's cgroup root;
// capacity = memoryShare, available never below 0), with the machine's
// measure above beside it (observation.machine). Without the node's pods
// container (no pod cgroups) it stays the machine's.
//
// A signal whose figures are missing has no observation, and its
// thresholds are never met.
func observe(s *statsapi.Summary, memoryShare int64) observations {
	out := observations{}
	if m := s.Node.Memory; m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
		out[evictionapi.SignalMemoryAvailable] = observation{
			available: resource.NewQuantity(int64(*m.AvailableBytes), resource.BinarySI),
			capacity:  resource.NewQuantity(int64(*m.AvailableBytes+*m.WorkingSetBytes), resource.BinarySI),
			at:        m.Time.Time,
		}
	}
	if m := podsMemory(s); m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
		out[evictionapi.SignalAllocatableMemoryAvailable] = observation{
			available: resource.NewQuantity(int64(*m.AvailableBytes), resource.BinarySI),
			capacity:  resource.NewQuantity(int64(*m.AvailableBytes+*m.WorkingSetBytes), resource.BinarySI),
			at:        m.Time.Time,
		}
	}
	if memoryShare > 0 {
		if m := podsMemory(s); m != nil && m.WorkingSetBytes != nil {
			var avail int64
			if ws := *m.WorkingSetBytes; ws < uint64(memoryShare) {
				avail = memoryShare - int64(ws)
			}
			node := observation{
				available: resource.NewQuantity(avail, resource.BinarySI),
				capacity:  resource.NewQuantity(memoryShare, resource.BinarySI),
				at:        m.Time.Time,
				of:        measureNode,
			}
			if host, ok := out[evictionapi.SignalMemoryAvailable]; ok {
				host.of = measureMachine
				node.machine = &host
			}
			out[evictionapi.SignalMemoryAvailable] = node
		}
	}
	fs := func(f *statsapi.FsStats, bytes, inodes evictionapi.Signal) {
		if f == nil {
			return
		}
		if f.AvailableBytes != nil && f.CapacityBytes != nil {
			out[bytes] = observation{
				available: resource.NewQuantity(int64(*f.AvailableBytes), resource.BinarySI),
				capacity:  resource.NewQuantity(int64(*f.CapacityBytes), resource.BinarySI),
				at:        f.Time.Time,
			}
		}
		if f.InodesFree != nil && f.Inodes != nil {
			out[inodes] = observation{
				available: resource.NewQuantity(int64(*f.InodesFree), resource.DecimalSI),
				capacity:  resource.NewQuantity(int64(*f.Inodes), resource.DecimalSI),
				at:        f.Time.Time,
			}
		}
	}
	fs(s.Node.Fs, evictionapi.SignalNodeFsAvailable, evictionapi.SignalNodeFsInodesFree)
	if s.Node.Runtime != nil {
		fs(s.Node.Runtime.ImageFs, evictionapi.SignalImageFsAvailable, evictionapi.SignalImageFsInodesFree)
	}
	if r := s.Node.Rlimit; r != nil && r.MaxPID != nil && r.NumOfRunningProcesses != nil {
		out[evictionapi.SignalPIDAvailable] = observation{
			available: resource.NewQuantity(*r.MaxPID-*r.NumOfRunningProcesses, resource.DecimalSI),
			capacity:  resource.NewQuantity(*r.MaxPID, resource.DecimalSI),
			at:        r.Time.Time,
		}
	}
	return out
}

// podsMemory is the memory of the summary's "pods" system container (the
// node-allocatable cgroup), nil when it has none.
func podsMemory(s *statsapi.Summary) *statsapi.MemoryStats {
	for i := range s.Node.SystemContainers {
		if c := &s.Node.SystemContainers[i]; c.Name == statsapi.SystemContainerPods {
			return c.Memory
		}
	}
	return nil
}

// podStatsFunc returns a pod's stats from the summary, by UID.
type podStatsFunc func(uid string) (statsapi.PodStats, bool)

func podStatsOf(s *statsapi.Summary) podStatsFunc {
	byUID := make(map[string]statsapi.PodStats, len(s.Pods))
	for _, p := range s.Pods {
		byUID[p.PodRef.UID] = p
	}
	return func(uid string) (statsapi.PodStats, bool) {
		p, ok := byUID[uid]
		return p, ok
	}
}

// dedicatedImageFs reports whether the image filesystem is another
// filesystem than the node's (the kubelet's HasDedicatedImageFs, by
// capacity and inodes since the summary names no device).
func dedicatedImageFs(s *statsapi.Summary) bool {
	n, r := s.Node.Fs, s.Node.Runtime
	if n == nil || r == nil || r.ImageFs == nil {
		return false
	}
	i := r.ImageFs
	eq := func(a, b *uint64) bool { return a != nil && b != nil && *a == *b }
	return !(eq(n.CapacityBytes, i.CapacityBytes) && eq(n.Inodes, i.Inodes))
}
