package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// laneOrder is the column order of every table.
var laneOrder = []string{"raw", "rawapi", "kubelet", "crivk"}

// row is one line of a table: a metric and its value per lane.
type row struct {
	metric string
	unit   string
	vals   map[string]float64
	// lowerIsBetter is true for every metric here (times, CPU, memory,
	// requests) but pods/s.
	higherIsBetter bool
}

func (r *Results) lane(name string) *LaneResult {
	for i := range r.Lanes {
		if r.Lanes[i].Lane == name {
			return &r.Lanes[i]
		}
	}
	return nil
}

// get returns f(lane) for each lane that ran (NaN when it failed or lacks the figure).
func (r *Results) get(f func(*LaneResult) float64) map[string]float64 {
	out := map[string]float64{}
	for _, name := range laneOrder {
		l := r.lane(name)
		if l == nil {
			out[name] = math.NaN()
			continue
		}
		out[name] = f(l)
	}
	return out
}

func summaryOr(s Summary, f func(Summary) float64) float64 {
	if s.N == 0 {
		return math.NaN()
	}
	return f(s)
}

func batchBySize(bs []Batch, n int) *Batch {
	for i := range bs {
		if bs[i].Size == n {
			return &bs[i]
		}
	}
	return nil
}

func steadyByPods(ss []Steady, n int) *Steady {
	for i := range ss {
		if ss[i].Pods == n {
			return &ss[i]
		}
	}
	return nil
}

func latencyRows(name string, get func(*LaneResult) Summary, r *Results) []row {
	var out []row
	for _, p := range []struct {
		label string
		f     func(Summary) float64
	}{{"p50", func(s Summary) float64 { return s.P50 }}, {"p90", func(s Summary) float64 { return s.P90 }}, {"p99", func(s Summary) float64 { return s.P99 }}} {
		out = append(out, row{metric: name + " " + p.label, unit: "s", vals: r.get(func(l *LaneResult) float64 { return summaryOr(get(l), p.f) })})
	}
	return out
}

// tables builds the report's tables, one per workload.
func (r *Results) tables() []struct {
	title string
	rows  []row
} {
	type table = struct {
		title string
		rows  []row
	}
	var ts []table
	ts = append(ts, table{"W1: one pod, create -> Running and ready (seen via watch)", latencyRows("create->Running", func(l *LaneResult) Summary { return l.W1 }, r)})

	var w2, w3 []row
	for _, n := range r.Plan.Batches {
		w2 = append(w2, latencyRows(fmt.Sprintf("%d pods: per-pod create->Running", n), func(l *LaneResult) Summary {
			if b := batchBySize(l.W2, n); b != nil {
				return b.PerPod
			}
			return Summary{}
		}, r)...)
		bget := func(bs func(*LaneResult) []Batch, f func(*Batch) float64) map[string]float64 {
			return r.get(func(l *LaneResult) float64 {
				if b := batchBySize(bs(l), n); b != nil {
					return f(b)
				}
				return math.NaN()
			})
		}
		w2 = append(w2,
			row{metric: fmt.Sprintf("%d pods: batch lag", n), unit: "s", vals: bget(func(l *LaneResult) []Batch { return l.W2 }, func(b *Batch) float64 { return b.Lag })},
			row{metric: fmt.Sprintf("%d pods: throughput", n), unit: "pods/s", higherIsBetter: true, vals: bget(func(l *LaneResult) []Batch { return l.W2 }, func(b *Batch) float64 { return b.PodsPerSecond })},
			row{metric: fmt.Sprintf("%d pods: node not Ready (samples, 1/s)", n), unit: "samples", vals: bget(func(l *LaneResult) []Batch { return l.W2 }, func(b *Batch) float64 { return float64(b.NodeNotReady) })},
			row{metric: fmt.Sprintf("%d pods: oldest node lease", n), unit: "s", vals: bget(func(l *LaneResult) []Batch { return l.W2 }, func(b *Batch) float64 { return float64(b.MaxLeaseAge) })})
		w3 = append(w3, latencyRows(fmt.Sprintf("%d pods: per-pod delete->gone", n), func(l *LaneResult) Summary {
			if b := batchBySize(l.W3, n); b != nil {
				return b.PerPod
			}
			return Summary{}
		}, r)...)
		w3 = append(w3, row{metric: fmt.Sprintf("%d pods: batch lag", n), unit: "s", vals: bget(func(l *LaneResult) []Batch { return l.W3 }, func(b *Batch) float64 { return b.Lag })},
			row{metric: fmt.Sprintf("%d pods: objects gone before their containers stopped", n), unit: "pods", vals: bget(func(l *LaneResult) []Batch { return l.W3 }, func(b *Batch) float64 { return float64(b.EarlyDeletions) })})
	}
	ts = append(ts, table{"W2: batches created at once", w2}, table{"W3: deletion of the batches (container exits on TERM, grace 30 s)", w3})
	w4 := latencyRows("exit->seen, from containerd's exit time", func(l *LaneResult) Summary { return l.W4Exit }, r)
	w4 = append(w4, latencyRows("exit->seen, from the scheduled exit T+F", func(l *LaneResult) Summary { return l.W4 }, r)...)
	w4 = append(w4, row{metric: "busybox's exit lag (containerd's exit - T+F) p50", unit: "s",
		vals: r.get(func(l *LaneResult) float64 { return summaryOr(l.W4ExitLag, func(s Summary) float64 { return s.P50 }) })})
	ts = append(ts, table{"W4: container exit -> pod status change seen via watch", w4})

	var w5 []row
	for _, n := range r.Plan.SteadyPods {
		sget := func(f func(*Steady) Num) map[string]float64 {
			return r.get(func(l *LaneResult) float64 {
				if s := steadyByPods(l.W5, n); s != nil {
					return float64(f(s))
				}
				return math.NaN()
			})
		}
		w5 = append(w5,
			row{metric: fmt.Sprintf("%d pods: agent CPU", n), unit: "% of a core", vals: scale(sget(func(s *Steady) Num { return s.AgentCPU }), 100)},
			row{metric: fmt.Sprintf("%d pods: agent RSS (mean)", n), unit: "MiB", vals: sget(func(s *Steady) Num { return s.AgentRSSMiB })},
			row{metric: fmt.Sprintf("%d pods: agent RSS, file-backed part", n), unit: "MiB", vals: sget(func(s *Steady) Num { return s.AgentRSSFileMiB })},
			row{metric: fmt.Sprintf("%d pods: containerd CPU", n), unit: "% of a core", vals: scale(sget(func(s *Steady) Num { return s.ContainerdCPU }), 100)},
			row{metric: fmt.Sprintf("%d pods: agent API requests", n), unit: "req/s", vals: sget(func(s *Steady) Num { return s.APIRequests })})
	}
	ts = append(ts, table{fmt.Sprintf("W5: steady state, %s per level", r.Plan.SteadyDuration), w5})
	if bd := r.breakdownRows(); len(bd) > 0 {
		ts = append(ts, table{"Where W1 and W2 time goes: the agents' own /metrics (kubelet_runtime_operations_duration_seconds, kubelet_pod_worker_duration_seconds, rest_client_requests_total), per pod", bd})
	}
	return ts
}

func scale(m map[string]float64, k float64) map[string]float64 {
	for n, v := range m {
		m[n] = v * k
	}
	return m
}

func fmtNum(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "-"
	case v == 0:
		return "0"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

func fmtRatio(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.2fx", v)
}

// writeMarkdown writes the tables: one per workload, a column per lane and
// the ratios crivk/kubelet, crivk/raw, crivk/rawapi, rawapi/raw and
// kubelet/raw. rawapi/raw is what the API path alone costs (the floor of
// any agent that goes through the API server, over raw CRI calls);
// crivk/rawapi is what crivk adds above that floor. kubelet/raw shows the
// physical bound of a goal set against the kubelet: crivk can be at best
// raw, i.e. at best (1 / kubelet/raw) times the kubelet, so a goal of 0.5x
// the kubelet is out of reach where kubelet/raw is below 2.
func (r *Results) writeMarkdown(w io.Writer) {
	for _, t := range r.tables() {
		fmt.Fprintf(w, "### %s\n\n", t.title)
		fmt.Fprintln(w, "| metric | unit | raw | rawapi | kubelet | crivk | crivk/kubelet | crivk/raw | crivk/rawapi | rawapi/raw | kubelet/raw |")
		fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
		for _, rw := range t.rows {
			v := rw.vals
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", rw.metric, rw.unit,
				fmtNum(v["raw"]), fmtNum(v["rawapi"]), fmtNum(v["kubelet"]), fmtNum(v["crivk"]),
				fmtRatio(Ratio(v["crivk"], v["kubelet"])), fmtRatio(Ratio(v["crivk"], v["raw"])),
				fmtRatio(Ratio(v["crivk"], v["rawapi"])), fmtRatio(Ratio(v["rawapi"], v["raw"])),
				fmtRatio(Ratio(v["kubelet"], v["raw"])))
		}
		fmt.Fprintln(w)
	}
	r.writeRawTrials(w)
	r.writeCPU(w)
	var failed []string
	for _, l := range r.Lanes {
		if l.Error != "" {
			failed = append(failed, fmt.Sprintf("- lane %s: %s", l.Lane, l.Error))
		}
		if l.W4Dropped > 0 {
			failed = append(failed, fmt.Sprintf("- lane %s: %d W4 samples dropped (pod not running before its exit second)", l.Lane, l.W4Dropped))
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(w, "Incidents:\n\n%s\n\n", strings.Join(failed, "\n"))
	}
}

// keptMarker starts the hand-written part of docs/benchmarks.md, which a
// run keeps as it is.
const keptMarker = "<!-- Hand-written analysis below: kept as is when the benchmark rewrites this file. -->"

// writeReport writes report.md and the plots into dir and, if docs is set,
// rewrites that markdown file with the same content (plots copied next to
// it under benchmarks/).
func writeReport(r *Results, dir, docs string) error {
	if r.focused() {
		var b strings.Builder
		r.writeFocused(&b)
		return os.WriteFile(filepath.Join(dir, "report.md"), []byte(b.String()), 0o644)
	}
	plots, err := writePlots(r, dir)
	if err != nil {
		return err
	}
	var b strings.Builder
	r.writeHeader(&b)
	r.writeGoals(&b)
	r.writeMarkdown(&b)
	r.writeTracing(&b)
	for _, p := range plots {
		fmt.Fprintf(&b, "![%s](%s)\n\n", strings.TrimSuffix(p, ".png"), p)
	}
	imgDir := ""
	if docs != "" {
		imgDir = filepath.Join(filepath.Dir(docs), "benchmarks")
	}
	// A replot of the docs' own results.json leaves no report.md among them.
	if !sameDir(dir, imgDir) {
		if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	if docs == "" {
		return nil
	}
	if err := os.MkdirAll(imgDir, 0o755); err != nil {
		return err
	}
	for _, p := range plots {
		data, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(imgDir, p), data, 0o644); err != nil {
			return err
		}
	}
	// The run's figures go beside the plots, so the page can be rebuilt
	// (and read further) from what it was made of.
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(imgDir, "results.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	var d strings.Builder
	d.WriteString(docsIntro)
	r.writeHeader(&d)
	r.writeGoals(&d)
	r.writeMarkdown(&d)
	r.writeTracing(&d)
	for _, p := range plots {
		fmt.Fprintf(&d, "![%s](benchmarks/%s)\n\n", strings.TrimSuffix(p, ".png"), p)
	}
	d.WriteString(docsMethod)
	// The analysis below the marker is written by people; keep it.
	old, err := os.ReadFile(docs)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	if i := strings.Index(string(old), keptMarker); i >= 0 {
		d.WriteString("\n")
		d.WriteString(string(old[i:]))
	} else {
		fmt.Fprintf(&d, "\n%s\n", keptMarker)
	}
	return os.WriteFile(docs, []byte(d.String()), 0o644)
}

func sameDir(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	a, errA := filepath.Abs(a)
	b, errB := filepath.Abs(b)
	return errA == nil && errB == nil && a == b
}

func (r *Results) writeHeader(w io.Writer) {
	mode := "full"
	if r.Quick {
		mode = "quick (BENCH_QUICK=1)"
	}
	fmt.Fprintf(w, "Run of %s, %s mode, %.0f s. Machine: %s, %d CPUs, %.0f GiB, %s, kernel %s. "+
		"Agents (and the rawapi lane's client): kube-api-qps %g, kube-api-burst %d, maxPods %d.\n\n",
		r.Started.Format("2006-01-02 15:04 MST"), mode, r.Seconds, r.Machine.CPUModel, r.Machine.CPUs, r.Machine.MemGiB,
		r.Machine.OS, r.Machine.Kernel, r.Settings.QPS, r.Settings.Burst, r.Settings.MaxPods)
	if r.Command != "" {
		fmt.Fprintf(w, "Command: `%s`\n\n", r.Command)
	}
	raw := ""
	if r.Plan.RawSteadyDuration > 0 {
		raw = fmt.Sprintf(" (raw lane: %s)", r.Plan.RawSteadyDuration)
	}
	fmt.Fprintf(w, "Plan: W1 %d pods; W2/W3 batches %v; W4 %d exits; W5 %v pods for %s each%s.\n\n",
		r.Plan.W1Count, r.Plan.Batches, r.Plan.W4Count, r.Plan.SteadyPods, r.Plan.SteadyDuration, raw)
	if r.lane("raw") != nil && len(r.Plan.RawParallelism) > 0 {
		var names []string
		for _, p := range r.Plan.RawParallelism {
			names = append(names, parallelismName(p))
		}
		density := ""
		if r.Plan.DensityFrom > 0 && len(r.Plan.Batches) > 0 && r.Plan.density(r.Plan.Batches[len(r.Plan.Batches)-1]) {
			density = fmt.Sprintf("; batches of %d pods or more are density points, run once with no bound, whose goals are the node's health", r.Plan.DensityFrom)
		}
		fmt.Fprintf(w, "The raw lane ran each W2/W3 batch once per setting of its sandbox calls in flight (%s; a bound at or above the batch's size is no bound) "+
			"and its figures are the best run per batch size and phase: the floor of the goals against raw (table \"Raw lane: batch lag at each parallelism\")%s.\n\n",
			strings.Join(names, ", "), density)
	}
	if r.lane("rawapi") != nil {
		fmt.Fprintln(w, "rawapi is raw CRI calls driven through the API server by a minimal agent inside the harness: "+
			"the floor of any agent that goes through the API. It runs W1, W2 and W3 only (W4, W5: \"-\"; it has no exit "+
			"handling, and its agent is the harness itself).")
		fmt.Fprintln(w)
	}
}

// breakdownRows are the breakdown table's rows: for W1 (create and delete)
// and each W2 batch (creation), per pod, the CRI calls and their seconds
// (in all and for the operations that cost most), the pod syncs' seconds
// and the API requests.
func (r *Results) breakdownRows() []row {
	var all []*Breakdown
	for i := range r.Lanes {
		all = append(all, r.Lanes[i].W1Breakdown)
		all = append(all, r.Lanes[i].W2Breakdown...)
	}
	if len(all) == 0 {
		return nil
	}
	ops := topOps(all, 4)
	var rows []row
	add := func(what string, pick func(l *LaneResult) *Breakdown) {
		get := func(f func(b *Breakdown) float64) map[string]float64 {
			return r.get(func(l *LaneResult) float64 {
				if b := pick(l); b != nil {
					return f(b)
				}
				return math.NaN()
			})
		}
		rows = append(rows,
			row{metric: what + ": CRI calls", unit: "calls/pod", vals: get(func(b *Breakdown) float64 {
				t := 0.0
				for _, v := range b.CRICalls {
					t += v
				}
				return t
			})},
			row{metric: what + ": time in CRI calls", unit: "s/pod", vals: get(func(b *Breakdown) float64 { return b.TotalCRISeconds() })})
		for _, op := range ops {
			rows = append(rows, row{metric: what + ": " + op, unit: "s/pod", vals: get(func(b *Breakdown) float64 { return b.CRISeconds[op] })})
		}
		rows = append(rows,
			row{metric: what + ": time in pod syncs", unit: "s/pod", vals: get(func(b *Breakdown) float64 { return b.SyncSeconds })},
			row{metric: what + ": API requests", unit: "req/pod", vals: get(func(b *Breakdown) float64 { return b.APIRequests })})
	}
	add("W1 (create and delete)", func(l *LaneResult) *Breakdown { return l.W1Breakdown })
	for _, n := range r.Plan.Batches {
		add(fmt.Sprintf("W2 %d pods (create)", n), func(l *LaneResult) *Breakdown {
			for _, b := range l.W2Breakdown {
				if b != nil && b.Pods == n {
					return b
				}
			}
			return nil
		})
	}
	return rows
}

// writeRawTrials writes, if the raw lane tried several parallelism
// settings, each batch's lag at every setting, the best (the raw figure) in
// bold.
func (r *Results) writeRawTrials(w io.Writer) {
	raw := r.lane("raw")
	if raw == nil {
		return
	}
	var settings []int
	seen := map[int]bool{}
	for _, bs := range [][]Batch{raw.W2, raw.W3} {
		for _, b := range bs {
			for _, t := range b.Trials {
				if !seen[t.Parallelism] {
					seen[t.Parallelism] = true
					settings = append(settings, t.Parallelism)
				}
			}
		}
	}
	if len(settings) == 0 {
		return
	}
	fmt.Fprintln(w, "### Raw lane: batch lag at each parallelism (sandbox calls in flight; the best, in bold, is the raw figure)")
	fmt.Fprintln(w)
	head, align := "| batch | phase |", "| --- | --- |"
	for _, s := range settings {
		head += " " + parallelismName(s) + " |"
		align += " ---: |"
	}
	fmt.Fprintln(w, head+" best at |")
	fmt.Fprintln(w, align+" --- |")
	for _, n := range r.Plan.Batches {
		for _, ph := range []struct {
			name string
			bs   []Batch
		}{{"W2 create", raw.W2}, {"W3 delete", raw.W3}} {
			b := batchBySize(ph.bs, n)
			if b == nil || len(b.Trials) == 0 {
				continue
			}
			line := fmt.Sprintf("| %d pods | %s |", n, ph.name)
			for _, s := range settings {
				cell := "-"
				for _, t := range b.Trials {
					if t.Parallelism != s {
						continue
					}
					cell = fmtNum(float64(t.Lag))
					if t.Error != "" {
						cell = "failed"
					} else if b.Parallelism != nil && *b.Parallelism == s {
						cell = "**" + cell + "**"
					}
				}
				line += " " + cell + " |"
			}
			best := "-"
			if b.Parallelism != nil {
				best = parallelismName(*b.Parallelism)
			}
			fmt.Fprintln(w, line+" "+best+" |")
		}
	}
	fmt.Fprintln(w)
}
