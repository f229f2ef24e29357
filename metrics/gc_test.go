package metrics

import (
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
)

func TestGCMetrics(t *testing.T) {
	m := NewAgent("v")
	m.ObserveImageRemoved("space")
	m.ObserveImageRemoved("space")
	m.ObserveImageRemoved("age")
	m.ObserveImageGC(time.Second)
	m.ObserveContainerGC(cri.GCResult{Containers: 3, Sandboxes: 1, LogDirs: 2}, time.Second)
	got := scrape(t, m)
	for _, c := range []struct {
		name, label string
		want        float64
	}{
		{"kubelet_image_garbage_collected_total", "space", 2},
		{"kubelet_image_garbage_collected_total", "age", 1},
		{"crivk_garbage_collection_duration_seconds", "images", 1},
		{"crivk_garbage_collection_duration_seconds", "containers", 1},
		{"crivk_garbage_collected_total", "container", 3},
		{"crivk_garbage_collected_total", "sandbox", 1},
		{"crivk_garbage_collected_total", "pod_log_dir", 2},
	} {
		if v := sample(got, c.name, c.label); v != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, c.label, v, c.want)
		}
	}
}
