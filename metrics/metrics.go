package metrics

import (
	"context"
	"net/http"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/lifecycle"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// Agent holds the node API's /metrics, the agent's own metrics in the
// Prometheus text format, as the kubelet's /metrics: the Go runtime's, the
// process's (CPU, memory, open files), crivk's build, and the kubelet's
// metrics for the work crivk does, under the kubelet's names and labels so
// that dashboards and the e2e framework's metrics grabber read them alike:
//
//   - kubelet_started_user_namespaced_pods_total and _errors_total: syncs
//     that created a hostUsers: false pod's sandbox, and those that failed
//     (cri.Config.ObserveUserNamespacedStart);
//   - kubelet_runtime_operations_total, _errors_total and
//     _duration_seconds{operation_type}: every CRI call (cri.Config.ObserveCall);
//   - kubelet_pleg_relist_duration_seconds and _interval_seconds
//     (pleg.Config.ObserveRelist);
//   - kubelet_pod_worker_duration_seconds{operation_type}: every pod sync,
//     by update type (create, update, sync), kill, and crivk's own
//     "terminated" for the final sync (lifecycle.Config.ObserveSync);
//   - kubelet_pod_start_duration_seconds: first seen -> Running, once per
//     new pod (lifecycle.Config.ObservePodStart);
//   - kubelet_pod_start_sli_duration_seconds: creation -> Running without
//     the image pulls, once per new pod (lifecycle.Config.ObservePodStartSLI);
//   - kubelet_running_pods and kubelet_running_containers{container_state}:
//     pods with a ready sandbox and containers by state at the last PLEG
//     relist (pleg.Config.ObserveRunning);
//   - kubelet_desired_pods{static} and kubelet_working_pods{lifecycle,
//     config,static}: the pod manager's pods and the pods with a worker
//     by work and config, read from the engine at each scrape
//     (lifecycle.Engine.PodCounts, WatchPods), static "true" for static
//     pods (staticpods), "" for the API's and "unknown" for a
//     runtime_only pod, the kubelet's values;
//   - rest_client_requests_total{code,host,method}: every API request
//     (client-go's request result metric);
//   - kubelet_evictions{eviction_signal} and
//     kubelet_eviction_stats_age_seconds{eviction_signal}: the eviction
//     manager's (eviction.Config.ObserveEviction and ObserveStatsAge);
//   - kubelet_preemptions{preemption_signal}: pods evicted to admit a
//     critical pod (lifecycle.Config.ObservePreemption).
//
// The node API serves Handler, authorised as nodes/metrics. Probe results
// are at /metrics/probes, as on the kubelet.
type Agent struct {
	reg          *prometheus.Registry
	runtimeOps   *prometheus.CounterVec
	runtimeErrs  *prometheus.CounterVec
	runtimeDur   *prometheus.HistogramVec
	plegDur      prometheus.Histogram
	plegInterval prometheus.Histogram
	workerDur    *prometheus.HistogramVec
	podStart     prometheus.Histogram
	podStartSLI  prometheus.Histogram
	restRequests *prometheus.CounterVec
	runningPods  prometheus.Gauge
	runningCtrs  *prometheus.GaugeVec
	// usernsStarts and usernsErrors: pods with hostUsers false whose
	// sandbox a sync created, and those syncs that failed somewhere.
	usernsStarts prometheus.Counter
	usernsErrors prometheus.Counter
	// eviction: the eviction manager's (eviction.go).
	eviction evictionMetrics
	gc       gcMetrics // gc.go
}

// podStartBuckets are the kubelet's buckets of both pod start histograms.
var podStartBuckets = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}

// NewAgent returns the agent's metrics, crivk_build_info labelled with
// version.
func NewAgent(version string) *Agent {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	newGaugeVec(reg, "crivk_build_info",
		"crivk's version (the Kubernetes version it implements, then its own build), always 1.",
		"version").WithLabelValues(version).Set(1)
	return &Agent{
		reg: reg,
		runtimeOps: newCounterVec(reg, "kubelet_runtime_operations_total",
			"Cumulative number of runtime operations by operation type.",
			"operation_type"),
		runtimeErrs: newCounterVec(reg, "kubelet_runtime_operations_errors_total",
			"Cumulative number of runtime operation errors by operation type.",
			"operation_type"),
		runtimeDur: newHistogramVec(reg, "kubelet_runtime_operations_duration_seconds",
			"Duration in seconds of runtime operations. Broken down by operation type.",
			prometheus.ExponentialBuckets(.005, 2.5, 14), "operation_type"),
		plegDur: newHistogram(reg, "kubelet_pleg_relist_duration_seconds",
			"Duration in seconds for relisting pods in PLEG.",
			prometheus.DefBuckets),
		plegInterval: newHistogram(reg, "kubelet_pleg_relist_interval_seconds",
			"Interval in seconds between relisting in PLEG.",
			prometheus.DefBuckets),
		workerDur: newHistogramVec(reg, "kubelet_pod_worker_duration_seconds",
			"Duration in seconds to sync a single pod. Broken down by operation type: create, update, sync, kill or terminated.",
			prometheus.DefBuckets, "operation_type"),
		podStart: newHistogram(reg, "kubelet_pod_start_duration_seconds",
			"Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
			podStartBuckets),
		podStartSLI: newHistogram(reg, "kubelet_pod_start_sli_duration_seconds",
			"Duration in seconds to start a pod, excluding time to pull images, measured from pod creation timestamp to when the kubelet sees all its containers running",
			podStartBuckets),
		restRequests: newCounterVec(reg, "rest_client_requests_total",
			"Number of HTTP requests, partitioned by status code, method, and host.",
			"code", "method", "host"),
		runningPods: newGauge(reg, "kubelet_running_pods",
			"Number of pods that have a running pod sandbox"),
		runningCtrs: newGaugeVec(reg, "kubelet_running_containers",
			"Number of containers currently running",
			"container_state"),
		usernsStarts: newCounter(reg, "kubelet_started_user_namespaced_pods_total",
			"Cumulative number of pods with user namespaces started. This metric will only be collected on Linux."),
		usernsErrors: newCounter(reg, "kubelet_started_user_namespaced_pods_errors_total",
			"Cumulative number of errors when starting pods with user namespaces. This metric will only be collected on Linux."),
		eviction: newEvictionMetrics(reg),
		gc:       newGCMetrics(reg),
	}
}

// ObserveUserNamespacedStart counts a sync that created the sandbox of a
// pod with hostUsers false, and, when failed, one whose result had an
// error (cri.Config.ObserveUserNamespacedStart; the kubelet's
// kubelet_started_user_namespaced_pods_total and _errors_total).
func (m *Agent) ObserveUserNamespacedStart(failed bool) {
	m.usernsStarts.Inc()
	if failed {
		m.usernsErrors.Inc()
	}
}

// ObserveRunning records the running pods and containers by state at a
// PLEG relist (pleg.Config.ObserveRunning); every state is
// reported, 0 when none is in it, as the kubelet's.
func (m *Agent) ObserveRunning(pods int, containers map[cri.State]int) {
	m.runningPods.Set(float64(pods))
	for _, st := range []cri.State{cri.StateCreated, cri.StateRunning, cri.StateExited, cri.StateUnknown} {
		m.runningCtrs.WithLabelValues(string(st)).Set(float64(containers[st]))
	}
}

// WatchPods makes each scrape read the engine's pod gauges (the kubelet's
// kubelet_desired_pods and kubelet_working_pods).
func (m *Agent) WatchPods(counts func() lifecycle.PodCounts) {
	m.reg.MustRegister(podCountsCollector(counts))
}

var (
	desiredPodsDesc = prometheus.NewDesc("kubelet_desired_pods",
		"The number of pods the kubelet is being instructed to run. static is true if the pod is not from the apiserver.",
		[]string{"static"}, nil)
	workingPodsDesc = prometheus.NewDesc("kubelet_working_pods",
		"Number of pods the kubelet is actually running, broken down by lifecycle phase, whether the pod is desired, orphaned, or runtime only (also orphaned), and whether the pod is static. An orphaned pod has been removed from local configuration or force deleted in the API and consumes resources that are not otherwise visible.",
		[]string{"lifecycle", "config", "static"}, nil)
)

// workingPodsSeries are the kubelet's {config, static} pairs of
// kubelet_working_pods: a pod with a spec is static or not, a runtime_only
// pod has none ("unknown").
var workingPodsSeries = [][2]string{
	{"desired", "true"}, {"desired", ""},
	{"orphan", "true"}, {"orphan", ""},
	{"runtime_only", "unknown"},
}

// podCountsCollector reports the engine's pod gauges at each scrape.
type podCountsCollector func() lifecycle.PodCounts

func (c podCountsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- desiredPodsDesc
	ch <- workingPodsDesc
}

func (c podCountsCollector) Collect(ch chan<- prometheus.Metric) {
	pc := c()
	ch <- prometheus.MustNewConstMetric(desiredPodsDesc, prometheus.GaugeValue, float64(pc.Desired), "")
	ch <- prometheus.MustNewConstMetric(desiredPodsDesc, prometheus.GaugeValue, float64(pc.DesiredStatic), "true")
	// Every combination the kubelet reports (HandlePodCleanups) is
	// reported, 0 when empty, so a series does not vanish when its last
	// pod goes.
	for _, work := range []string{"sync", "terminating", "terminated"} {
		for _, cs := range workingPodsSeries {
			ch <- prometheus.MustNewConstMetric(workingPodsDesc, prometheus.GaugeValue, float64(pc.Working[[3]string{work, cs[0], cs[1]}]), work, cs[0], cs[1])
		}
	}
}

// Handler serves the metrics.
func (m *Agent) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// ObserveCall counts a CRI call (cri.Config.ObserveCall).
func (m *Agent) ObserveCall(op string, took time.Duration, err error) {
	m.runtimeOps.WithLabelValues(op).Inc()
	m.runtimeDur.WithLabelValues(op).Observe(took.Seconds())
	if err != nil {
		m.runtimeErrs.WithLabelValues(op).Inc()
	}
}

// ObserveRelist records a PLEG relist (pleg.Config.ObserveRelist);
// the first relist has no interval.
func (m *Agent) ObserveRelist(took, interval time.Duration) {
	m.plegDur.Observe(took.Seconds())
	if interval > 0 {
		m.plegInterval.Observe(interval.Seconds())
	}
}

// ObserveSync records a pod sync (lifecycle.Config.ObserveSync).
func (m *Agent) ObserveSync(op string, took time.Duration) {
	m.workerDur.WithLabelValues(op).Observe(took.Seconds())
}

// ObservePodStart records a pod's start (lifecycle.Config.ObservePodStart).
func (m *Agent) ObservePodStart(took time.Duration) {
	m.podStart.Observe(took.Seconds())
}

// ObservePodStartSLI records a pod's start SLI
// (lifecycle.Config.ObservePodStartSLI).
func (m *Agent) ObservePodStartSLI(took time.Duration) {
	m.podStartSLI.Observe(took.Seconds())
}

// Increment counts an API request (client-go's ResultMetric).
func (m *Agent) Increment(_ context.Context, code, method, host string) {
	m.restRequests.WithLabelValues(code, method, host).Inc()
}

var _ clientmetrics.ResultMetric = (*Agent)(nil)

// RegisterClientMetrics makes client-go count every API request in m. It is
// process-wide: call it once, for the Agent the node API serves.
func (m *Agent) RegisterClientMetrics() {
	clientmetrics.Register(clientmetrics.RegisterOpts{RequestResult: m})
}
