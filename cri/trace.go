package cri

import (
	"context"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	"github.com/virtual-kubelet/virtual-kubelet/trace"
	octrace "go.opencensus.io/trace"
)

// StartSpan starts a span through virtual-kubelet's trace package (the
// tracer crivk's --tracing installs: OpenCensus, served by zpages; a no-op
// otherwise). The no-op tracer's span has no logger and would replace the
// context's (pod-scoped) logger with the global one: the context keeps
// its logger then.
func StartSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	l := log.G(ctx)
	ctx, span := trace.StartSpan(ctx, name)
	if span.Logger() == nil {
		ctx = log.WithLogger(ctx, l)
	}
	return ctx, span
}

// SpanRef is the span of a call that asked for work another goroutine does
// later: virtual-kubelet's createOrUpdatePod calling the provider's
// CreatePod, whose pod worker syncs the pod after the call returned. The
// worker starts its span with StartSpanFrom, as a child of that one, so
// that the pod's create (or delete) is one trace from the informer to the
// CRI calls. The zero SpanRef is none. Only OpenCensus spans (--tracing)
// are carried; with the no-op tracer every SpanRef is none.
type SpanRef struct {
	// span may have ended: only its identity (trace and span ID) is used.
	span *octrace.Span
}

// SpanRefFrom returns the span ctx carries (none if it carries none).
func SpanRefFrom(ctx context.Context) SpanRef { return SpanRef{span: octrace.FromContext(ctx)} }

// IsZero reports whether r is none.
func (r SpanRef) IsZero() bool { return r.span == nil }

// StartSpanFrom is StartSpan with parent as the new span's parent when ctx
// carries no span of its own (a worker's context, started from the
// process's); a span in ctx wins, as it is the nearer cause.
func StartSpanFrom(ctx context.Context, parent SpanRef, name string) (context.Context, trace.Span) {
	if parent.span != nil && octrace.FromContext(ctx) == nil {
		ctx = octrace.NewContext(ctx, parent.span)
	}
	return StartSpan(ctx, name)
}
