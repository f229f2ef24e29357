package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func window(reqs, apiCores float64, watches float64, agentRSS uint64) *Window {
	return &Window{Seconds: 10, RequestsPerSec: map[string]float64{"GET": reqs / 2, "PATCH": reqs / 2},
		ByResourcePerSec: map[string]float64{"GET nodes": reqs / 2, "PATCH pods/status": reqs / 2},
		TotalRequestsPS:  reqs, APIServerCores: apiCores, LongRunning: watches, Watchers: -1,
		ResponseBytesPS: 1024, WatchBytesPS: -1, RequestBytesPS: 2048, AgentRSS: agentRSS}
}

func TestReport(t *testing.T) {
	res := &Results{Command: "make bench-fleet", Commit: "abc", Machine: "m"}
	for _, n := range []int{10, 50} {
		for _, a := range []string{"crivk", "kubelet"} {
			res.Runs = append(res.Runs, &Run{Agent: a, Nodes: n, Processes: 1,
				Baseline: window(5, 0.05, 10, 0),
				Steady:   window(5+float64(n), 0.05+0.001*float64(n), 10+2*float64(n), uint64(n)<<20),
				Churn:    window(5+2*float64(n), 0.05+0.002*float64(n), 10+2*float64(n), uint64(n)<<20)})
		}
	}
	res.Runs = append(res.Runs, &Run{Agent: "crivk", Nodes: 100, Error: "3 of 300 pods not Running"})
	res.Skipped = []string{"100 nodes: skipped"}
	dir := t.TempDir()
	plots, err := writePlots(res, dir, ".")
	if err != nil {
		t.Fatal(err)
	}
	if len(plots) != 3 {
		t.Fatalf("writePlots wrote %v, want 3 plots", plots)
	}
	for _, p := range plots {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Error(err)
		}
	}
	md := markdown(res, plots)
	for _, want := range []string{
		"## 10 nodes", "## 50 nodes", "## 100 nodes", "## Per-node cost against node count",
		// 10 nodes, steady: (15-5)/10 requests/s per node, (0.06-0.05)/10 cores.
		"| steady: API requests/s | 1.00 | 1.00 |",
		"| steady: kube-apiserver CPU (millicores) | 1.00 | 1.00 |",
		"| watches held (apiserver_longrunning_requests{verb=WATCH}, end of steady) | 2.00 | 2.00 |",
		"**3 of 300 pods not Running**", "**Skipped**: 100 nodes: skipped",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}
