package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseMetrics(t *testing.T) {
	text := `# HELP apiserver_request_total x
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",resource="pods",subresource="status",verb="PATCH",version="v1"} 12
apiserver_request_total{code="201",resource="pods",verb="CREATE"} 3
apiserver_request_total{code="200",resource="leases",verb="PUT",extra="a,b"} 4.5
apiserver_registered_watchers{group="",kind="Pod",version="v1"} 7
apiserver_longrunning_requests{resource="pods",verb="WATCH"} 5
apiserver_longrunning_requests{resource="pods",verb="CONNECT"} 9
apiserver_response_sizes_sum{resource="pods",verb="LIST"} 1000
apiserver_response_sizes_count{resource="pods",verb="LIST"} 2
other_metric 1
`
	got := parseMetrics(text, keptMetrics)
	if len(got) != 7 {
		t.Fatalf("parseMetrics kept %d series, want 7: %+v", len(got), got)
	}
	if got[2].labels["extra"] != "a,b" || got[2].value != 4.5 {
		t.Errorf("quoted comma: got %+v", got[2])
	}
}

func TestSplitLabels(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"empty", ``, nil},
		{"one", `a="x"`, []string{`a="x"`}},
		{"two", `a="x",b="y"`, []string{`a="x"`, `b="y"`}},
		{"comma in quotes", `a="x,y",b="z"`, []string{`a="x,y"`, `b="z"`}},
		{"escaped quote", `a="x\",y",b="z"`, []string{`a="x\",y"`, `b="z"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, splitLabels(tc.in)); d != "" {
				t.Errorf("splitLabels(%q) (-want +got):\n%s", tc.in, d)
			}
		})
	}
}

func TestQuantile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		name string
		xs   []float64
		q    float64
		want float64
	}{
		{"empty", nil, 0.5, 0},
		{"p50", xs, 0.5, 5},
		{"p90", xs, 0.9, 9},
		{"p100", xs, 1, 10},
		{"p0", xs, 0, 1},
		{"one", []float64{3}, 0.9, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := quantile(tc.xs, tc.q); got != tc.want {
				t.Errorf("quantile(%v, %v) = %v, want %v", tc.xs, tc.q, got, tc.want)
			}
		})
	}
}
