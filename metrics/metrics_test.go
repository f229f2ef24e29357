package metrics

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/lifecycle"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func scrape(t *testing.T, m *Agent) map[string]*dto.MetricFamily {
	t.Helper()
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != 200 {
		t.Fatalf("status %d", w.Code)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(w.Body.String()))
	if err != nil {
		t.Fatalf("not Prometheus text: %v", err)
	}
	return families
}

// sample is the value of name's series with the given label value (the
// count for histograms); -1 when absent.
func sample(families map[string]*dto.MetricFamily, name, label string) float64 {
	f := families[name]
	if f == nil {
		return -1
	}
	for _, m := range f.GetMetric() {
		match := label == ""
		for _, l := range m.GetLabel() {
			if l.GetValue() == label {
				match = true
			}
		}
		if !match {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount())
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

// TestAgentMetrics: /metrics is Prometheus text with crivk's build, the
// process's metrics, and each kubelet metric registered and moving with
// what it observes.
func TestAgentMetrics(t *testing.T) {
	const version = "v1.37.2-crivk.0"
	m := NewAgent(version)
	before := scrape(t, m)
	b := before["crivk_build_info"]
	if b == nil || len(b.GetMetric()) != 1 || b.GetMetric()[0].GetLabel()[0].GetValue() != version {
		t.Errorf("crivk_build_info %v", b)
	}
	for _, name := range []string{"process_resident_memory_bytes", "go_goroutines"} {
		if before[name] == nil {
			t.Errorf("%s missing", name)
		}
	}
	m.ObserveCall("run_podsandbox", 300*time.Millisecond, nil)
	m.ObserveCall("run_podsandbox", time.Second, errors.New("boom"))
	m.ObserveRelist(20*time.Millisecond, 0)
	m.ObserveRelist(20*time.Millisecond, time.Second)
	m.ObserveSync("create", 2*time.Second)
	m.ObservePodStart(3 * time.Second)
	m.ObservePodStartSLI(2 * time.Second)
	m.Increment(context.Background(), "200", "GET", "192.0.2.2:6443")
	m.ObserveRunning(3, map[cri.State]int{cri.StateRunning: 4, cri.StateExited: 2})
	m.ObserveEviction("memory.available")
	m.ObserveEviction("memory.available")
	m.ObserveEvictionStatsAge("memory.available", 2*time.Second)
	m.ObservePreemption("memory")
	m.WatchPods(func() lifecycle.PodCounts {
		return lifecycle.PodCounts{Desired: 5, DesiredStatic: 2, Working: map[[3]string]int{
			{"sync", "desired", ""}: 4, {"sync", "desired", "true"}: 2, {"terminating", "runtime_only", "unknown"}: 1}}
	})
	after := scrape(t, m)
	for _, c := range []struct {
		name, label string
		want        float64
	}{
		{"kubelet_runtime_operations_total", "run_podsandbox", 2},
		{"kubelet_runtime_operations_errors_total", "run_podsandbox", 1},
		{"kubelet_runtime_operations_duration_seconds", "run_podsandbox", 2},
		{"kubelet_pleg_relist_duration_seconds", "", 2},
		{"kubelet_pleg_relist_interval_seconds", "", 1},
		{"kubelet_pod_worker_duration_seconds", "create", 1},
		{"kubelet_pod_start_duration_seconds", "", 1},
		{"kubelet_pod_start_sli_duration_seconds", "", 1},
		{"rest_client_requests_total", "GET", 1},
		{"kubelet_running_pods", "", 3},
		{"kubelet_running_containers", "running", 4},
		{"kubelet_running_containers", "exited", 2},
		{"kubelet_running_containers", "created", 0},
		{"kubelet_desired_pods", "", 5},
		{"kubelet_desired_pods", "true", 2},
		{"kubelet_evictions", "memory.available", 2},
		{"kubelet_eviction_stats_age_seconds", "memory.available", 1},
		{"kubelet_preemptions", "memory", 1},
	} {
		if got := sample(after, c.name, c.label); got != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, c.label, got, c.want)
		}
	}
	// kubelet_working_pods: every lifecycle x (config, static) series the
	// kubelet reports, the engine's counts where it has them.
	working := map[string]float64{}
	for _, mm := range after["kubelet_working_pods"].GetMetric() {
		labels := map[string]string{}
		for _, l := range mm.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		working[labels["lifecycle"]+"/"+labels["config"]+"/"+labels["static"]] = mm.GetGauge().GetValue()
	}
	if len(working) != 15 || working["sync/desired/"] != 4 || working["sync/desired/true"] != 2 ||
		working["terminating/runtime_only/unknown"] != 1 || working["terminated/orphan/true"] != 0 {
		t.Errorf("kubelet_working_pods %v", working)
	}
}
