package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sampleResults() *Results {
	nan := Num(math.NaN())
	lane := func(name string, w1 []float64, lag float64, cpu, rss, req Num) LaneResult {
		b := Batch{Size: 30, Samples: w1, PerPod: Summarize(w1), Lag: lag, PodsPerSecond: 30 / lag}
		// W4: 0.5 s of busybox lag before containerd's exit.
		var sched, lagged []float64
		for _, v := range w1 {
			sched, lagged = append(sched, v+0.5), append(lagged, 0.5)
		}
		return LaneResult{Lane: name, W1: Summarize(w1), W1Raw: w1, W2: []Batch{b}, W3: []Batch{b},
			W4: Summarize(sched), W4Raw: sched, W4Exit: Summarize(w1), W4ExitRaw: w1, W4ExitLag: Summarize(lagged), W4ExitLagRaw: lagged,
			W5: []Steady{{Pods: 0, Seconds: 10, AgentCPU: cpu, AgentRSSMiB: rss, AgentRSSMax: rss, ContainerdCPU: 0.01, APIRequests: req},
				{Pods: 30, Seconds: 10, AgentCPU: cpu * 2, AgentRSSMiB: rss + 5, AgentRSSMax: rss + 6, ContainerdCPU: 0.02, APIRequests: req}}}
	}
	// rawapi: 1.05 times raw, without W4 and W5 (its agent measures
	// neither).
	rawapi := lane("rawapi", []float64{0.21, 0.315, 0.42}, 1.05, nan, nan, nan)
	rawapi.W4, rawapi.W4Raw, rawapi.W4Exit, rawapi.W4ExitRaw, rawapi.W4ExitLag, rawapi.W4ExitLagRaw, rawapi.W5 = Summary{}, nil, Summary{}, nil, Summary{}, nil, nil
	return &Results{
		Started: time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC), Seconds: 200, Quick: true,
		Plan:     Plan{W1Count: 3, Batches: []int{30}, W4Count: 3, SteadyPods: []int{0, 30}, SteadyDuration: 10 * time.Second},
		Machine:  Machine{CPUModel: "test CPU", CPUs: 2, MemGiB: 24, Kernel: "6.1", OS: "Debian"},
		Command:  "BENCH_QUICK=1 make bench",
		Settings: Settings{QPS: 50, Burst: 100, MaxPods: 250},
		Lanes: []LaneResult{
			lane("raw", []float64{0.2, 0.3, 0.4}, 1, nan, nan, nan),
			rawapi,
			lane("kubelet", []float64{1, 2, 3}, 8, 0.05, 80, 4),
			lane("crivk", []float64{0.5, 1, 1.5}, 2, 0.02, 30, 1),
		},
	}
}

func TestMarkdownRatios(t *testing.T) {
	var b bytes.Buffer
	sampleResults().writeMarkdown(&b)
	md := b.String()
	for _, want := range []string{
		"| metric | unit | raw | rawapi | kubelet | crivk | crivk/kubelet | crivk/raw | crivk/rawapi | rawapi/raw | kubelet/raw |",
		// W1 p50: raw 0.3, rawapi 0.315, kubelet 2, crivk 1.
		"| create->Running p50 | s | 0.300 | 0.315 | 2.00 | 1.00 | 0.50x | 3.33x | 3.17x | 1.05x | 6.67x |",
		// W2 lag 1, 1.05, 8, 2.
		"| 30 pods: batch lag | s | 1.00 | 1.05 | 8.00 | 2.00 | 0.25x | 2.00x | 1.90x | 1.05x | 8.00x |",
		// W4 p50 from containerd's exit: as W1; from T+F: 0.5 s more;
		// rawapi: not measured.
		"| exit->seen, from containerd's exit time p50 | s | 0.300 | - | 2.00 | 1.00 | 0.50x | 3.33x | - | - | 6.67x |",
		"| exit->seen, from the scheduled exit T+F p50 | s | 0.800 | - | 2.50 | 1.50 | 0.60x | 1.88x | - | - | 3.12x |",
		"| busybox's exit lag (containerd's exit - T+F) p50 | s | 0.500 | - | 0.500 | 0.500 | 1.00x | 1.00x | - | - | 1.00x |",
		// Agent CPU 5% vs 2%; raw has no agent.
		"| 0 pods: agent CPU | % of a core | - | - | 5.00 | 2.00 | 0.40x | - | - | - | - |",
		"| 30 pods: agent RSS (mean) | MiB | - | - | 85.0 | 35.0 | 0.41x | - | - | - | - |",
		"| 0 pods: agent API requests | req/s | - | - | 4.00 | 1.00 | 0.25x | - | - | - | - |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "NaN") {
		t.Errorf("markdown shows NaN:\n%s", md)
	}
}

func TestGoals(t *testing.T) {
	var b bytes.Buffer
	sampleResults().writeGoals(&b)
	md := b.String()
	for _, want := range []string{
		// W1 p99: crivk 1.49, raw 0.398, rawapi 1.05 times raw.
		"| W1 p99 | raw | <= 1.10x | 3.74x | **missed** | rawapi/raw 1.05x |",
		"| W2 batch lag, 30 pods | raw | <= 1.10x | 2.00x | **missed** | rawapi/raw 1.05x |",
		"| W3 batch lag, 30 pods | raw | <= 1.10x | 2.00x | **missed** | rawapi/raw 1.05x |",
		"| W3 objects gone before their containers stopped, 30 pods | - | <= 0 | 0 | met | - |",
		"| W2 node not Ready (samples), 30 pods | - | <= 0 | 0 | met | - |",
		"| W2 oldest node lease (s), 30 pods | - | <= 40 | 0 | met | - |",
		// The density goal holds for the kubelet's node too.
		"| W2 node not Ready (samples), 30 pods, the kubelet's node | - | <= 0 | 0 | met | - |",
		"| W2 oldest node lease (s), 30 pods, the kubelet's node | - | <= 40 | 0 | met | - |",
		// On the latency from containerd's exit: crivk 1.49, kubelet 2.98.
		"| W4 p99 (from containerd's exit) | kubelet | <= 0.20x | 0.50x | **missed** | raw/kubelet 0.13x |",
		"| W5 agent CPU, 30 pods | kubelet | <= 0.50x | 0.40x | met | - |",
		"| W5 agent RSS, 30 pods | kubelet | <= 0.50x | 0.41x | met | - |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("goals lack %q:\n%s", want, md)
		}
	}
	// The retired goals below raw are gone.
	if strings.Contains(md, "| W1 p99 | kubelet |") || strings.Contains(md, "| W2 batch lag, 30 pods | kubelet |") {
		t.Errorf("retired goals against the kubelet still listed:\n%s", md)
	}
	// An early deletion misses its goal, as does a late lease.
	r0 := sampleResults()
	r0.Lanes[3].W3[0].EarlyDeletions = 2
	r0.Lanes[3].W2[0].MaxLeaseAge = 41
	b.Reset()
	r0.writeGoals(&b)
	for _, want := range []string{"| W3 objects gone before their containers stopped, 30 pods | - | <= 0 | 2 | **missed** | - |",
		"| W2 oldest node lease (s), 30 pods | - | <= 40 | 41 | **missed** | - |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("goals lack %q:\n%s", want, b.String())
		}
	}
	// A crivk lane that failed part way keeps its figures for the goals.
	r := sampleResults()
	r.Lanes[3].Error = "W2/W3 batch of 250: context deadline exceeded"
	r.Lanes[3].W3 = nil
	b.Reset()
	r.writeGoals(&b)
	for _, want := range []string{"| W1 p99 | raw | <= 1.10x | 3.74x | **missed** |", "| W3 batch lag, 30 pods | raw | <= 1.10x | - | no figure |",
		"| W3 objects gone before their containers stopped, 30 pods | - | <= 0 | - | no figure | - |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("goals of a lane failed part way lack %q:\n%s", want, b.String())
		}
	}
	// A density point has the node's health for goals, not ratios.
	r = sampleResults()
	r.Plan.DensityFrom = 30
	b.Reset()
	r.writeGoals(&b)
	if strings.Contains(b.String(), "batch lag, 30 pods") || !strings.Contains(b.String(), "| W2 node not Ready (samples), 30 pods | - | <= 0 | 0 | met | - |") {
		t.Errorf("goals of a density point:\n%s", b.String())
	}
	r = sampleResults()
	r.Lanes = r.Lanes[:3] // no crivk lane
	b.Reset()
	r.writeGoals(&b)
	// The kubelet's own density rows aside.
	var crivkRows []string
	for _, line := range strings.Split(b.String(), "\n") {
		if !strings.Contains(line, "the kubelet's node") {
			crivkRows = append(crivkRows, line)
		}
	}
	if md := strings.Join(crivkRows, "\n"); strings.Contains(md, "met") || !strings.Contains(md, "no figure") {
		t.Errorf("without a crivk lane no goal can be met or missed:\n%s", md)
	}
}

// A goal against the kubelet that asks for less than the raw lane is
// flagged out of reach.
func TestGoalOutOfReach(t *testing.T) {
	r := sampleResults()
	// W4 from containerd's exit: raw p99 0.9 s against the kubelet's 2.98:
	// best reachable 0.30x, above the goal's 0.20x.
	r.Lanes[0].W4Exit = Summarize([]float64{0.9, 0.9, 0.9})
	var b bytes.Buffer
	r.writeGoals(&b)
	want := "| W4 p99 (from containerd's exit) | kubelet | <= 0.20x | 0.50x | **missed** | raw/kubelet 0.30x (goal below raw: out of reach) |"
	if !strings.Contains(b.String(), want) {
		t.Errorf("goals lack %q:\n%s", want, b.String())
	}
	if strings.Count(b.String(), "out of reach") != 1 {
		t.Errorf("only the W4 goal is out of reach:\n%s", b.String())
	}
	// A goal against raw that asks for less than the rawapi lane (the API
	// path's floor) is out of reach for any agent going through the API.
	r.Lanes[1].W2[0].Lag = 1.5
	b.Reset()
	r.writeGoals(&b)
	want = "| W2 batch lag, 30 pods | raw | <= 1.10x | 2.00x | **missed** | rawapi/raw 1.50x (goal below rawapi: out of reach) |"
	if !strings.Contains(b.String(), want) {
		t.Errorf("goals lack %q:\n%s", want, b.String())
	}
}

func TestMarkdownFailedLane(t *testing.T) {
	r := sampleResults()
	r.Lanes[2] = LaneResult{Lane: "kubelet", Error: "W1 pod 0: timed out"}
	var b bytes.Buffer
	r.writeMarkdown(&b)
	md := b.String()
	if !strings.Contains(md, "| create->Running p50 | s | 0.300 | 0.315 | - | 1.00 | - | 3.33x | 3.17x | 1.05x | - |") {
		t.Errorf("a failed lane must show '-' and no ratio:\n%s", md)
	}
	if !strings.Contains(md, "- lane kubelet: W1 pod 0: timed out") {
		t.Errorf("the lane's failure is not reported:\n%s", md)
	}
}

// results.json is read back (unknown figures included) and the report,
// plots and docs are rebuilt from it.
func TestWriteReportAndReplot(t *testing.T) {
	dir := t.TempDir()
	r := sampleResults()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	path := filepath.Join(dir, "results.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	docs := filepath.Join(dir, "docs", "benchmarks.md")
	if err := os.MkdirAll(filepath.Dir(docs), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := run(options{replot: path, docs: docs}); err != nil {
		t.Fatalf("replot: %v", err)
	}
	for _, png := range []string{"w1-cdf.png", "w2-cdf.png", "w3-cdf.png", "w5-cpu.png", "w5-rss.png"} {
		for _, p := range []string{filepath.Join(dir, png), filepath.Join(dir, "docs", "benchmarks", png)} {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Errorf("plot missing: %v", err)
				continue
			}
			if !bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) {
				t.Errorf("%s is not a PNG", p)
			}
		}
	}
	doc, err := os.ReadFile(docs)
	if err != nil {
		t.Fatal(err)
	}
	var copied Results
	if b, err := os.ReadFile(filepath.Join(dir, "docs", "benchmarks", "results.json")); err != nil {
		t.Errorf("results.json beside the plots: %v", err)
	} else if err := json.Unmarshal(b, &copied); err != nil || len(copied.Lanes) != len(r.Lanes) || copied.Lanes[3].W2[0].Lag != r.Lanes[3].W2[0].Lag {
		t.Errorf("results.json beside the plots is not the run's: %v", err)
	}
	for _, want := range []string{"# Benchmarks", "Command: `BENCH_QUICK=1 make bench`", "test CPU, 2 CPUs",
		"![w1-cdf](benchmarks/w1-cdf.png)", "| 30 pods: batch lag | s | 1.00 | 1.05 | 8.00 | 2.00 | 0.25x | 2.00x |", "## How it is measured"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("docs lack %q", want)
		}
	}
	// A second run keeps the hand-written analysis and replaces the rest.
	analysis := "\n## Analysis\n\nW3 is bound by containerd here.\n"
	if err := os.WriteFile(docs, append(doc, analysis...), 0o644); err != nil {
		t.Fatal(err)
	}
	r.Lanes[3].W2[0].Lag = 4
	b, _ = json.Marshal(r)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(options{replot: path, docs: docs}); err != nil {
		t.Fatalf("second replot: %v", err)
	}
	doc2, _ := os.ReadFile(docs)
	if !strings.HasSuffix(string(doc2), keptMarker+"\n"+analysis) {
		t.Errorf("the hand-written analysis was not kept at the end:\n%s", doc2)
	}
	if !strings.Contains(string(doc2), "| 30 pods: batch lag | s | 1.00 | 1.05 | 8.00 | 4.00 |") || strings.Count(string(doc2), "# Benchmarks") != 1 {
		t.Errorf("the generated part was not replaced:\n%s", doc2)
	}
	rep, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil || !strings.Contains(string(rep), "![w1-cdf](w1-cdf.png)") {
		t.Errorf("report.md: %v, missing the plot links", err)
	}
}

// TestTracingOverhead: with a crivk-traced lane the report compares it
// with the crivk lane; without it there is no such section.
func TestTracingOverhead(t *testing.T) {
	r := sampleResults()
	var b bytes.Buffer
	r.writeTracing(&b)
	if b.Len() != 0 {
		t.Errorf("tracing section without a traced lane:\n%s", b.String())
	}
	traced := r.Lanes[3]
	traced.Lane = tracedLane
	traced.W1 = Summarize([]float64{2.98, 2.98, 2.98})
	r.Lanes = append(r.Lanes, traced)
	r.writeTracing(&b)
	for _, want := range []string{
		"### Tracing overhead (crivk with --tracing against crivk, same run)",
		"| W1 create->Running p99 | s | 1.49 | 2.98 | 2.00x |",
		"| W2 batch lag, 30 pods | s |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("tracing section lacks %q:\n%s", want, b.String())
		}
	}
}

// A ratio is judged at the two decimals the tables show: 1.00002x meets a
// 1.00x goal, 1.006x (shown 1.01x) does not.
func TestGoalMetAtShownPrecision(t *testing.T) {
	for _, tc := range []struct {
		ratio float64
		want  bool
	}{{1.00002, true}, {1.004, true}, {1.006, false}, {0.5, true}, {1.2, false}} {
		if met, known := (Goal{Ratio: tc.ratio, Max: 1.00, Bound: math.NaN()}).Met(); !known || met != tc.want {
			t.Errorf("ratio %v against 1.00x: met %v, want %v", tc.ratio, met, tc.want)
		}
	}
	if _, known := (Goal{Ratio: math.NaN(), Max: 1}).Met(); known {
		t.Error("a missing figure was judged")
	}
}
