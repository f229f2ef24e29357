package debugserver

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crivk/crivk/cri"
	"github.com/virtual-kubelet/virtual-kubelet/trace"
)

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestServeProfiling(t *testing.T) {
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := ServeProfiling(ctx, addr, false); err != nil {
		t.Fatalf("ServeProfiling: %v", err)
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatalf("GET goroutine profile: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine profile:") {
		t.Fatalf("status %d, body %.200q: not a goroutine profile", resp.StatusCode, body)
	}
	if err := ServeProfiling(ctx, addr, false); err == nil || !strings.Contains(err.Error(), "--profiling-address") {
		t.Errorf("second server on the same address: error %v, want one naming --profiling-address", err)
	}
}

// TestTracing: with tracing on, the spans of a pod sync and of its CRI
// calls are served by zpages on the profiling address and written to the
// trace file one JSON line each, the child naming its parent.
func TestTracing(t *testing.T) {
	prev := trace.T
	defer func() { trace.T = prev }()
	file := filepath.Join(t.TempDir(), "spans.jsonl")
	closeTraces, err := EnableTracing(file)
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := ServeProfiling(ctx, addr, true); err != nil {
		t.Fatal(err)
	}
	sctx, span := cri.StartSpan(ctx, "podWorker.create")
	_, child := cri.StartSpan(sctx, "cri.run_podsandbox")
	child.End()
	span.End()
	resp, err := http.Get("http://" + addr + "/debug/tracez")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, name := range []string{"podWorker.create", "cri.run_podsandbox"} {
		if !strings.Contains(string(body), name) {
			t.Errorf("/debug/tracez does not list span %s", name)
		}
	}
	if err := closeTraces(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]spanLine{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var s spanLine
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		byName[s.Name] = s
	}
	p, c := byName["podWorker.create"], byName["cri.run_podsandbox"]
	if p.SpanID == "" || p.ParentSpanID != "" || c.TraceID != p.TraceID || c.ParentSpanID != p.SpanID || len(c.SpanID) != 16 || len(c.TraceID) != 32 {
		t.Errorf("spans in the file: parent %+v, child %+v; want the child in the parent's trace, naming it", p, c)
	}
	if c.End.Before(c.Start) || c.Start.IsZero() {
		t.Errorf("child's times %s..%s", c.Start, c.End)
	}
}
