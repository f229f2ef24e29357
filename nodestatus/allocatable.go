package nodestatus

import (
	"fmt"
	"math/big"
	"sort"
	"strings"

	evictionapi "github.com/crivk/crivk/eviction/api"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Reservations are what the kubelet takes off a node's capacity before
// pods get it (--system-reserved, --kube-reserved, --eviction-hard).
type Reservations struct {
	SystemReserved v1.ResourceList
	KubeReserved   v1.ResourceList
	// EvictionHard holds the eviction thresholds as parsed once
	// (evictionapi.ParseThresholds): the hard memory.available and
	// nodefs.available ones are taken off the allocatable, the others are
	// the eviction manager's alone.
	EvictionHard []evictionapi.Threshold
}

// reservable names the resources --system-reserved and --kube-reserved
// accept, as the kubelet's.
var reservable = map[string]bool{"cpu": true, "memory": true, "ephemeral-storage": true, "pid": true}

// ParseResourceList parses the kubelet's --system-reserved/--kube-reserved
// format, e.g. "cpu=100m,memory=500Mi,ephemeral-storage=1Gi". Empty is
// none.
func ParseResourceList(s string) (v1.ResourceList, error) {
	l := v1.ResourceList{}
	if strings.TrimSpace(s) == "" {
		return l, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return nil, fmt.Errorf("%q is not name=quantity", kv)
		}
		if !reservable[k] {
			return nil, fmt.Errorf("cannot reserve %q: only cpu, memory, ephemeral-storage and pid", k)
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: %w", k, v, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("%s=%q: negative", k, v)
		}
		l[v1.ResourceName(k)] = q
	}
	return l, nil
}

// String prints the reservations for a log line.
func (r Reservations) String() string {
	var parts []string
	for _, l := range []struct {
		name string
		list v1.ResourceList
	}{{"system", r.SystemReserved}, {"kube", r.KubeReserved}} {
		for k, q := range l.list {
			parts = append(parts, fmt.Sprintf("%s-reserved %s=%s", l.name, k, q.String()))
		}
	}
	for _, t := range r.EvictionHard {
		if t.Hard() {
			parts = append(parts, "eviction-hard "+t.String())
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// PodsBound is what all pods together may use (the kubepods cgroup's
// bound): capacity minus the system and kube reservations, without the
// eviction thresholds, as the kubelet's getNodeAllocatableAbsolute.
func (r Reservations) PodsBound(capacity v1.ResourceList) v1.ResourceList {
	out := v1.ResourceList{}
	for k, c := range capacity {
		q := c.DeepCopy()
		for _, l := range []v1.ResourceList{r.SystemReserved, r.KubeReserved} {
			if v, ok := l[k]; ok {
				q.Sub(v)
			}
		}
		if q.Sign() < 0 {
			q.Set(0)
		}
		out[k] = q
	}
	return out
}

// Allocatable is the kubelet's node allocatable: capacity minus the
// reservations and the hard eviction thresholds of memory
// (memory.available) and of the node's filesystem (nodefs.available, for
// ephemeral-storage), never below zero.
func (r Reservations) Allocatable(capacity v1.ResourceList) v1.ResourceList {
	out := r.PodsBound(capacity)
	for res, signal := range map[v1.ResourceName]evictionapi.Signal{v1.ResourceMemory: evictionapi.SignalMemoryAvailable, v1.ResourceEphemeralStorage: evictionapi.SignalNodeFsAvailable} {
		t, ok := evictionapi.HardFor(r.EvictionHard, signal)
		q, has := out[res]
		if !ok || !has {
			continue
		}
		c := capacity[res]
		q.Sub(*t.Value.Of(&c))
		if q.Sign() < 0 {
			q.Set(0)
		}
		out[res] = q
	}
	return out
}

// AllocatableOf is the allocatable of a node that has p of the machine of
// capacity. The whole machine: Allocatable(capacity). A part: p of the
// machine's allocatable (the reservations taken once), except memory:
// a node of many measures memory.available on its own share (its share of
// the memory less its own pods' working set, eviction.Config.MemoryShare),
// so its pods at their requests must leave the whole hard threshold free
// on that share, as the kubelet's allocatable leaves it on the node's
// capacity: p of the pods' bound (capacity − system and kube reservations)
// less the threshold, a percentage taken of p of the capacity.
// nodefs and the other signals stay the machine's measure, and so does
// their share of the threshold.
func (r Reservations) AllocatableOf(capacity v1.ResourceList, p Portion) v1.ResourceList {
	out := p.Of(r.Allocatable(capacity))
	t, ok := evictionapi.HardFor(r.EvictionHard, evictionapi.SignalMemoryAvailable)
	if p.Whole() || !ok {
		return out
	}
	q, has := p.Of(r.PodsBound(capacity))[v1.ResourceMemory]
	if !has {
		return out
	}
	share := p.Of(capacity)[v1.ResourceMemory]
	q.Sub(*t.Value.Of(&share))
	if q.Sign() < 0 {
		q.Set(0)
	}
	out[v1.ResourceMemory] = q
	return out
}

// Share is one node's equal share of rl among n nodes of one crivk process
// (docs/scale.md#allocatable), rounded down: CPU in millicores, the other
// resources in their units; pods is not split (--max-pods is each
// node's). n of 0 or 1: a copy of rl. The machine's reservations are taken
// before the split: a node's allocatable is Share(capacity − reservations).
// It is Portion{Weight: 1, Total: n}.Of(rl).
func Share(rl v1.ResourceList, n int) v1.ResourceList {
	return Portion{Weight: 1, Total: int64(n)}.Of(rl)
}

// Portion is one node's part of the machine among the nodes of one crivk
// process (docs/scale.md#allocatable): Weight parts of Total. Equal shares
// among N nodes (--node-count) are 1 of N each; --node-shares gives node i
// its weight w_i of the sum of the weights. The zero Portion, and any with
// a Total of 0 or 1 or a Weight of at least its Total, is the whole
// machine. The parts of one machine never add up to more than it: each is
// rounded down (TestPortionsNeverExceedTheWhole).
type Portion struct {
	Weight, Total int64
}

// Whole reports whether p is the whole machine (a single-node crivk).
func (p Portion) Whole() bool { return p.Total <= 1 || p.Weight >= p.Total }

// String is "w/total", or "whole".
func (p Portion) String() string {
	if p.Whole() {
		return "whole"
	}
	return fmt.Sprintf("%d/%d", p.Weight, p.Total)
}

// MemoryShare is a node of many's part of the machine's memory, against
// which its eviction manager measures memory.available beside the
// machine's (eviction.Config.MemoryShare, docs/scale.md); 0 for the whole
// machine (a single node: the machine's measure alone, as the kubelet's).
func (p Portion) MemoryShare() (int64, error) {
	if p.Whole() {
		return 0, nil
	}
	mem, err := MemoryCapacity()
	if err != nil {
		return 0, fmt.Errorf("reading the machine's memory: %w", err)
	}
	return p.Scale(mem), nil
}

// Scale is p of v, rounded down (v × Weight / Total without overflow);
// v itself when p is the whole, 0 for a negative v or Weight.
func (p Portion) Scale(v int64) int64 {
	if p.Whole() {
		return v
	}
	if v <= 0 || p.Weight <= 0 {
		return 0
	}
	// v × Weight may not fit in 64 bits (a petabyte of disk times a
	// weight of a few thousand); the quotient always does (≤ v).
	var x big.Int
	x.Mul(big.NewInt(v), big.NewInt(p.Weight))
	x.Quo(&x, big.NewInt(p.Total))
	return x.Int64()
}

// Of is p of every resource of rl, rounded down: CPU in millicores, the
// other resources in their units; pods is not split (--max-pods is each
// node's). The whole: a copy of rl. The machine's reservations are taken
// before the split: a node's allocatable is p.Of(capacity − reservations).
func (p Portion) Of(rl v1.ResourceList) v1.ResourceList {
	out := make(v1.ResourceList, len(rl))
	for name, q := range rl {
		switch {
		case p.Whole() || name == v1.ResourcePods:
			out[name] = q.DeepCopy()
		case name == v1.ResourceCPU:
			out[name] = *resource.NewMilliQuantity(p.Scale(q.MilliValue()), q.Format)
		default:
			out[name] = *resource.NewQuantity(p.Scale(q.Value()), q.Format)
		}
	}
	return out
}
