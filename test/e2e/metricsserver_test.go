package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/wait"
)

// metricsUsage is the part of metrics.k8s.io/v1beta1 NodeMetrics and
// PodMetrics this test reads (what `kubectl top` prints).
type metricsUsage struct {
	Usage      map[v1.ResourceName]resource.Quantity `json:"usage"`
	Containers []struct {
		Name  string                                `json:"name"`
		Usage map[v1.ResourceName]resource.Quantity `json:"usage"`
	} `json:"containers"`
}

// TestResourceMetricsAPI reads the node's and a pod's usage through the
// resource metrics API (metrics.k8s.io/v1beta1), as `kubectl top node` and
// `kubectl top pod` do: metrics-server v0.7.2 (started by hack/local-up.sh
// with METRICS_SERVER=1) scrapes crivk's /metrics/resource with its own
// credentials and serves them through the API server's aggregation layer.
// The pod burns one CPU: its usage is well above zero.
func TestResourceMetricsAPI(t *testing.T) {
	ns := newNamespace(t)
	runningPod(t, ns, busyboxPod("top", v1.RestartPolicyNever, "while true; do :; done"))
	ctx := testContext(t, 2*time.Minute)
	start := time.Now()
	var node, pod metricsUsage
	var lastErr error
	get := func(ctx context.Context, path string, into *metricsUsage) bool {
		raw, err := client.CoreV1().RESTClient().Get().AbsPath(path).DoRaw(ctx)
		if err != nil {
			lastErr = err
			return false
		}
		if err := json.Unmarshal(raw, into); err != nil {
			lastErr = err
			return false
		}
		return true
	}
	err := wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		if !get(ctx, "/apis/metrics.k8s.io/v1beta1/nodes/"+nodeName, &node) ||
			!get(ctx, "/apis/metrics.k8s.io/v1beta1/namespaces/"+ns+"/pods/top", &pod) {
			return false, nil
		}
		return len(pod.Containers) == 1, nil
	})
	if err != nil {
		t.Fatalf("metrics.k8s.io never had the node and the pod within 2 minutes: %v", lastErr)
	}
	nodeCPU, nodeMem := node.Usage[v1.ResourceCPU], node.Usage[v1.ResourceMemory]
	c := pod.Containers[0]
	podCPU, podMem := c.Usage[v1.ResourceCPU], c.Usage[v1.ResourceMemory]
	t.Logf("after %s: top node %s: cpu %s memory %s; top pod %s/top container %s: cpu %s memory %s",
		time.Since(start).Round(time.Second), nodeName, nodeCPU.String(), nodeMem.String(), ns, c.Name, podCPU.String(), podMem.String())
	if nodeCPU.MilliValue() < 100 || nodeMem.Value() < 50<<20 {
		t.Errorf("node usage cpu %s memory %s, want at least 100m (a busy pod runs) and 50Mi", nodeCPU.String(), nodeMem.String())
	}
	if c.Name != "c" || podCPU.MilliValue() < 100 || podMem.Value() <= 0 {
		t.Errorf("pod container %q usage cpu %s memory %s, want container c with at least 100m CPU (it loops) and some memory", c.Name, podCPU.String(), podMem.String())
	}
}

// TestAgentMetricsMove reads the node's /metrics through the API server's
// node proxy after a pod ran: the kubelet's runtime, PLEG, pod worker,
// pod gauges and API client metrics have samples.
func TestAgentMetricsMove(t *testing.T) {
	ns := newNamespace(t)
	runningPod(t, ns, busyboxPod("counted", v1.RestartPolicyNever, "sleep 3600"))
	series := []string{
		`kubelet_runtime_operations_total{operation_type="run_podsandbox"}`,
		`kubelet_runtime_operations_duration_seconds_count{operation_type="create_container"}`,
		`kubelet_pleg_relist_duration_seconds_count`,
		`kubelet_pleg_relist_interval_seconds_count`,
		`kubelet_pod_worker_duration_seconds_count{operation_type="create"}`,
		`kubelet_pod_start_duration_seconds_count`,
		`kubelet_pod_start_sli_duration_seconds_count`,
		`rest_client_requests_total{code="200"`,
		`kubelet_running_pods `,
		`kubelet_running_containers{container_state="running"}`,
		`kubelet_desired_pods{static=""}`,
		`kubelet_working_pods{config="desired",lifecycle="sync",static=""}`,
	}
	// The running gauges are set at a PLEG relist (every second, and
	// after runtime events), which may come just after the pod shows
	// Ready: /metrics is read again for up to 10 relist periods until
	// every series has a positive sample.
	var missing, found []string
	// A timeout is the failure reported below, with what was missing; a
	// failed read ends the test.
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		raw, err := client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", nodeName, "proxy/metrics").DoRaw(ctx)
		if err != nil {
			return false, err
		}
		missing, found = missing[:0], found[:0]
		for _, s := range series {
			if line := positiveSample(string(raw), s); line != "" {
				found = append(found, line)
			} else {
				missing = append(missing, s)
			}
		}
		return len(missing) == 0, nil
	})
	if err != nil && len(missing) == 0 {
		t.Fatalf("reading the node's /metrics: %v", err)
	}
	for _, line := range found {
		t.Logf("%s", line)
	}
	for _, s := range missing {
		t.Errorf("/metrics has no positive sample of %s within 10 s of the pod's Ready", s)
	}
}

// positiveSample is the first line of body that starts with series and
// has a positive value, "" when none.
func positiveSample(body, series string) string {
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, series) {
			f := strings.Fields(line)
			if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil && v > 0 {
				return line
			}
		}
	}
	return ""
}

// TestTracing: crivk runs with --tracing in the e2e; after a pod starts,
// zpages on the profiling address list the pod sync's span, its CRI
// calls' spans and virtual-kubelet's own.
func TestTracing(t *testing.T) {
	ns := newNamespace(t)
	runningPod(t, ns, busyboxPod("traced", v1.RestartPolicyNever, "sleep 3600"))
	resp, err := http.Get("http://" + crivkProfilingAddr + "/debug/tracez")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, name := range []string{"podWorker.create", "cri.run_podsandbox", "cri.create_container", "cri.start_container"} {
		if !strings.Contains(string(body), name) {
			t.Errorf("/debug/tracez lists no span %s", name)
		}
	}
}
