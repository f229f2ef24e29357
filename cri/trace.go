package cri

import (
	"context"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	"github.com/virtual-kubelet/virtual-kubelet/trace"
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
