package nodeapi

import (
	"net/http"
	"time"

	"github.com/crivk/crivk/lifecycle/prober"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ProbeMetrics is the kubelet's prober_probe_total counter and
// prober_probe_duration_seconds histogram, served in the Prometheus text
// format at /metrics/probes of the node's HTTPS endpoint, as the kubelet
// does.
type ProbeMetrics struct {
	reg      *prometheus.Registry
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

var _ prober.Metrics = (*ProbeMetrics)(nil)

// NewProbeMetrics returns the counter in a registry of its own.
func NewProbeMetrics() *ProbeMetrics {
	m := &ProbeMetrics{
		reg: prometheus.NewRegistry(),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "prober",
			Name:      "probe_total",
			Help:      "Cumulative number of a liveness, readiness or startup probe for a container by result.",
		}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "prober",
			Name:      "probe_duration_seconds",
			Help:      "Duration in seconds for a probe response.",
		}, []string{"probe_type", "container", "pod", "namespace"}),
	}
	m.reg.MustRegister(m.total, m.duration)
	return m
}

// Observe counts one probe run with result "successful" or "failed"; a
// successful one's duration goes into the histogram (as the kubelet).
func (m *ProbeMetrics) Observe(l prober.MetricLabels, result string, took time.Duration) {
	m.total.WithLabelValues(l.ProbeType, result, l.Container, l.Pod, l.Namespace, l.PodUID).Inc()
	if result == "successful" {
		m.duration.WithLabelValues(l.ProbeType, l.Container, l.Pod, l.Namespace).Observe(took.Seconds())
	}
}

// Forget drops the series of a probe whose worker stopped.
func (m *ProbeMetrics) Forget(l prober.MetricLabels) {
	m.total.DeletePartialMatch(prometheus.Labels{
		"probe_type": l.ProbeType, "container": l.Container, "pod": l.Pod, "namespace": l.Namespace, "pod_uid": l.PodUID,
	})
	m.duration.DeleteLabelValues(l.ProbeType, l.Container, l.Pod, l.Namespace)
}

// Handler serves the metrics.
func (m *ProbeMetrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
