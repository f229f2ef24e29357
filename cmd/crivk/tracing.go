package main

import (
	"net/http"

	"github.com/virtual-kubelet/virtual-kubelet/trace"
	"github.com/virtual-kubelet/virtual-kubelet/trace/opencensus"
	octrace "go.opencensus.io/trace"
	"go.opencensus.io/zpages"
)

// enableTracing (--tracing) installs OpenCensus as virtual-kubelet's
// tracer, samples every span and serves them with zpages on mux
// (/debug/tracez: spans by name and latency, /debug/rpcz). Each pod sync
// is a span "podWorker.<create|update|sync|kill|terminated>" with the pod
// as attributes, its CRI calls children "cri.<operation>"; virtual-kubelet's
// pod controller adds its own (createOrUpdatePod, deletePod, ...). Off by
// default: the no-op tracer costs nothing.
func enableTracing(mux *http.ServeMux) {
	trace.T = opencensus.Adapter{}
	octrace.ApplyConfig(octrace.Config{DefaultSampler: octrace.AlwaysSample()})
	zpages.Handle(mux, "/debug")
}
