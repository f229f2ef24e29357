package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// cadvisorRequired are the families the node e2e suite's ContainerMetrics
// spec (test/e2e_node/container_metrics_test.go, v1.37.2) requires for
// its busy container, with its bounds for every series of the container
// (container_fs_usage_bytes is optional there: its second list overrides
// the first).
var cadvisorRequired = map[string][2]float64{
	"container_blkio_device_usage_total":            {0, 10000000},
	"container_cpu_system_seconds_total":            {0, 100},
	"container_cpu_usage_seconds_total":             {0, 100},
	"container_cpu_user_seconds_total":              {0, 100},
	"container_file_descriptors":                    {0, 100},
	"container_fs_reads_bytes_total":                {0, 10000000},
	"container_fs_reads_total":                      {0, 100},
	"container_fs_writes_bytes_total":               {0, 1000000},
	"container_fs_writes_total":                     {0, 200},
	"container_last_seen":                           {-1, -1}, // a recent time: checked apart
	"container_memory_cache":                        {0, 10 * 1000 * 1000},
	"container_memory_failcnt":                      {0, 0},
	"container_memory_failures_total":               {0, 1000000},
	"container_memory_mapped_file":                  {0, 10000000},
	"container_memory_max_usage_bytes":              {0, 80 * 1000 * 1000},
	"container_memory_rss":                          {10 * 1000, 80 * 1000 * 1000},
	"container_memory_swap":                         {0, 0},
	"container_memory_usage_bytes":                  {10 * 1000, 80 * 1000 * 1000},
	"container_memory_working_set_bytes":            {10 * 1000, 80 * 1000 * 1000},
	"container_oom_events_total":                    {0, 0},
	"container_processes":                           {0, 10},
	"container_sockets":                             {0, 10},
	"container_spec_cpu_period":                     {100000, 100000},
	"container_spec_cpu_shares":                     {2, 2},
	"container_spec_memory_limit_bytes":             {79953920, 79998976},
	"container_spec_memory_reservation_limit_bytes": {0, 0},
	"container_spec_memory_swap_limit_bytes":        {0, 80 * 1000 * 1000},
	"container_start_time_seconds":                  {-1, -1}, // a recent time: checked apart
	"container_threads":                             {0, 10},
	"container_threads_max":                         {0, 100000},
	"container_ulimits_soft":                        {0, 1073741816},
}

// cadvisorRemoved are the families the kubelet v1.37 no longer exports
// (its includedMetrics without CpuLoadMetrics and the task state,
// kubernetes#134981, #139870): none may be there.
var cadvisorRemoved = []string{"container_cpu_load_average_10s", "container_cpu_load_d_average_10s", "container_tasks_state"}

// blkioFamilies are the required families made of a cgroup's blkio lists.
var blkioFamilies = []string{"container_blkio_device_usage_total", "container_fs_reads_bytes_total", "container_fs_reads_total",
	"container_fs_writes_bytes_total", "container_fs_writes_total"}

// TestCadvisorMetrics reads /metrics/cadvisor through the API server's
// node proxy (crivk's authenticated port, nodes/metrics) and on the
// read-only port (as the node e2e suite does) while a BestEffort-CPU pod
// with an 80M memory limit (the suite's) burns CPU: every family the
// suite's ContainerMetrics spec requires has a series for its container,
// within the suite's bounds, and the values are the container's own (CPU
// time > 0, the limit of its cgroup, at least one thread and process);
// the sandbox has the pod's network series, the pod cgroup its series.
func TestCadvisorMetrics(t *testing.T) {
	const port = 10255
	waitCrivkServing(t)
	t.Cleanup(func() { waitCrivkServing(t) })
	withCrivkFlags(t, nil, nil, fmt.Sprintf("--read-only-port=%d", port))
	waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	ns := newNamespace(t)
	pod := busyboxPod("busy", v1.RestartPolicyNever, "while true; do :; done")
	pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("80M")}
	pod = runningPod(t, ns, pod)
	started := pod.Status.ContainerStatuses[0].State.Running.StartedAt.Time
	ctr := map[string]string{"namespace": ns, "pod": "busy", "container": "c"}

	var fams map[string]*dto.MetricFamily
	var body string
	waitPod(t, ns, "busy", 60*time.Second, "its CPU time in /metrics/cadvisor", func(*v1.Pod) bool {
		raw, err := client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", nodeName, "proxy/metrics/cadvisor").DoRaw(testContext(t, 10*time.Second))
		if err != nil {
			return false
		}
		body = string(raw)
		parser := expfmt.NewTextParser(model.LegacyValidation)
		if fams, err = parser.TextToMetricFamilies(strings.NewReader(body)); err != nil {
			t.Fatalf("/metrics/cadvisor is not the Prometheus text format: %v", err)
		}
		s := cadvisorSeries(fams, "container_cpu_usage_seconds_total", map[string]string{"namespace": ns, "pod": "busy", "container": "c", "cpu": "total"})
		return len(s) == 1 && s[0].GetCounter().GetValue() > 0
	})
	checkedAt := time.Now()

	id := ""
	if s := cadvisorSeries(fams, "container_spec_memory_limit_bytes", ctr); len(s) == 1 {
		id = cadvisorLabel(s[0], "id")
	}
	want := fmt.Sprintf("%s/kubepods/burstable/pod%s/%s", cgroupRoot(), pod.UID, strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://"))
	if id != want {
		t.Fatalf("the container's id label %q, want its cgroup %q", id, want)
	}
	for _, family := range cadvisorRemoved {
		if _, ok := fams[family]; ok {
			t.Errorf("%s is exported; the kubelet v1.37 no longer has it", family)
		}
	}
	blkio := hasBlkioDevices(filepath.Join("/sys/fs/cgroup/blkio", id))
	for family, bounds := range cadvisorRequired {
		series := cadvisorSeries(fams, family, ctr)
		if len(series) == 0 {
			if !blkio && slices.Contains(blkioFamilies, family) {
				t.Logf("%s: no series, and none expected: the container's blkio cgroup lists no device (this kernel accounts no block I/O to v1 blkio)", family)
				continue
			}
			t.Errorf("%s: no series for container c of %s/busy", family, ns)
			continue
		}
		for _, m := range series {
			v := cadvisorValue(m)
			if bounds[0] >= 0 && (v < bounds[0] || v > bounds[1]) {
				t.Errorf("%s%v = %v, outside the suite's [%v, %v]", family, m.GetLabel(), v, bounds[0], bounds[1])
			}
			if ts := m.GetTimestampMs(); ts > 0 && (time.UnixMilli(ts).Before(checkedAt.Add(-time.Minute)) || time.UnixMilli(ts).After(checkedAt.Add(2*time.Minute))) {
				t.Errorf("%s: timestamp %v not recent", family, time.UnixMilli(ts))
			}
			if cadvisorLabel(m, "name") == "" || cadvisorLabel(m, "image") == "" {
				t.Errorf("%s%v: no name or image label", family, m.GetLabel())
			}
		}
	}

	// The values are the container's own.
	mustValue := func(family string, labels map[string]string) float64 {
		t.Helper()
		s := cadvisorSeries(fams, family, labels)
		if len(s) != 1 {
			t.Fatalf("%s with %v: %d series, want 1", family, labels, len(s))
		}
		return cadvisorValue(s[0])
	}
	limit, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", id, "memory.limit_in_bytes"))
	if err != nil {
		t.Fatal(err)
	}
	if got := mustValue("container_spec_memory_limit_bytes", ctr); strconv.FormatFloat(got, 'f', -1, 64) != strings.TrimSpace(string(limit)) {
		t.Errorf("container_spec_memory_limit_bytes %v, the container's cgroup has %s", got, limit)
	}
	for family, min := range map[string]float64{"container_threads": 1, "container_processes": 1, "container_file_descriptors": 1,
		"container_cpu_user_seconds_total": 0.01, "container_memory_usage_bytes": 10000} {
		if got := mustValue(family, ctr); got < min {
			t.Errorf("%s = %v, want >= %v", family, got, min)
		}
	}
	if got := mustValue("container_ulimits_soft", map[string]string{"namespace": ns, "pod": "busy", "container": "c", "ulimit": "max_open_files"}); got <= 0 {
		t.Errorf("max_open_files %v", got)
	}
	if got := time.Unix(int64(mustValue("container_start_time_seconds", ctr)), 0); got.Before(started.Add(-time.Minute)) || got.After(started.Add(time.Minute)) {
		t.Errorf("container_start_time_seconds %v, the container started at %v", got, started)
	}
	if got := time.Unix(int64(mustValue("container_last_seen", ctr)), 0); got.Before(checkedAt.Add(-time.Minute)) || got.After(checkedAt.Add(time.Minute)) {
		t.Errorf("container_last_seen %v, scraped at %v", got, checkedAt)
	}

	// The sandbox: its network series, the sandbox image; the pod cgroup.
	sandboxes, err := runtime.ListPodSandbox(testContext(t, 10*time.Second), &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(pod.UID)}})
	if err != nil || len(sandboxes) != 1 {
		t.Fatalf("the pod's sandboxes: %v, %v", sandboxes, err)
	}
	sb := map[string]string{"namespace": ns, "pod": "busy", "container": "", "name": sandboxes[0].Id}
	if s := cadvisorSeries(fams, "container_network_receive_bytes_total", sb); len(s) == 0 {
		t.Errorf("no network series for the sandbox %s", sandboxes[0].Id)
	} else if cadvisorLabel(s[0], "interface") == "" || cadvisorLabel(s[0], "image") == "" {
		t.Errorf("sandbox network series %v: no interface or image", s[0].GetLabel())
	}
	if s := cadvisorSeries(fams, "container_network_receive_bytes_total", ctr); len(s) != 0 {
		t.Errorf("network series for the container, which shares the sandbox's: %v", s)
	}
	podCg := map[string]string{"namespace": ns, "pod": "busy", "container": "", "name": "",
		"id": fmt.Sprintf("%s/kubepods/burstable/pod%s", cgroupRoot(), pod.UID)}
	if got := mustValue("container_spec_memory_limit_bytes", podCg); got < 79953920 || got > 79998976 {
		t.Errorf("the pod cgroup's memory limit %v, want the container's 80M", got)
	}
	if got := mustValue("container_cpu_usage_seconds_total", map[string]string{"id": podCg["id"], "cpu": "total"}); got < mustValue("container_cpu_user_seconds_total", ctr) {
		t.Errorf("the pod cgroup's CPU time %v is below its container's user time", got)
	}
	if v := mustValue("container_scrape_error", nil); v != 0 {
		t.Errorf("container_scrape_error %v", v)
	}

	// The read-only port answers the same, without credentials.
	req, _ := http.NewRequestWithContext(testContext(t, 30*time.Second), http.MethodGet, fmt.Sprintf("http://%s:%d/metrics/cadvisor", nodeIP, port), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("read-only port: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	line := regexp.MustCompile(`(?m)^container_spec_memory_limit_bytes\{[^}]*container="c"[^}]*namespace="` + regexp.QuoteMeta(ns) + `"[^}]*\} `)
	if resp.StatusCode != http.StatusOK || !line.Match(raw) {
		t.Errorf("read-only port /metrics/cadvisor: %d, the container's memory limit series there: %v", resp.StatusCode, line.Match(raw))
	}
}

// cadvisorSeries are the series of family whose labels include labels.
func cadvisorSeries(fams map[string]*dto.MetricFamily, family string, labels map[string]string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range fams[family].GetMetric() {
		ok := true
		for k, v := range labels {
			ok = ok && cadvisorLabel(m, k) == v
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

func cadvisorLabel(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func cadvisorValue(m *dto.Metric) float64 {
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return m.GetGauge().GetValue()
}

// hasBlkioDevices tells whether a blkio cgroup lists any device in the
// files the cgroup library reads (BFQ, CFQ, throttle).
func hasBlkioDevices(dir string) bool {
	for _, f := range []string{"blkio.bfq.io_service_bytes_recursive", "blkio.io_service_bytes_recursive", "blkio.throttle.io_service_bytes_recursive"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err == nil && regexp.MustCompile(`(?m)^\d+:\d+ `).Match(b) {
			return true
		}
	}
	return false
}
