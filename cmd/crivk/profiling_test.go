package main

import (
	"context"
	"io"
	"net"
	"net/http"
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
	if err := serveProfiling(ctx, addr, false); err != nil {
		t.Fatalf("serveProfiling: %v", err)
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
	if err := serveProfiling(ctx, addr, false); err == nil || !strings.Contains(err.Error(), "--profiling-address") {
		t.Errorf("second server on the same address: error %v, want one naming --profiling-address", err)
	}
}

func TestProfilingFlagOffByDefault(t *testing.T) {
	o, err := parseFlags([]string{"--kubeconfig=/k"})
	if err != nil {
		t.Fatal(err)
	}
	if o.profilingAddress != "" {
		t.Errorf("profiling is on by default (%q)", o.profilingAddress)
	}
	o, err = parseFlags([]string{"--kubeconfig=/k", "--profiling-address=127.0.0.1:6060"})
	if err != nil || o.profilingAddress != "127.0.0.1:6060" {
		t.Errorf("--profiling-address not parsed: %+v %v", o, err)
	}
}

// TestTracing: with --tracing the spans of a pod sync and of its CRI calls
// are served by zpages on the profiling address.
func TestTracing(t *testing.T) {
	if _, err := parseFlags([]string{"--kubeconfig=/k", "--tracing"}); err == nil || !strings.Contains(err.Error(), "--profiling-address") {
		t.Errorf("--tracing without --profiling-address: %v, want an error naming --profiling-address", err)
	}
	prev := trace.T
	defer func() { trace.T = prev }()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := serveProfiling(ctx, addr, true); err != nil {
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
}
