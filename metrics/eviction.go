package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The eviction manager's metrics, the kubelet's (pkg/kubelet/metrics):
// kubelet_evictions{eviction_signal} counts the pods evicted by signal
// (memory.available, nodefs.available, ..., and the local storage limits
// ephemeralpodfs.limit, ephemeralcontainerfs.limit, emptydirfs.limit);
// kubelet_eviction_stats_age_seconds{eviction_signal} is how old the stats
// of each met threshold were when a pod was evicted;
// kubelet_preemptions{preemption_signal} counts the pods evicted to admit a
// critical pod, by the first resource it lacked (lifecycle's critical pod
// admission). The kubelet's counters are named without _total
// (component-base metrics), so are these.
type evictionMetrics struct {
	evictions   *prometheus.CounterVec
	preemptions *prometheus.CounterVec
	statsAge    *prometheus.HistogramVec
}

func newEvictionMetrics(reg prometheus.Registerer) evictionMetrics {
	return evictionMetrics{
		evictions: newCounterVec(reg, "kubelet_evictions",
			"Cumulative number of pod evictions by eviction signal",
			"eviction_signal"),
		preemptions: newCounterVec(reg, "kubelet_preemptions",
			"Cumulative number of pod preemptions by preemption resource",
			"preemption_signal"),
		statsAge: newHistogramVec(reg, "kubelet_eviction_stats_age_seconds",
			"Time between when stats are collected, and when pod is evicted based on those stats by eviction signal",
			prometheus.DefBuckets, "eviction_signal"),
	}
}

// ObserveEviction counts a pod evicted for signal (eviction.Config.ObserveEviction).
func (m *Agent) ObserveEviction(signal string) {
	m.eviction.evictions.WithLabelValues(signal).Inc()
}

// ObserveEvictionStatsAge records the age of a met threshold's stats at an
// eviction (eviction.Config.ObserveStatsAge).
func (m *Agent) ObserveEvictionStatsAge(signal string, age time.Duration) {
	m.eviction.statsAge.WithLabelValues(signal).Observe(age.Seconds())
}

// ObservePreemption counts a pod evicted to admit a critical pod, by the
// resource it lacked (lifecycle.Config.ObservePreemption).
func (m *Agent) ObservePreemption(resource string) {
	m.eviction.preemptions.WithLabelValues(resource).Inc()
}
