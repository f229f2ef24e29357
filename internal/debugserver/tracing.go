package debugserver

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/trace"
	"github.com/virtual-kubelet/virtual-kubelet/trace/opencensus"
	octrace "go.opencensus.io/trace"
	"go.opencensus.io/zpages"
)

// EnableTracing (--tracing) installs OpenCensus as virtual-kubelet's
// tracer and samples every span. Each pod sync is a span
// "podWorker.<create|update|sync|kill|terminated>" with the pod as
// attributes, its CRI calls children "cri.<operation>"; a sync asked for
// by virtual-kubelet's pod controller (createOrUpdatePod, deletePod) is
// that span's child, so one pod's create is one trace from the informer's
// queue to the CRI (lifecycle.UpdatePodOptions.Parent). The status write
// is not in it: virtual-kubelet queues it from a callback without a
// context (updatePodStatus, a trace of its own, with the pod's name).
// With traceFile set, every ended span is also appended there as one
// JSON line (spanLine); the returned close flushes it. Off by default: the
// no-op tracer costs nothing.
func EnableTracing(traceFile string) (closeFn func() error, err error) {
	closeFn = func() error { return nil }
	if traceFile != "" {
		f, err := os.OpenFile(traceFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("--trace-file: %w", err)
		}
		e := &fileExporter{f: f}
		octrace.RegisterExporter(e)
		closeFn = func() error {
			octrace.UnregisterExporter(e)
			return e.close()
		}
	}
	trace.T = opencensus.Adapter{}
	octrace.ApplyConfig(octrace.Config{DefaultSampler: octrace.AlwaysSample()})
	return closeFn, nil
}

// serveTraces serves the spans with zpages on mux (/debug/tracez: spans by
// name and latency, a few samples each, /debug/rpcz).
func serveTraces(mux *http.ServeMux) { zpages.Handle(mux, "/debug") }

// spanLine is one span in --trace-file: IDs in hex as W3C trace context
// writes them, times in RFC 3339 with nanoseconds.
type spanLine struct {
	Name         string         `json:"name"`
	TraceID      string         `json:"traceID"`
	SpanID       string         `json:"spanID"`
	ParentSpanID string         `json:"parentSpanID,omitempty"`
	Start        time.Time      `json:"start"`
	End          time.Time      `json:"end"`
	Attributes   map[string]any `json:"attributes,omitempty"`
	// Status is the span's error, if it failed.
	Status string `json:"status,omitempty"`
}

func spanLineOf(sd *octrace.SpanData) spanLine {
	l := spanLine{Name: sd.Name, TraceID: hex.EncodeToString(sd.TraceID[:]), SpanID: hex.EncodeToString(sd.SpanID[:]),
		Start: sd.StartTime, End: sd.EndTime, Attributes: sd.Attributes}
	if sd.ParentSpanID != (octrace.SpanID{}) {
		l.ParentSpanID = hex.EncodeToString(sd.ParentSpanID[:])
	}
	if sd.Code != octrace.StatusCodeOK {
		l.Status = fmt.Sprintf("code %d: %s", sd.Code, sd.Message)
	}
	return l
}

// fileExporter appends each span to f as it ends (OpenCensus calls
// ExportSpan from the goroutine that ended the span, concurrently).
type fileExporter struct {
	mu sync.Mutex // guards f and failed
	f  *os.File
	// failed is set after the first write error, which is not repeated.
	failed bool
}

var _ octrace.Exporter = (*fileExporter)(nil)

func (e *fileExporter) ExportSpan(sd *octrace.SpanData) {
	b, err := json.Marshal(spanLineOf(sd))
	if err != nil {
		return
	}
	b = append(b, '\n')
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.f == nil || e.failed {
		return
	}
	if _, err := e.f.Write(b); err != nil {
		e.failed = true
		fmt.Fprintf(os.Stderr, "--trace-file: %v; no more spans are written\n", err)
	}
}

func (e *fileExporter) close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.f == nil {
		return nil
	}
	err := e.f.Close()
	e.f = nil
	return err
}
