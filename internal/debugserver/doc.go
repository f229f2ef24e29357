// Package debugserver is crivk's debugging endpoints, both off by default:
// the net/http/pprof profiles on --profiling-address (ServeProfiling) and
// the OpenCensus tracing of --tracing (EnableTracing), whose spans zpages
// serves on that same address at /debug/tracez and --trace-file receives
// as one JSON line each.
//
// Who calls what: cmd/crivk's run calls EnableTracing first (so that the
// first pod sync is traced) and then ServeProfiling; the spans themselves
// are started by cri.StartSpan (the pod worker's sync and every CRI call)
// and by virtual-kubelet's controllers through its trace package, which
// EnableTracing points at OpenCensus.
//
// It must never serve on the node API's port (the profiles show internals
// and are unauthenticated): the address is the operator's, loopback in the
// chart and the docs.
package debugserver
