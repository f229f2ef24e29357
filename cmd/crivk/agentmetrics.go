package main

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// agentMetrics serves the node API's /metrics, the agent's own metrics in
// the Prometheus text format as the kubelet's /metrics: the Go runtime's,
// the process's (CPU, memory, open files) and crivk's build. Clients that
// scrape a kubelet (the e2e framework's metrics grabber, Prometheus) get
// an answer instead of a 404. Authorised as nodes/metrics (provider.Auth).
func agentMetrics() http.Handler {
	reg := prometheus.NewRegistry()
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "crivk_build_info",
		Help: "crivk's version (the Kubernetes version it implements, then its own build), always 1.",
	}, []string{"version"})
	build.WithLabelValues(version).Set(1)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), build)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
