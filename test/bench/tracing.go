package main

import (
	"fmt"
	"io"
	"math"
)

// tracedLane is crivk with --tracing: every pod sync and CRI call traced
// and sampled (cmd/crivk/tracing.go). Not in the default plan; with
// BENCH_LANES=raw,kubelet,crivk,crivk-traced the report compares it with
// the crivk lane of the same run: the tracing overhead.
const tracedLane = "crivk-traced"

// writeTracing writes the tracing overhead, if the run has both lanes.
func (r *Results) writeTracing(w io.Writer) {
	plain, traced := r.lane("crivk"), r.lane(tracedLane)
	if plain == nil || traced == nil {
		return
	}
	fmt.Fprintln(w, "### Tracing overhead (crivk with --tracing against crivk, same run)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| metric | unit | crivk | crivk --tracing | traced/plain |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: |")
	row := func(metric, unit string, f func(*LaneResult) float64) {
		a, b := f(plain), f(traced)
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", metric, unit, fmtNum(a), fmtNum(b), fmtRatio(Ratio(b, a)))
	}
	row("W1 create->Running p50", "s", func(l *LaneResult) float64 { return summaryOr(l.W1, func(s Summary) float64 { return s.P50 }) })
	row("W1 create->Running p99", "s", func(l *LaneResult) float64 { return summaryOr(l.W1, func(s Summary) float64 { return s.P99 }) })
	for _, n := range r.Plan.Batches {
		n := n
		row(fmt.Sprintf("W2 batch lag, %d pods", n), "s", func(l *LaneResult) float64 {
			if b := batchBySize(l.W2, n); b != nil {
				return b.Lag
			}
			return math.NaN()
		})
	}
	for _, n := range r.Plan.SteadyPods {
		n := n
		st := func(f func(*Steady) Num) func(*LaneResult) float64 {
			return func(l *LaneResult) float64 {
				if s := steadyByPods(l.W5, n); s != nil {
					return float64(f(s))
				}
				return math.NaN()
			}
		}
		row(fmt.Sprintf("W5 agent CPU, %d pods", n), "cores", st(func(s *Steady) Num { return s.AgentCPU }))
		row(fmt.Sprintf("W5 agent RSS, %d pods", n), "MiB", st(func(s *Steady) Num { return s.AgentRSSMiB }))
	}
	fmt.Fprintln(w)
}
