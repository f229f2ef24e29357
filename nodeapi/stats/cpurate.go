package stats

import (
	"sync"
	"time"
)

// minRateWindow is the shortest span a CPU rate is taken over: cAdvisor
// takes its rate between two housekeeping samples, at least a second
// apart; two summaries read closer than this (the eviction manager's and
// a client's) keep the rate of the last window rather than divide by a
// few microseconds.
const minRateWindow = time.Second

// cpuRates turns cumulative CPU times into the summary's UsageNanoCores,
// as cAdvisor's InstCpuStats (info/v2/conversion.go) does between its
// last two samples of a cgroup: the CPU time gained over the time passed,
// in nanocores. The kubelet's cadvisor stats provider reports 0 until
// there are two samples (cadvisorInfoToCPUandMemoryStats starts
// UsageNanoCores at 0); so does nanoCores. A counter that went down (the
// cgroup was made again) or a clock that went back starts over from the
// new sample, at 0 as cAdvisor's error does. Safe for concurrent use;
// a nil *cpuRates gives no rate.
type cpuRates struct {
	mu sync.Mutex
	// last is each cgroup's reference sample, by cgroup name; guarded by mu.
	last map[string]cpuSample
}

type cpuSample struct {
	at   time.Time
	ns   uint64
	rate uint64 // the rate up to at
}

func newCPURates() *cpuRates { return &cpuRates{last: map[string]cpuSample{}} }

// nanoCores records the cgroup's cumulative CPU time ns read at at and
// returns its rate since the reference sample.
func (r *cpuRates) nanoCores(cgroup string, at time.Time, ns uint64) *uint64 {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, ok := r.last[cgroup]
	switch {
	case !ok || ns < prev.ns || !at.After(prev.at):
		r.last[cgroup] = cpuSample{at: at, ns: ns}
		var zero uint64
		return &zero
	case at.Sub(prev.at) < minRateWindow:
		rate := prev.rate
		return &rate
	}
	rate := uint64(float64(ns-prev.ns) / float64(at.Sub(prev.at).Nanoseconds()) * 1e9)
	r.last[cgroup] = cpuSample{at: at, ns: ns, rate: rate}
	return &rate
}
