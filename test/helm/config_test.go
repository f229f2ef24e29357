package helm

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/crivk/crivk/internal/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// installMaxPods and upgradeMaxPods are the test's maxPods, not the
// kubelet's default 110, set through the chart's config: value at install
// and at helm upgrade: they reach crivk only through its configuration
// file (the chart's ConfigMap, --config).
const installMaxPods, upgradeMaxPods = 57, 58

// checkConfigz: crivk runs with the chart's configuration file. Its
// /configz shows config:'s maxPods and the fields the chart writes into the
// file rather than as flags (the node API and /healthz ports, the cgroup
// root, the runtime's endpoint, the pod log dir, failCgroupV1, the taints),
// and the node reports that maxPods as its pod capacity. A crivk of the previous
// configuration may still answer just after a rollout: the check waits up
// to 30 s for maxPods, then reports what /configz last said.
func (e *env) checkConfigz(t *testing.T, ctx context.Context, maxPods int) {
	t.Helper()
	var kc map[string]any
	var last error
	err := wait.PollUntilContextTimeout(ctx, poll, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		kc, last = testutil.Configz(ctx, e.client, e.crivkNode)
		return last == nil && kc["maxPods"] == float64(maxPods), nil
	})
	if err != nil {
		t.Errorf("/configz of node %s: maxPods %v (error %v), want the chart's config.maxPods %d", e.crivkNode, kc["maxPods"], last, maxPods)
		return
	}
	for field, want := range map[string]any{
		"port":                     float64(10260),
		"healthzPort":              float64(10262),
		"healthzBindAddress":       "127.0.0.1",
		"cgroupRoot":               "/crivk",
		"containerRuntimeEndpoint": "unix://" + e.runtimeSock,
		"podLogsDir":               "/var/log/crivk-pods",
		"failCgroupV1":             false,
		"registerWithTaints":       []any{map[string]any{"key": "node.crivk.io/agent", "value": "crivk", "effect": "NoSchedule"}},
	} {
		if !reflect.DeepEqual(kc[field], want) {
			t.Errorf("/configz of node %s: %s = %v, want the chart's file's %v", e.crivkNode, field, kc[field], want)
		}
	}
	n, err := e.client.CoreV1().Nodes().Get(ctx, e.crivkNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Status.Capacity.Pods().Value(); got != int64(maxPods) {
		t.Errorf("node %s pod capacity %d, want the chart's config.maxPods %d", e.crivkNode, got, maxPods)
	}
	t.Logf("/configz of node %s: maxPods %d from the chart's config:, port, healthzPort, cgroupRoot, containerRuntimeEndpoint, podLogsDir, failCgroupV1 and registerWithTaints from its file", e.crivkNode, maxPods)
}
