package provider

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/crivk/crivk/lifecycle/prober"
)

func TestProbeMetrics(t *testing.T) {
	m := NewProbeMetrics()
	l := prober.MetricLabels{ProbeType: "Liveness", Container: "app", Pod: "p", Namespace: "ns", PodUID: "u1"}
	m.Observe(l, "successful", 20*time.Millisecond)
	m.Observe(l, "successful", 30*time.Millisecond)
	m.Observe(l, "failed", time.Second)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	body := func() string {
		res, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	out := body()
	for _, want := range []string{
		`prober_probe_total{container="app",namespace="ns",pod="p",pod_uid="u1",probe_type="Liveness",result="successful"} 2`,
		`prober_probe_total{container="app",namespace="ns",pod="p",pod_uid="u1",probe_type="Liveness",result="failed"} 1`,
		`prober_probe_duration_seconds_count{container="app",namespace="ns",pod="p",probe_type="Liveness"} 2`,
		`prober_probe_duration_seconds_sum{container="app",namespace="ns",pod="p",probe_type="Liveness"} 0.05`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %s:\n%s", want, out)
		}
	}
	m.Forget(l)
	if out := body(); strings.Contains(out, `pod="p"`) {
		t.Errorf("series kept after Forget:\n%s", out)
	}
}
