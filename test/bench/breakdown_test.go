package main

import (
	"math"
	"strings"
	"testing"
)

const metricsBefore = `# TYPE kubelet_runtime_operations_duration_seconds histogram
kubelet_runtime_operations_duration_seconds_bucket{operation_type="run_podsandbox",le="+Inf"} 2
kubelet_runtime_operations_duration_seconds_sum{operation_type="run_podsandbox"} 0.4
kubelet_runtime_operations_duration_seconds_count{operation_type="run_podsandbox"} 2
kubelet_runtime_operations_duration_seconds_bucket{operation_type="list_containers",le="+Inf"} 10
kubelet_runtime_operations_duration_seconds_sum{operation_type="list_containers"} 0.1
kubelet_runtime_operations_duration_seconds_count{operation_type="list_containers"} 10
# TYPE kubelet_pod_worker_duration_seconds histogram
kubelet_pod_worker_duration_seconds_bucket{operation_type="create",le="+Inf"} 2
kubelet_pod_worker_duration_seconds_sum{operation_type="create"} 1
kubelet_pod_worker_duration_seconds_count{operation_type="create"} 2
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="h",method="GET"} 10
rest_client_requests_total{code="201",host="h",method="POST"} 4
`

func TestBreakdown(t *testing.T) {
	before, err := parseAgentCounters(metricsBefore)
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseAgentCounters(strings.NewReplacer(
		`"run_podsandbox"} 0.4`, `"run_podsandbox"} 2.4`,
		`"run_podsandbox"} 2`, `"run_podsandbox"} 12`,
		`"run_podsandbox",le="+Inf"} 2`, `"run_podsandbox",le="+Inf"} 12`,
		`"create"} 1`, `"create"} 6`,
		`"create"} 2`, `"create"} 12`,
		`method="GET"} 10`, `method="GET"} 40`,
	).Replace(metricsBefore))
	if err != nil {
		t.Fatal(err)
	}
	b := breakdownOf(before, after, 10)
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	if !near(b.CRISeconds["run_podsandbox"], 0.2) || !near(b.CRICalls["run_podsandbox"], 1) {
		t.Errorf("run_podsandbox per pod: %v s, %v calls; want 0.2 s, 1 call", b.CRISeconds["run_podsandbox"], b.CRICalls["run_podsandbox"])
	}
	if _, ok := b.CRISeconds["list_containers"]; ok {
		t.Errorf("an operation that did not move is in the breakdown: %v", b.CRISeconds)
	}
	if !near(b.TotalCRISeconds(), 0.2) || !near(b.SyncSeconds, 0.5) || !near(b.Syncs, 1) || !near(b.APIRequests, 3) {
		t.Errorf("breakdown %+v, want 0.2 s CRI, 0.5 s and 1 sync, 3 requests per pod", b)
	}
	if ops := topOps([]*Breakdown{b, nil}, 4); len(ops) != 1 || ops[0] != "run_podsandbox" {
		t.Errorf("top operations %v", ops)
	}
	if breakdownOf(before, after, 0) != nil {
		t.Error("a breakdown over no pods")
	}
}
