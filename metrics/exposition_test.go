package metrics

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/lifecycle"
	"github.com/prometheus/common/expfmt"
)

var update = flag.Bool("update", false, "rewrite testdata/exposition.txt from the code")

// TestExposition: every metric's name, help text, type, label names and
// buckets, as /metrics shows them, are byte for byte those of
// testdata/exposition.txt (the kubelet's contract; doc.go: never rename a
// metric or a label, never change a histogram's buckets). Each hook is
// called once with fixed values so every vector has a series; the Go
// runtime's and the process's metrics are left out (they vary by machine).
// A deliberate change is written with `go test ./metrics -run
// TestExposition -update` and shows in the diff.
func TestExposition(t *testing.T) {
	m := NewAgent("v1.37.2-crivk.0")
	m.ObserveCall("run_podsandbox", time.Second, context.Canceled)
	m.ObserveUserNamespacedStart(true)
	m.ObserveRelist(time.Second, time.Second)
	m.ObserveSync("create", time.Second)
	m.ObservePodStart(time.Second)
	m.ObservePodStartSLI(time.Second)
	m.Increment(context.Background(), "200", "GET", "192.0.2.2:6443")
	m.ObserveRunning(1, map[cri.State]int{cri.StateRunning: 1})
	m.ObserveEviction("memory.available")
	m.ObserveEvictionStatsAge("memory.available", time.Second)
	m.ObservePreemption("memory")
	m.ObserveImageRemoved("age")
	m.ObserveImageGC(time.Second)
	m.ObserveContainerGC(cri.GCResult{Containers: 1, Sandboxes: 1, LogDirs: 1}, time.Second)
	m.WatchPods(func() lifecycle.PodCounts { return lifecycle.PodCounts{Desired: 1} })

	families, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "go_") || strings.HasPrefix(f.GetName(), "process_") {
			continue
		}
		if _, err := expfmt.MetricFamilyToText(&got, f); err != nil {
			t.Fatal(err)
		}
	}
	golden := filepath.Join("testdata", "exposition.txt")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("/metrics differs from %s (rewrite it with -update only for a deliberate change):\n%s", golden, lineDiff(string(want), got.String()))
	}
}

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if !w[l] {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}
