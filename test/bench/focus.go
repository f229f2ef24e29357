package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// A focused run measures one question cheaply: only some workloads
// (-only w2: the warm-up pod and the W2/W3 batches), chosen batch sizes,
// every lane repeated (-repeat) and the crivk lane under several argument
// sets (-crivk-variants). The runs are interleaved, round after round
// (raw, crivk A, crivk B, crivk C, raw, crivk A, ...), so that a drift of
// the machine or of containerd spreads over every setting instead of
// favouring the ones that ran first. Its report is one table per setting
// (focusedReport); it never rewrites docs/benchmarks.md.

// steps are the workloads -only can select; w3 (the deletion of the
// batches) is part of w2: the pods must go anyway.
var steps = []string{"w1", "w2", "w4", "w5"}

// parseOnly parses -only: comma-separated steps ("": every step).
func parseOnly(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	seen := map[string]bool{}
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		if f == "w3" {
			f = "w2"
		}
		known := false
		for _, st := range steps {
			known = known || st == f
		}
		if !known {
			return nil, fmt.Errorf("-only %q: %q is not one of %s (w3 runs with w2)", s, f, strings.Join(steps, ", "))
		}
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out, nil
}

// parseBatchSizes parses -batch-sizes: comma-separated pod counts, each
// at least 1 ("": the plan's).
func parseBatchSizes(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-batch-sizes %q: %q is not a pod count", s, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseVariants parses -crivk-variants: argument sets separated by ';',
// each a space-separated list of crivk arguments ("": one run with no
// extra arguments). Empty or repeated sets are refused: a stray ';' would
// otherwise add a run nobody asked for.
func parseVariants(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	seen := map[string]bool{}
	var out []string
	for _, f := range strings.Split(s, ";") {
		v := strings.Join(strings.Fields(f), " ")
		if v == "" {
			return nil, fmt.Errorf("-crivk-variants %q: an empty argument set (say --max-parallel-sandboxes=0 for the default)", s)
		}
		if seen[v] {
			return nil, fmt.Errorf("-crivk-variants %q: %q twice", s, v)
		}
		seen[v] = true
		out = append(out, v)
	}
	return out, nil
}

// withFocus returns p with its steps limited to only (nil: kept), its
// batches replaced by sizes (nil: kept) and its repetitions set.
func withFocus(p Plan, only []string, sizes []int, repeat int) (Plan, error) {
	if repeat < 1 {
		return p, fmt.Errorf("-repeat %d: at least 1", repeat)
	}
	if len(only) > 0 {
		p.Only = only
	}
	if len(sizes) > 0 {
		p.Batches = sizes
	}
	if repeat > 1 {
		p.Repeat = repeat
	}
	return p, nil
}

// runs reports whether the plan runs step (w1, w2, w4, w5).
func (p Plan) runs(step string) bool {
	if len(p.Only) == 0 {
		return true
	}
	for _, s := range p.Only {
		if s == step {
			return true
		}
	}
	return false
}

// laneRun is one lane run of a (focused) plan.
type laneRun struct {
	lane    string
	variant string // crivk arguments of this run ("": none)
	round   int    // 1-based
}

// isCrivk reports whether lane runs crivk (and so takes -crivk-variants).
func isCrivk(lane string) bool { return lane == "crivk" || lane == tracedLane }

// schedule is the order of the runs: round after round, in each round
// every lane in order and, for a crivk lane, every variant in order.
func schedule(lanes, variants []string, repeat int) []laneRun {
	var out []laneRun
	for r := 1; r <= repeat; r++ {
		for _, l := range lanes {
			if !isCrivk(l) || len(variants) == 0 {
				out = append(out, laneRun{lane: l, round: r})
				continue
			}
			for _, v := range variants {
				out = append(out, laneRun{lane: l, variant: v, round: r})
			}
		}
	}
	return out
}

// setting names a lane and its variant in the focused report.
func (l *LaneResult) setting() string {
	if l.Variant == "" {
		return l.Lane
	}
	return l.Lane + " " + l.Variant
}

// focused reports whether r is a focused run, reported per setting.
func (r *Results) focused() bool {
	if len(r.Plan.Only) > 0 || r.Plan.Repeat > 1 {
		return true
	}
	for _, l := range r.Lanes {
		if l.Variant != "" {
			return true
		}
	}
	return false
}

// settings are r's settings in the order they first ran.
func (r *Results) settings() []string {
	var out []string
	seen := map[string]bool{}
	for _, l := range r.Lanes {
		if s := l.setting(); !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// median is the median of vs without NaNs (NaN if none).
func median(vs []float64) float64 {
	var s []float64
	for _, v := range vs {
		if !math.IsNaN(v) {
			s = append(s, v)
		}
	}
	sort.Float64s(s)
	return Percentile(s, 50)
}

// writeFocused writes the focused report: per batch size, a summary with
// one row per setting (the median and every round of the create -> all
// Running and delete -> all gone lags, and in how many rounds the setting
// beat the first crivk setting of the same round), then one table per
// setting with a row per round.
func (r *Results) writeFocused(w io.Writer) {
	fmt.Fprintf(w, "Run of %s, focused mode, %.0f s. Machine: %s, %d CPUs, %.0f GiB, %s, kernel %s. "+
		"Agents: kube-api-qps %g, kube-api-burst %d, maxPods %d.\n\n",
		r.Started.Format("2006-01-02 15:04 MST"), r.Seconds, r.Machine.CPUModel, r.Machine.CPUs, r.Machine.MemGiB,
		r.Machine.OS, r.Machine.Kernel, r.Settings.QPS, r.Settings.Burst, r.Settings.MaxPods)
	if r.Command != "" {
		fmt.Fprintf(w, "Command: `%s`\n\n", r.Command)
	}
	only := "all"
	if len(r.Plan.Only) > 0 {
		only = strings.Join(r.Plan.Only, ",")
	}
	rounds := max(r.Plan.Repeat, 1)
	fmt.Fprintf(w, "Plan: steps %s; W1 %d pods; W2/W3 batches %v; %d round(s), settings interleaved in each round.\n\n", only, r.Plan.W1Count, r.Plan.Batches, rounds)
	settings := r.settings()
	base := ""
	for _, s := range settings {
		if strings.HasPrefix(s, "crivk") {
			base = s
			break
		}
	}
	lag := func(bs []Batch, n int) float64 {
		if b := batchBySize(bs, n); b != nil {
			return b.Lag
		}
		return math.NaN()
	}
	// byRound[setting][round-1] is that run's result.
	byRound := map[string][]*LaneResult{}
	for i := range r.Lanes {
		l := &r.Lanes[i]
		s := l.setting()
		if byRound[s] == nil {
			byRound[s] = make([]*LaneResult, rounds)
		}
		if l.Round >= 1 && l.Round <= rounds {
			byRound[s][l.Round-1] = l
		}
	}
	each := func(s string, f func(*LaneResult) float64) []float64 {
		out := make([]float64, rounds)
		for i, l := range byRound[s] {
			out[i] = math.NaN()
			if l != nil {
				out[i] = f(l)
			}
		}
		return out
	}
	list := func(vs []float64) string {
		var out []string
		for _, v := range vs {
			out = append(out, fmtNum(v))
		}
		return strings.Join(out, ", ")
	}
	if r.Plan.runs("w1") {
		p := func(f func(Summary) float64) func(*LaneResult) float64 {
			return func(l *LaneResult) float64 { return summaryOr(l.W1, f) }
		}
		fmt.Fprintf(w, "### W1: %d single pods, create->Running, per setting\n\n", r.Plan.W1Count)
		fmt.Fprintln(w, "| setting | p50, median | each round | p99, median | each round |")
		fmt.Fprintln(w, "| --- | ---: | --- | ---: | --- |")
		for _, s := range settings {
			p50, p99 := each(s, p(func(s Summary) float64 { return s.P50 })), each(s, p(func(s Summary) float64 { return s.P99 }))
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", s, fmtNum(median(p50)), list(p50), fmtNum(median(p99)), list(p99))
		}
		fmt.Fprintln(w)
	}
	batches := r.Plan.Batches
	if !r.Plan.runs("w2") {
		batches = nil
	}
	for _, n := range batches {
		up := func(l *LaneResult) float64 { return lag(l.W2, n) }
		down := func(l *LaneResult) float64 { return lag(l.W3, n) }
		fmt.Fprintf(w, "### Batch of %d pods, per setting\n\n", n)
		fmt.Fprintf(w, "| setting | create->all Running, median | each round | delete->all gone, median | each round | rounds faster than %s (create) |\n", base)
		fmt.Fprintln(w, "| --- | ---: | --- | ---: | --- | ---: |")
		for _, s := range settings {
			ups, downs := each(s, up), each(s, down)
			faster := "-"
			if base != "" && s != base && strings.HasPrefix(s, "crivk") {
				bs := each(base, up)
				k, m := 0, 0
				for i := range ups {
					if math.IsNaN(ups[i]) || math.IsNaN(bs[i]) {
						continue
					}
					m++
					if ups[i] < bs[i] {
						k++
					}
				}
				faster = fmt.Sprintf("%d of %d", k, m)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", s, fmtNum(median(ups)), list(ups), fmtNum(median(downs)), list(downs), faster)
		}
		fmt.Fprintln(w)
		for _, s := range settings {
			fmt.Fprintf(w, "#### %s, batch of %d pods\n\n", s, n)
			fmt.Fprintln(w, "| round | create->all Running | per-pod p50 | per-pod p99 | pods/s | delete->all gone | node not Ready (samples) | oldest lease | objects gone early |")
			fmt.Fprintln(w, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
			for i, l := range byRound[s] {
				if l == nil {
					continue
				}
				b2, b3 := batchBySize(l.W2, n), batchBySize(l.W3, n)
				nan := math.NaN()
				lagUp, p50, p99, pps, notReady, lease := nan, nan, nan, nan, nan, nan
				lagDown, early := nan, nan
				if b2 != nil {
					lagUp, p50, p99, pps = b2.Lag, summaryOr(b2.PerPod, func(s Summary) float64 { return s.P50 }), summaryOr(b2.PerPod, func(s Summary) float64 { return s.P99 }), b2.PodsPerSecond
					notReady, lease = float64(b2.NodeNotReady), float64(b2.MaxLeaseAge)
				}
				if b3 != nil {
					lagDown, early = b3.Lag, float64(b3.EarlyDeletions)
				}
				fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", i+1, fmtNum(lagUp), fmtNum(p50), fmtNum(p99), fmtNum(pps),
					fmtNum(lagDown), fmtNum(notReady), fmtNum(lease), fmtNum(early))
			}
			fmt.Fprintln(w)
		}
	}
	r.writeCPU(w)
	var failed []string
	for _, l := range r.Lanes {
		if l.Error != "" {
			failed = append(failed, fmt.Sprintf("- %s, round %d: %s", l.setting(), l.Round, l.Error))
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(w, "Incidents:\n\n%s\n\n", strings.Join(failed, "\n"))
	}
}
