package main

import (
	"strings"
	"testing"
)

func TestProfilingFlagOffByDefault(t *testing.T) {
	o, err := parseFlags([]string{"--kubeconfig=/k"})
	if err != nil {
		t.Fatal(err)
	}
	if o.ProfilingAddress != "" {
		t.Errorf("profiling is on by default (%q)", o.ProfilingAddress)
	}
	o, err = parseFlags([]string{"--kubeconfig=/k", "--profiling-address=127.0.0.1:6060"})
	if err != nil || o.ProfilingAddress != "127.0.0.1:6060" {
		t.Errorf("--profiling-address not parsed: %+v %v", o, err)
	}
}

// TestTracingFlags: --tracing needs somewhere to put its spans, and
// --trace-file needs --tracing (the tracing itself: internal/debugserver).
func TestTracingFlags(t *testing.T) {
	for name, tc := range map[string]struct {
		args    []string
		wantErr string
	}{
		"tracing alone":          {args: []string{"--tracing"}, wantErr: "--profiling-address"},
		"trace file alone":       {args: []string{"--trace-file=/t"}, wantErr: "--trace-file needs --tracing"},
		"with profiling address": {args: []string{"--tracing", "--profiling-address=127.0.0.1:6060"}},
		"with trace file":        {args: []string{"--tracing", "--trace-file=/t"}},
	} {
		_, err := parseFlags(append([]string{"--kubeconfig=/k"}, tc.args...))
		if tc.wantErr == "" && err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: error %v, want one naming %s", name, err, tc.wantErr)
		}
	}
}
