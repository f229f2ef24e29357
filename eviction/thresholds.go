package eviction

import (
	"sort"
	"time"

	evictionapi "github.com/crivk/crivk/eviction/api"
	v1 "k8s.io/api/core/v1"
)

// The threshold bookkeeping of one synchronize, pure functions of the
// observations and the previous state (the kubelet's helpers.go):
//
//	met(thresholds)            available < value (+ min reclaim for those met before)
//	   │ firstObservedAt        when each met threshold was first met, kept while it stays met
//	   │ pressure               the conditions of the met thresholds, grace period or not
//	   │   lastObservedAt       when each condition was last seen; a condition is reported
//	   │                        while seen within the transition period
//	   └ graceMet               the met thresholds whose grace period has passed: eviction

// thresholdsMet returns the thresholds of ts that obs meets: the available
// amount is below the threshold's value (with enforceMinReclaim, below the
// value plus its minimum reclaim). A signal without an observation meets
// nothing; on a node of many, memory.available is met by the node's
// measure or the machine's (observation.facing).
func thresholdsMet(ts []evictionapi.Threshold, obs observations, enforceMinReclaim bool) []evictionapi.Threshold {
	var out []evictionapi.Threshold
	for _, t := range ts {
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		if o.facing(t, enforceMinReclaim).meets(t, enforceMinReclaim) {
			out = append(out, t)
		}
	}
	return out
}

// mergeThresholds is a with those of b it lacks.
func mergeThresholds(a, b []evictionapi.Threshold) []evictionapi.Threshold {
	out := append([]evictionapi.Threshold(nil), a...)
	have := map[key]bool{}
	for _, t := range a {
		have[keyOf(t)] = true
	}
	for _, t := range b {
		if !have[keyOf(t)] {
			out = append(out, t)
			have[keyOf(t)] = true
		}
	}
	return out
}

// firstObservedAt keeps, for each threshold met now, when it was first met
// (now for those newly met); thresholds no longer met are forgotten.
func firstObservedAt(met []evictionapi.Threshold, prev map[key]time.Time, now time.Time) map[key]time.Time {
	out := map[key]time.Time{}
	for _, t := range met {
		at, ok := prev[keyOf(t)]
		if !ok {
			at = now
		}
		out[keyOf(t)] = at
	}
	return out
}

// graceMet returns the thresholds of met whose grace period has passed
// since they were first met.
func graceMet(met []evictionapi.Threshold, first map[key]time.Time, now time.Time) []evictionapi.Threshold {
	var out []evictionapi.Threshold
	for _, t := range met {
		if now.Sub(first[keyOf(t)]) >= t.GracePeriod {
			out = append(out, t)
		}
	}
	return out
}

// conditionsOf returns the node conditions of thresholds, each once.
func conditionsOf(ts []evictionapi.Threshold) []v1.NodeConditionType {
	var out []v1.NodeConditionType
	for _, t := range ts {
		c, ok := signalCondition[t.Signal]
		if ok && !hasCondition(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// lastObservedAt records now for the conditions observed now and keeps the
// older times of the others.
func lastObservedAt(observed []v1.NodeConditionType, prev map[v1.NodeConditionType]time.Time, now time.Time) map[v1.NodeConditionType]time.Time {
	out := map[v1.NodeConditionType]time.Time{}
	for c, at := range prev {
		out[c] = at
	}
	for _, c := range observed {
		out[c] = now
	}
	return out
}

// observedSince returns the conditions last observed less than period
// ago, in a stable order (Memory, Disk, PID pressure).
func observedSince(last map[v1.NodeConditionType]time.Time, period time.Duration, now time.Time) []v1.NodeConditionType {
	var out []v1.NodeConditionType
	for c, at := range last {
		if now.Sub(at) < period {
			out = append(out, c)
		}
	}
	order := map[v1.NodeConditionType]int{v1.NodeMemoryPressure: 0, v1.NodeDiskPressure: 1, v1.NodePIDPressure: 2}
	sort.Slice(out, func(i, j int) bool { return order[out[i]] < order[out[j]] })
	return out
}

// updatedSince returns the thresholds whose signal was measured after the
// last synchronize's measure (or that had none): stale stats never evict
// twice for one measure.
func updatedSince(ts []evictionapi.Threshold, obs, last observations) []evictionapi.Threshold {
	var out []evictionapi.Threshold
	for _, t := range ts {
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		l, seen := last[t.Signal]
		if !seen || o.at.IsZero() || o.at.After(l.at) {
			out = append(out, t)
		}
	}
	return out
}

// byEvictionPriority puts memory thresholds first, as the kubelet
// (byEvictionPriority): memory pressure is the most urgent.
func byEvictionPriority(ts []evictionapi.Threshold) {
	sort.SliceStable(ts, func(i, j int) bool {
		mi := ts[i].Signal == evictionapi.SignalMemoryAvailable || ts[i].Signal == evictionapi.SignalAllocatableMemoryAvailable
		mj := ts[j].Signal == evictionapi.SignalMemoryAvailable || ts[j].Signal == evictionapi.SignalAllocatableMemoryAvailable
		return mi && !mj
	})
}

func hasCondition(cs []v1.NodeConditionType, c v1.NodeConditionType) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}
