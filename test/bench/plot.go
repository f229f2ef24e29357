package main

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

var laneColors = map[string]color.Color{
	"raw":     color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff},
	"rawapi":  color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	"kubelet": color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"crivk":   color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
}

// cdf returns the empirical CDF of samples as points (x sorted, y in (0,1]).
func cdf(samples []float64) plotter.XYs {
	s := append([]float64(nil), samples...)
	sort.Float64s(s)
	pts := make(plotter.XYs, len(s))
	for i, v := range s {
		pts[i] = plotter.XY{X: v, Y: float64(i+1) / float64(len(s))}
	}
	return pts
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Legend.Left = false
	p.Add(plotter.NewGrid())
	return p
}

// writePlots writes the PNGs into dir and returns their file names:
// latency CDFs per lane for W1 and for W2/W3's largest batch, and agent
// CPU and RSS per lane against the number of pods for W5.
func writePlots(r *Results, dir string) ([]string, error) {
	var files []string
	save := func(p *plot.Plot, name string) error {
		if err := p.Save(16*vg.Centimeter, 10*vg.Centimeter, filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("plot %s: %w", name, err)
		}
		files = append(files, name)
		return nil
	}
	cdfPlot := func(name, title, x string, samples func(*LaneResult) []float64) error {
		p := newPlot(title, x, "fraction of pods")
		n := 0
		for _, ln := range laneOrder {
			l := r.lane(ln)
			if l == nil || len(samples(l)) == 0 {
				continue
			}
			line, err := plotter.NewLine(cdf(samples(l)))
			if err != nil {
				return err
			}
			line.Color = laneColors[ln]
			line.Width = vg.Points(1.5)
			p.Add(line)
			p.Legend.Add(ln, line)
			n++
		}
		if n == 0 {
			return nil
		}
		p.Y.Min, p.Y.Max = 0, 1
		// CDFs rise to the top right: the legend goes bottom right.
		p.Legend.Top = false
		return save(p, name)
	}
	if err := cdfPlot("w1-cdf.png", "W1: one pod, create -> Running", "seconds", func(l *LaneResult) []float64 { return l.W1Raw }); err != nil {
		return nil, err
	}
	if len(r.Plan.Batches) > 0 {
		n := r.Plan.Batches[len(r.Plan.Batches)-1]
		get := func(bs func(*LaneResult) []Batch) func(*LaneResult) []float64 {
			return func(l *LaneResult) []float64 {
				if b := batchBySize(bs(l), n); b != nil {
					return b.Samples
				}
				return nil
			}
		}
		if err := cdfPlot("w2-cdf.png", fmt.Sprintf("W2: batch of %d, per-pod create -> Running", n), "seconds",
			get(func(l *LaneResult) []Batch { return l.W2 })); err != nil {
			return nil, err
		}
		if err := cdfPlot("w3-cdf.png", fmt.Sprintf("W3: batch of %d, per-pod delete -> gone", n), "seconds",
			get(func(l *LaneResult) []Batch { return l.W3 })); err != nil {
			return nil, err
		}
	}
	steadyPlot := func(name, title, y string, f func(*Steady) float64) error {
		p := newPlot(title, "pods on the node", y)
		n := 0
		for _, ln := range laneOrder {
			l := r.lane(ln)
			if l == nil {
				continue
			}
			var pts plotter.XYs
			for _, s := range l.W5 {
				if v := f(&s); !math.IsNaN(v) {
					pts = append(pts, plotter.XY{X: float64(s.Pods), Y: v})
				}
			}
			if len(pts) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			line.Color, points.Color = laneColors[ln], laneColors[ln]
			points.Shape = draw.CircleGlyph{}
			p.Add(line, points)
			p.Legend.Add(ln, line, points)
			n++
		}
		if n == 0 {
			return nil
		}
		p.Y.Min = 0
		// The lines rise to the right: the legend goes top left.
		p.Legend.Left = true
		return save(p, name)
	}
	if err := steadyPlot("w5-cpu.png", "W5: CPU in steady state", "% of a core (agent; raw: containerd)", func(s *Steady) float64 {
		if math.IsNaN(float64(s.AgentCPU)) {
			return 100 * float64(s.ContainerdCPU)
		}
		return 100 * float64(s.AgentCPU)
	}); err != nil {
		return nil, err
	}
	if err := steadyPlot("w5-containerd-cpu.png", "W5: containerd CPU in steady state", "% of a core", func(s *Steady) float64 { return 100 * float64(s.ContainerdCPU) }); err != nil {
		return nil, err
	}
	if err := steadyPlot("w5-rss.png", "W5: agent RSS in steady state", "MiB", func(s *Steady) float64 { return float64(s.AgentRSSMiB) }); err != nil {
		return nil, err
	}
	return files, nil
}
