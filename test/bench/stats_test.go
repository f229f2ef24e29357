package main

import (
	"encoding/json"
	"math"
	"testing"
)

func TestPercentile(t *testing.T) {
	ten := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		name   string
		sorted []float64
		p      float64
		want   float64
	}{
		{"empty", nil, 50, math.NaN()},
		{"one sample", []float64{7}, 99, 7},
		{"p0 is the min", ten, 0, 1},
		{"p100 is the max", ten, 100, 10},
		{"median of even count interpolates", ten, 50, 5.5},
		{"p90 of 1..10", ten, 90, 9.1},
		{"p99 of 1..10", ten, 99, 9.91},
		{"median of odd count is the middle", []float64{1, 2, 100}, 50, 2},
		{"two samples p25", []float64{0, 4}, 25, 1},
		{"out of range low", ten, -5, 1},
		{"out of range high", ten, 150, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Percentile(tc.sorted, tc.p)
			if math.IsNaN(tc.want) {
				if !math.IsNaN(got) {
					t.Fatalf("got %v, want NaN", got)
				}
				return
			}
			if math.Abs(got-tc.want) > 1e-9 {
				t.Fatalf("Percentile(%v, %v) = %v, want %v", tc.sorted, tc.p, got, tc.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	in := []float64{3, 1, 2, 10, 4}
	s := Summarize(in)
	want := Summary{N: 5, Min: 1, P50: 3, P90: 7.6, P99: 9.76, Max: 10, Mean: 4}
	for _, f := range []struct {
		name      string
		got, want float64
	}{{"min", s.Min, want.Min}, {"p50", s.P50, want.P50}, {"p90", s.P90, want.P90}, {"p99", s.P99, want.P99}, {"max", s.Max, want.Max}, {"mean", s.Mean, want.Mean}} {
		if math.Abs(f.got-f.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", f.name, f.got, f.want)
		}
	}
	if s.N != 5 {
		t.Errorf("N = %d, want 5", s.N)
	}
	if in[0] != 3 || in[1] != 1 {
		t.Errorf("Summarize sorted its input in place: %v", in)
	}
	if z := Summarize(nil); z.N != 0 {
		t.Errorf("Summarize(nil) = %+v, want N 0", z)
	}
}

func TestRatio(t *testing.T) {
	if r := Ratio(1, 4); r != 0.25 {
		t.Errorf("Ratio(1,4) = %v", r)
	}
	for _, c := range [][2]float64{{1, 0}, {math.NaN(), 1}, {1, math.NaN()}} {
		if r := Ratio(c[0], c[1]); !math.IsNaN(r) {
			t.Errorf("Ratio(%v,%v) = %v, want NaN", c[0], c[1], r)
		}
	}
}

func TestNumJSON(t *testing.T) {
	b, err := json.Marshal([]Num{1.5, Num(math.NaN())})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "[1.5,null]" {
		t.Fatalf("marshalled %s, want [1.5,null]", b)
	}
	var back []Num
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back[0] != 1.5 || !math.IsNaN(float64(back[1])) {
		t.Fatalf("unmarshalled %v, want [1.5 NaN]", back)
	}
}
