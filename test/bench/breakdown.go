package main

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// Where the time of W1 and W2 goes, from the agents' own /metrics (crivk
// and the kubelet expose the same names): the CRI calls they made (count
// and seconds by operation, kubelet_runtime_operations_duration_seconds),
// their pod syncs (kubelet_pod_worker_duration_seconds) and their API
// requests (rest_client_requests_total), as the difference between a
// scrape before and one after the workload, per pod.

// agentCounters is one scrape of an agent's counters.
type agentCounters struct {
	CRISeconds  map[string]float64
	CRICalls    map[string]float64
	SyncSeconds float64
	Syncs       float64
	APIRequests float64
}

// Breakdown is a workload's share of those counters, per pod.
type Breakdown struct {
	Pods int `json:"pods"`
	// CRISeconds and CRICalls are per pod, by operation_type.
	CRISeconds  map[string]float64 `json:"criSecondsPerPod"`
	CRICalls    map[string]float64 `json:"criCallsPerPod"`
	SyncSeconds float64            `json:"syncSecondsPerPod"`
	Syncs       float64            `json:"syncsPerPod"`
	APIRequests float64            `json:"apiRequestsPerPod"`
}

// TotalCRISeconds is the CRI time per pod over all operations.
func (b *Breakdown) TotalCRISeconds() float64 {
	t := 0.0
	for _, v := range b.CRISeconds {
		t += v
	}
	return t
}

// scrapeAgent reads the node's /metrics through the API server's node
// proxy (the harness's admin credentials).
func scrapeAgent(ctx context.Context, c kubernetes.Interface, node string) (agentCounters, error) {
	raw, err := c.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy/metrics").DoRaw(ctx)
	if err != nil {
		return agentCounters{}, fmt.Errorf("scraping %s's /metrics: %w", node, err)
	}
	return parseAgentCounters(string(raw))
}

func parseAgentCounters(text string) (agentCounters, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return agentCounters{}, fmt.Errorf("parsing /metrics: %w", err)
	}
	a := agentCounters{CRISeconds: map[string]float64{}, CRICalls: map[string]float64{}}
	if f := families["kubelet_runtime_operations_duration_seconds"]; f != nil {
		for _, m := range f.GetMetric() {
			op := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation_type" {
					op = l.GetValue()
				}
			}
			if h := m.GetHistogram(); h != nil {
				a.CRISeconds[op] += h.GetSampleSum()
				a.CRICalls[op] += float64(h.GetSampleCount())
			}
		}
	}
	if f := families["kubelet_pod_worker_duration_seconds"]; f != nil {
		for _, m := range f.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				a.SyncSeconds += h.GetSampleSum()
				a.Syncs += float64(h.GetSampleCount())
			}
		}
	}
	if f := families["rest_client_requests_total"]; f != nil {
		for _, m := range f.GetMetric() {
			if c := m.GetCounter(); c != nil {
				a.APIRequests += c.GetValue()
			}
		}
	}
	return a, nil
}

// breakdownOf is after - before, per pod.
func breakdownOf(before, after agentCounters, pods int) *Breakdown {
	if pods <= 0 {
		return nil
	}
	n := float64(pods)
	b := &Breakdown{Pods: pods, CRISeconds: map[string]float64{}, CRICalls: map[string]float64{}}
	for op, v := range after.CRISeconds {
		if d := v - before.CRISeconds[op]; d > 0 {
			b.CRISeconds[op] = d / n
		}
	}
	for op, v := range after.CRICalls {
		if d := v - before.CRICalls[op]; d > 0 {
			b.CRICalls[op] = d / n
		}
	}
	b.SyncSeconds = math.Max(0, after.SyncSeconds-before.SyncSeconds) / n
	b.Syncs = math.Max(0, after.Syncs-before.Syncs) / n
	b.APIRequests = math.Max(0, after.APIRequests-before.APIRequests) / n
	return b
}

// topOps are the operations with the most CRI time in any lane's
// breakdowns, most first, at most n.
func topOps(bs []*Breakdown, n int) []string {
	sum := map[string]float64{}
	for _, b := range bs {
		if b == nil {
			continue
		}
		for op, v := range b.CRISeconds {
			sum[op] += v
		}
	}
	ops := make([]string, 0, len(sum))
	for op := range sum {
		ops = append(ops, op)
	}
	sort.Slice(ops, func(i, j int) bool { return sum[ops[i]] > sum[ops[j]] || sum[ops[i]] == sum[ops[j]] && ops[i] < ops[j] })
	if len(ops) > n {
		ops = ops[:n]
	}
	return ops
}
