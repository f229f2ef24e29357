package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseOnly(t *testing.T) {
	for name, tc := range map[string]struct {
		in      string
		want    []string
		wantErr bool
	}{
		"empty: every step":    {in: "", want: nil},
		"one":                  {in: "w2", want: []string{"w2"}},
		"w3 is w2, once":       {in: "W2, w3", want: []string{"w2"}},
		"several in order":     {in: "w5,w1", want: []string{"w5", "w1"}},
		"unknown step":         {in: "w2,w6", wantErr: true},
		"empty item is a typo": {in: "w2,", wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := parseOnly(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseOnly(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			}
			if !tc.wantErr && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseOnly(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseBatchSizes(t *testing.T) {
	for name, tc := range map[string]struct {
		in      string
		want    []int
		wantErr bool
	}{
		"empty: the plan's": {in: "", want: nil},
		"one":               {in: "110", want: []int{110}},
		"several, spaces":   {in: "30, 110", want: []int{30, 110}},
		"zero":              {in: "0", wantErr: true},
		"negative":          {in: "-3", wantErr: true},
		"not a number":      {in: "110x", wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := parseBatchSizes(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseBatchSizes(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			}
			if !tc.wantErr && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseBatchSizes(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseVariants(t *testing.T) {
	for name, tc := range map[string]struct {
		in      string
		want    []string
		wantErr bool
	}{
		"empty: none":       {in: "", want: nil},
		"three":             {in: "--max-parallel-sandboxes=0;--max-parallel-sandboxes=4;--max-parallel-sandboxes=8", want: []string{"--max-parallel-sandboxes=0", "--max-parallel-sandboxes=4", "--max-parallel-sandboxes=8"}},
		"several arguments": {in: " --a=1   --b ; --c ", want: []string{"--a=1 --b", "--c"}},
		"stray separator":   {in: "--a;", wantErr: true},
		"empty set":         {in: "--a; ;--b", wantErr: true},
		"twice":             {in: "--a --b;--a  --b", wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := parseVariants(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseVariants(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			}
			if !tc.wantErr && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseVariants(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestWithFocus(t *testing.T) {
	p, err := withFocus(FullPlan, []string{"w2"}, []int{110}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Batches, []int{110}) || p.Repeat != 3 {
		t.Errorf("batches %v repeat %d, want [110] 3", p.Batches, p.Repeat)
	}
	for step, want := range map[string]bool{"w1": false, "w2": true, "w4": false, "w5": false} {
		if p.runs(step) != want {
			t.Errorf("runs(%s) = %v, want %v", step, !want, want)
		}
	}
	// The full plan is left as it was, and runs every step.
	if !reflect.DeepEqual(FullPlan.Batches, []int{30, 110, 250}) || FullPlan.Only != nil {
		t.Errorf("FullPlan changed: %+v", FullPlan)
	}
	for _, step := range steps {
		if !FullPlan.runs(step) || !QuickPlan.runs(step) {
			t.Errorf("the full and quick plans skip %s", step)
		}
	}
	if _, err := withFocus(FullPlan, nil, nil, 0); err == nil {
		t.Error("-repeat 0: no error")
	}
	if p, _ := withFocus(QuickPlan, nil, nil, 1); !reflect.DeepEqual(p, QuickPlan) {
		t.Errorf("no focus changed the plan: %+v", p)
	}
}

func TestSchedule(t *testing.T) {
	got := schedule([]string{"raw", "crivk"}, []string{"a", "b", "c"}, 2)
	want := []laneRun{
		{lane: "raw", round: 1}, {lane: "crivk", variant: "a", round: 1}, {lane: "crivk", variant: "b", round: 1}, {lane: "crivk", variant: "c", round: 1},
		{lane: "raw", round: 2}, {lane: "crivk", variant: "a", round: 2}, {lane: "crivk", variant: "b", round: 2}, {lane: "crivk", variant: "c", round: 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("schedule = %+v\nwant %+v", got, want)
	}
	// No variants, one round: the lanes as given (the full plan's runs).
	got = schedule([]string{"raw", "kubelet", "crivk"}, nil, 1)
	want = []laneRun{{lane: "raw", round: 1}, {lane: "kubelet", round: 1}, {lane: "crivk", round: 1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("schedule without variants = %+v, want %+v", got, want)
	}
}

func TestFocusedReport(t *testing.T) {
	r := sampleResults()
	r.Plan = Plan{Batches: []int{110}, Only: []string{"w2"}, Repeat: 3}
	r.Lanes = nil
	add := func(lane, variant string, round int, up, down float64) {
		r.Lanes = append(r.Lanes, LaneResult{Lane: lane, Variant: variant, Round: round,
			W2: []Batch{{Size: 110, Lag: up, PodsPerSecond: 110 / up, PerPod: Summarize([]float64{up / 2, up})}},
			W3: []Batch{{Size: 110, Lag: down}}})
	}
	for round, v := range [][3]float64{{15, 20, 16}, {14, 18, 17}, {16, 22, 14}} {
		add("raw", "", round+1, 13, 10)
		add("crivk", "--max-parallel-sandboxes=0", round+1, v[0], 12)
		add("crivk", "--max-parallel-sandboxes=4", round+1, v[1], 12)
		add("crivk", "--max-parallel-sandboxes=8", round+1, v[2], 12)
	}
	if !r.focused() {
		t.Fatal("not focused")
	}
	var b strings.Builder
	r.writeFocused(&b)
	md := b.String()
	for _, want := range []string{
		"Plan: steps w2; W1 0 pods; W2/W3 batches [110]; 3 round(s)",
		"| raw | 13.0 | 13.0, 13.0, 13.0 | 10.0 | 10.0, 10.0, 10.0 | - |",
		"| crivk --max-parallel-sandboxes=0 | 15.0 | 15.0, 14.0, 16.0 | 12.0 | 12.0, 12.0, 12.0 | - |",
		"| crivk --max-parallel-sandboxes=4 | 20.0 | 20.0, 18.0, 22.0 | 12.0 | 12.0, 12.0, 12.0 | 0 of 3 |",
		// 16 > 15, 17 > 14, 14 < 16.
		"| crivk --max-parallel-sandboxes=8 | 16.0 | 16.0, 17.0, 14.0 | 12.0 | 12.0, 12.0, 12.0 | 1 of 3 |",
		"#### crivk --max-parallel-sandboxes=4, batch of 110 pods",
		"| 2 | 18.0 | 13.5 | 17.9 | 6.11 | 12.0 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "### W1") {
		t.Errorf("a w2 run reports W1:\n%s", md)
	}
	// W1 alone: its table, no batch's.
	r.Plan = Plan{W1Count: 3, Batches: []int{20}, Only: []string{"w1"}}
	r.Lanes = []LaneResult{{Lane: "crivk", Round: 1, W1: Summarize([]float64{0.1, 0.2, 0.3})}}
	b.Reset()
	r.writeFocused(&b)
	if md := b.String(); !strings.Contains(md, "| crivk | 0.200 | 0.200 | 0.298 | 0.298 |") || strings.Contains(md, "Batch of") {
		t.Errorf("W1-only report:\n%s", md)
	}
	// A plain run is not focused.
	if sampleResults().focused() {
		t.Error("the sample full run reads as focused")
	}
}
