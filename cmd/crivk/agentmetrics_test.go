package main

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestAgentMetrics: /metrics is Prometheus text with crivk's build and
// the process's metrics.
func TestAgentMetrics(t *testing.T) {
	w := httptest.NewRecorder()
	agentMetrics().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != 200 {
		t.Fatalf("status %d", w.Code)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(w.Body.String()))
	if err != nil {
		t.Fatalf("not Prometheus text: %v", err)
	}
	b := families["crivk_build_info"]
	if b == nil || len(b.GetMetric()) != 1 || b.GetMetric()[0].GetLabel()[0].GetValue() != version {
		t.Errorf("crivk_build_info %v", b)
	}
	for _, name := range []string{"process_resident_memory_bytes", "go_goroutines"} {
		if families[name] == nil {
			t.Errorf("%s missing", name)
		}
	}
}
