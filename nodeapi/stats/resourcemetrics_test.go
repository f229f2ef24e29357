package stats

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crivk/crivk/cm"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type fakeStats struct {
	stats      []*runtimeapi.ContainerStats
	containers []*runtimeapi.Container
	err        error
	filters    []map[string]string
}

func (f *fakeStats) ListContainerStats(_ context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	f.filters = append(f.filters, filter.GetLabelSelector())
	return f.stats, f.err
}

func (f *fakeStats) ListContainers(_ context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	f.filters = append(f.filters, filter.GetLabelSelector())
	return f.containers, nil
}

func ctrStats(id, pod, name string, cpuNs, ws uint64, at time.Time) *runtimeapi.ContainerStats {
	return &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{Id: id, Labels: map[string]string{
			"io.kubernetes.pod.namespace": "ns", "io.kubernetes.pod.name": pod, "io.kubernetes.container.name": name}},
		Cpu:    &runtimeapi.CpuUsage{Timestamp: at.UnixNano(), UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: cpuNs}},
		Memory: &runtimeapi.MemoryUsage{Timestamp: at.UnixNano(), WorkingSetBytes: &runtimeapi.UInt64Value{Value: ws}},
	}
}

func TestResourceMetrics(t *testing.T) {
	at := time.Unix(1700000000, 0)
	root := t.TempDir()
	for path, data := range map[string]string{
		"cpuacct/cpuacct.usage":        "2500000000\n",
		"memory/memory.usage_in_bytes": "1000000\n",
		"memory/memory.stat":           "cache 5\ninactive_file 1\ntotal_inactive_file 250000\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, path), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := &fakeStats{
		stats: []*runtimeapi.ContainerStats{
			ctrStats("c1", "web", "app", 1500000000, 4096, at),
			ctrStats("c2", "web", "side", 500000000, 1024, at),
			ctrStats("gone", "old", "x", 7, 7, at), // exited: not reported
		},
		containers: []*runtimeapi.Container{{Id: "c1", CreatedAt: at.UnixNano()}, {Id: "c2", CreatedAt: at.UnixNano()}},
	}
	host := cm.NewHost(cm.HostConfig{V1Mounts: map[string]string{"cpuacct": filepath.Join(root, "cpuacct"), "memory": filepath.Join(root, "memory")}})
	m := resourceMetrics{runtime: f, node: func() nodeUsage { return readNodeUsage(host, at) }}
	w := httptest.NewRecorder()
	m.ServeHTTP(w, httptest.NewRequest("GET", "/metrics/resource", nil))
	body := w.Body.String()
	for _, want := range []string{
		"# TYPE container_cpu_usage_seconds_total counter",
		`container_cpu_usage_seconds_total{container="app",namespace="ns",pod="web"} 1.5 1700000000000`,
		`container_memory_working_set_bytes{container="side",namespace="ns",pod="web"} 1024 1700000000000`,
		`container_start_time_seconds{container="app",namespace="ns",pod="web"} 1.7e+09 1700000000000`,
		`pod_cpu_usage_seconds_total{namespace="ns",pod="web"} 2 1700000000000`,
		`pod_memory_working_set_bytes{namespace="ns",pod="web"} 5120 1700000000000`,
		"node_cpu_usage_seconds_total 2.5 1700000000000",
		"node_memory_working_set_bytes 750000 1700000000000",
		"resource_scrape_error 0",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %q in\n%s", want, body)
		}
	}
	// metrics-server parses the Prometheus text format.
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("not the Prometheus text format: %v", err)
	}
	if m := fams["container_cpu_usage_seconds_total"].GetMetric(); len(m) != 2 || m[0].GetTimestampMs() != 1700000000000 {
		t.Errorf("parsed container_cpu_usage_seconds_total: %v", m)
	}
	if strings.Contains(body, `pod="old"`) {
		t.Error("an exited container is reported")
	}
	for _, sel := range f.filters {
		if sel["io.crivk.managed-by"] != "crivk" {
			t.Errorf("runtime listed without crivk's label: %v", sel)
		}
	}

	f.err = errors.New("runtime down")
	w = httptest.NewRecorder()
	m.ServeHTTP(w, httptest.NewRequest("GET", "/metrics/resource", nil))
	if !strings.Contains(w.Body.String(), "resource_scrape_error 1") {
		t.Errorf("a runtime failure is not a scrape error:\n%s", w.Body.String())
	}
}
