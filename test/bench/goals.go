package main

import (
	"fmt"
	"io"
	"math"
)

// Goal is one of the targets: crivk's figure over another lane's
// at most Max.
type Goal struct {
	Name    string  `json:"name"`
	Against string  `json:"against"`
	Max     float64 `json:"max"`
	Ratio   float64 `json:"-"`
	// Bound is the best ratio reachable (NaN when unknown): for a goal
	// against the kubelet, raw/kubelet on the same figure (no agent does
	// better than raw CRI calls); for a goal against raw, rawapi/raw (no
	// agent that goes through the API server does better than the rawapi
	// lane's minimal one). A Max below it is out of reach.
	Bound float64 `json:"-"`
}

// boundLanes is, per lane a goal is set against, the lane whose ratio to
// it is the bound: raw against the kubelet, rawapi against raw.
var boundLanes = map[string]string{"kubelet": "raw", "raw": "rawapi"}

// OutOfReach is true when the goal asks for less than its bound.
func (g Goal) OutOfReach() bool { return !math.IsNaN(g.Bound) && g.Bound > g.Max }

// Met is unknown (false, false) when a figure is missing. The ratio is
// judged at the precision the tables show it (two decimals): two agents
// that sent the same 3 requests in windows a millisecond apart are 1.00x,
// not a miss.
func (g Goal) Met() (met, known bool) {
	if math.IsNaN(g.Ratio) {
		return false, false
	}
	return math.Round(g.Ratio*100)/100 <= g.Max, true
}

// goals evaluates the goals on r.
func (r *Results) goals() []Goal {
	var out []Goal
	// A lane that failed part way keeps the figures it measured before
	// (the tables show them too); a figure it lacks is NaN, no ratio.
	ratioOf := func(num, den string, f func(*LaneResult) float64) float64 {
		c, o := r.lane(num), r.lane(den)
		if c == nil || o == nil {
			return math.NaN()
		}
		return Ratio(f(c), f(o))
	}
	goal := func(name, against string, limit float64, f func(*LaneResult) float64) Goal {
		g := Goal{Name: name, Against: against, Max: limit, Ratio: ratioOf("crivk", against, f), Bound: math.NaN()}
		if b, ok := boundLanes[against]; ok {
			g.Bound = ratioOf(b, against, f)
		}
		return g
	}
	p99 := func(s func(*LaneResult) Summary) func(*LaneResult) float64 {
		return func(l *LaneResult) float64 { return summaryOr(s(l), func(s Summary) float64 { return s.P99 }) }
	}
	// The goals of the performance issue (#20): against the runtime's own
	// limit (the raw lane) for latencies, against the kubelet for the
	// agent's footprint; the old goals below raw are retired.
	w1 := p99(func(l *LaneResult) Summary { return l.W1 })
	out = append(out, goal("W1 p99", "raw", 1.10, w1))
	for _, n := range r.Plan.Batches {
		lag := func(bs func(*LaneResult) []Batch) func(*LaneResult) float64 {
			return func(l *LaneResult) float64 {
				if b := batchBySize(bs(l), n); b != nil {
					return b.Lag
				}
				return math.NaN()
			}
		}
		w2 := lag(func(l *LaneResult) []Batch { return l.W2 })
		w3 := lag(func(l *LaneResult) []Batch { return l.W3 })
		early := math.NaN()
		if c := r.lane("crivk"); c != nil {
			if b := batchBySize(c.W3, n); b != nil {
				early = float64(b.EarlyDeletions)
			}
		}
		// health is lane's node health during the batch's creation (NaN:
		// not measured).
		health := func(lane string) (notReady, leaseAge float64) {
			notReady, leaseAge = math.NaN(), math.NaN()
			if l := r.lane(lane); l != nil {
				if b := batchBySize(l.W2, n); b != nil {
					notReady, leaseAge = float64(b.NodeNotReady), float64(b.MaxLeaseAge)
				}
			}
			return notReady, leaseAge
		}
		notReady, leaseAge := health("crivk")
		// A density point's goals are the node's health only: the raw
		// lane ran it without its parallelism settings (no floor).
		if !r.Plan.density(n) {
			out = append(out,
				goal(fmt.Sprintf("W2 batch lag, %d pods", n), "raw", 1.10, w2),
				goal(fmt.Sprintf("W3 batch lag, %d pods", n), "raw", 1.10, w3))
		}
		out = append(out,
			// Not a ratio: the number of crivk's pod objects gone while a
			// container of theirs still ran.
			Goal{Name: fmt.Sprintf("W3 objects gone before their containers stopped, %d pods", n), Against: "count", Max: 0, Ratio: early, Bound: math.NaN()},
			// Density: the node Ready throughout the batch and its lease
			// never expired (the kubelet's lease duration, 40 s).
			Goal{Name: fmt.Sprintf("W2 node not Ready (samples), %d pods", n), Against: "count", Max: 0, Ratio: notReady, Bound: math.NaN()},
			Goal{Name: fmt.Sprintf("W2 oldest node lease (s), %d pods", n), Against: "count", Max: 40, Ratio: leaseAge, Bound: math.NaN()})
		// The density goal is for both agents (issue #33): the kubelet's
		// node too, where its lane ran.
		if r.lane("kubelet") != nil {
			kNotReady, kLeaseAge := health("kubelet")
			out = append(out,
				Goal{Name: fmt.Sprintf("W2 node not Ready (samples), %d pods, the kubelet's node", n), Against: "count", Max: 0, Ratio: kNotReady, Bound: math.NaN()},
				Goal{Name: fmt.Sprintf("W2 oldest node lease (s), %d pods, the kubelet's node", n), Against: "count", Max: 40, Ratio: kLeaseAge, Bound: math.NaN()})
		}
	}
	// W4's goal is on the latency from containerd's exit time: from the
	// scheduled exit, busybox's own lag (common to all lanes) would squeeze
	// the ratio towards 1.
	out = append(out, goal("W4 p99 (from containerd's exit)", "kubelet", 0.2, p99(func(l *LaneResult) Summary { return l.W4Exit })))
	for _, n := range r.Plan.SteadyPods {
		st := func(f func(*Steady) Num) func(*LaneResult) float64 {
			return func(l *LaneResult) float64 {
				if s := steadyByPods(l.W5, n); s != nil {
					return float64(f(s))
				}
				return math.NaN()
			}
		}
		out = append(out,
			goal(fmt.Sprintf("W5 agent CPU, %d pods", n), "kubelet", 0.5, st(func(s *Steady) Num { return s.AgentCPU })),
			goal(fmt.Sprintf("W5 agent RSS, %d pods", n), "kubelet", 0.5, st(func(s *Steady) Num { return s.AgentRSSMiB })),
			goal(fmt.Sprintf("W5 API requests/s, %d pods", n), "kubelet", 1, st(func(s *Steady) Num { return s.APIRequests })))
	}
	return out
}

func (r *Results) writeGoals(w io.Writer) {
	fmt.Fprintln(w, "### Goals (crivk against the other lanes, same run)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| goal | crivk / | target | measured | | best reachable: raw/kubelet (goals against kubelet), rawapi/raw (goals against raw) |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | --- | ---: |")
	for _, g := range r.goals() {
		verdict := "no figure"
		if met, known := g.Met(); known && met {
			verdict = "met"
		} else if known {
			verdict = "**missed**"
		}
		bound := fmtRatio(g.Bound)
		if b, ok := boundLanes[g.Against]; ok && !math.IsNaN(g.Bound) {
			bound = fmt.Sprintf("%s/%s %s", b, g.Against, bound)
		}
		if g.OutOfReach() {
			bound += fmt.Sprintf(" (goal below %s: out of reach)", boundLanes[g.Against])
		}
		if g.Against == "count" {
			measured := "-"
			if !math.IsNaN(g.Ratio) {
				measured = fmt.Sprintf("%.0f", g.Ratio)
			}
			fmt.Fprintf(w, "| %s | - | <= %.0f | %s | %s | - |\n", g.Name, g.Max, measured, verdict)
			continue
		}
		fmt.Fprintf(w, "| %s | %s | <= %.2fx | %s | %s | %s |\n", g.Name, g.Against, g.Max, fmtRatio(g.Ratio), verdict, bound)
	}
	fmt.Fprintln(w)
}
