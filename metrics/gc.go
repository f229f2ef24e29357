package metrics

import (
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/prometheus/client_golang/prometheus"
)

// gcMetrics are the garbage collectors' metrics:
//
//   - kubelet_image_garbage_collected_total{reason}: images removed by
//     the image collector, reason "age" or "space" (the kubelet's;
//     images.Config.ObserveRemoved);
//   - crivk_garbage_collection_duration_seconds{collector}: how long each
//     collection took, collector "images" (images.Config.ObserveCollection)
//     or "containers" (cri.ContainerGCConfig.Observe); the kubelet has no
//     such metric;
//   - crivk_garbage_collected_total{object}: what the container collector
//     removed, object "container", "sandbox" or "pod_log_dir"
//     (cri.ContainerGCConfig.Observe); the kubelet has none either.
type gcMetrics struct {
	imagesRemoved *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	removed       *prometheus.CounterVec
}

func newGCMetrics(reg prometheus.Registerer) gcMetrics {
	return gcMetrics{
		imagesRemoved: newCounterVec(reg, "kubelet_image_garbage_collected_total",
			"Total number of images garbage collected by the kubelet, whether through disk usage or image age.",
			"reason"),
		duration: newHistogramVec(reg, "crivk_garbage_collection_duration_seconds",
			"Duration in seconds of one garbage collection, by collector: images or containers.",
			prometheus.DefBuckets, "collector"),
		removed: newCounterVec(reg, "crivk_garbage_collected_total",
			"Dead containers, sandboxes and pod log directories removed by the container garbage collector, by object.",
			"object"),
	}
}

// ObserveImageRemoved counts an image the image collector removed
// (images.Config.ObserveRemoved).
func (m *Agent) ObserveImageRemoved(reason string) {
	m.gc.imagesRemoved.WithLabelValues(reason).Inc()
}

// ObserveImageGC records an image collection's duration
// (images.Config.ObserveCollection).
func (m *Agent) ObserveImageGC(took time.Duration) {
	m.gc.duration.WithLabelValues("images").Observe(took.Seconds())
}

// ObserveContainerGC records a container collection
// (cri.ContainerGCConfig.Observe).
func (m *Agent) ObserveContainerGC(res cri.GCResult, took time.Duration) {
	m.gc.duration.WithLabelValues("containers").Observe(took.Seconds())
	m.gc.removed.WithLabelValues("container").Add(float64(res.Containers))
	m.gc.removed.WithLabelValues("sandbox").Add(float64(res.Sandboxes))
	m.gc.removed.WithLabelValues("pod_log_dir").Add(float64(res.LogDirs))
}
