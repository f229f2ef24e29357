package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

func TestServeProfiling(t *testing.T) {
	// Find a free port, then serve there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := serveProfiling(ctx, addr); err != nil {
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
	if err := serveProfiling(ctx, addr); err == nil || !strings.Contains(err.Error(), "--profiling-address") {
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
