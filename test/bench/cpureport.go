package main

import (
	"fmt"
	"io"
	"math"
)

// cpuColumn is one column of the CPU tables: a lane run.
type cpuColumn struct {
	title string
	l     *LaneResult
}

// cpuColumns are the lanes in the report's order (a full run) or every run
// in order, titled by setting and round (a focused run).
func (r *Results) cpuColumns() []cpuColumn {
	var cols []cpuColumn
	if !r.focused() {
		for _, name := range laneOrder {
			if l := r.lane(name); l != nil {
				cols = append(cols, cpuColumn{name, l})
			}
		}
		return cols
	}
	for i := range r.Lanes {
		l := &r.Lanes[i]
		t := l.setting()
		if r.Plan.Repeat > 1 {
			t = fmt.Sprintf("%s, round %d", t, l.Round)
		}
		cols = append(cols, cpuColumn{t, l})
	}
	return cols
}

// cpuRows are the rows of one phase (create or delete) of a batch: name,
// unit and the figure of a BatchCPU.
var cpuRows = []struct {
	name, unit string
	f          func(*BatchCPU) float64
}{
	{"wall time", "s", func(b *BatchCPU) float64 { return b.Seconds }},
	{"available (wall x CPUs)", "core-s", func(b *BatchCPU) float64 { return b.Available }},
	{"machine busy (/proc/stat)", "core-s", func(b *BatchCPU) float64 { return float64(b.MachineBusy) }},
	{"machine busy, of available", "%", func(b *BatchCPU) float64 { return pct(float64(b.MachineBusy), b.Available) }},
	{"agent (raw, rawapi: the harness)", "core-s", func(b *BatchCPU) float64 { return float64(b.Agent) }},
	{"containerd", "core-s", func(b *BatchCPU) float64 { return float64(b.Containerd) }},
	{"containerd shims and the pods' processes", "core-s", func(b *BatchCPU) float64 { return float64(b.Shims) }},
	{"kube-apiserver", "core-s", func(b *BatchCPU) float64 { return float64(b.APIServer) }},
	{"etcd", "core-s", func(b *BatchCPU) float64 { return float64(b.Etcd) }},
	{"kube-apiserver + etcd, of machine busy", "%", func(b *BatchCPU) float64 {
		return pct(float64(b.APIServer)+float64(b.Etcd), float64(b.MachineBusy))
	}},
	{"rest of the machine (busy - the above)", "core-s", func(b *BatchCPU) float64 { return float64(b.Rest) }},
}

func pct(a, b float64) float64 {
	if b <= 0 || math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return 100 * a / b
}

// writeCPU writes, per batch size, where the machine's CPU went while the
// batch was created (W2) and deleted (W3), a column per lane run; nothing
// if no lane measured it.
func (r *Results) writeCPU(w io.Writer) {
	cols := r.cpuColumns()
	measured := false
	for _, c := range cols {
		for _, b := range append(append([]Batch(nil), c.l.W2...), c.l.W3...) {
			measured = measured || b.CPU != nil
		}
	}
	if !measured || !r.Plan.runs("w2") {
		return
	}
	for _, n := range r.Plan.Batches {
		fmt.Fprintf(w, "### CPU during the batches (core-seconds): %d pods\n\n", n)
		fmt.Fprint(w, "| phase | process group | unit |")
		for _, c := range cols {
			fmt.Fprintf(w, " %s |", c.title)
		}
		fmt.Fprint(w, "\n| --- | --- | --- |")
		for range cols {
			fmt.Fprint(w, " ---: |")
		}
		fmt.Fprintln(w)
		for _, ph := range []struct {
			name string
			bs   func(*LaneResult) []Batch
		}{{"W2 create", func(l *LaneResult) []Batch { return l.W2 }}, {"W3 delete", func(l *LaneResult) []Batch { return l.W3 }}} {
			for _, rw := range cpuRows {
				fmt.Fprintf(w, "| %s | %s | %s |", ph.name, rw.name, rw.unit)
				for _, c := range cols {
					v := math.NaN()
					if b := batchBySize(ph.bs(c.l), n); b != nil && b.CPU != nil {
						v = rw.f(b.CPU)
					}
					fmt.Fprintf(w, " %s |", fmtNum(v))
				}
				fmt.Fprintln(w)
			}
		}
		fmt.Fprintln(w)
	}
}
