package provider

import (
	"net/http"

	"github.com/crivk/crivk/lifecycle/prober"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ProbeMetrics is the kubelet's prober_probe_total counter, served in the
// Prometheus text format at /metrics/probes of the node's HTTPS endpoint,
// as the kubelet does.
type ProbeMetrics struct {
	reg   *prometheus.Registry
	total *prometheus.CounterVec
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
	}
	m.reg.MustRegister(m.total)
	return m
}

// Observe counts one probe run with result "successful", "failed" or
// "unknown".
func (m *ProbeMetrics) Observe(l prober.MetricLabels, result string) {
	m.total.WithLabelValues(l.ProbeType, result, l.Container, l.Pod, l.Namespace, l.PodUID).Inc()
}

// Forget drops the series of a probe whose worker stopped.
func (m *ProbeMetrics) Forget(l prober.MetricLabels) {
	m.total.DeletePartialMatch(prometheus.Labels{
		"probe_type": l.ProbeType, "container": l.Container, "pod": l.Pod, "namespace": l.Namespace, "pod_uid": l.PodUID,
	})
}

// Handler serves the metrics.
func (m *ProbeMetrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
