package stats

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/crivk/crivk/cm"
	"github.com/opencontainers/cgroups"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// v1MemoryStat is a v1 memory.stat with the given own and hierarchical
// swap.
func v1MemoryStat(swap, totalSwap string) string {
	return "cache 4096\nrss 1048576\nswap " + swap + "\npgfault 300\npgmajfault 2\n" +
		"total_cache 4096\ntotal_rss 1048576\ntotal_swap " + totalSwap + "\ntotal_inactive_file 4096\n"
}

const unlimitedV1 = "9223372036854771712\n"

// TestSwapSeries: the swap series of /metrics/resource and the swap
// figures of /stats/summary, from a v1 cgroup tree read through
// cm.Manager as cAdvisor reads it, for a pod (uid-1, "web") with a
// running container c1 "app" and a running container c2 "side" whose
// cgroup is gone (the runtime's figures, or none).
func TestSwapSeries(t *testing.T) {
	const pod = "/kubepods/burstable/poduid-1"
	at := time.Unix(1700000000, 0)
	for name, tc := range map[string]struct {
		// files override the tree's (hierarchy/<cgroup>/file); a nil
		// value removes one.
		files    map[string]*string
		noPod    bool   // neither the pod's nor c1's cgroup is there
		meminfo  string // "": no /proc/meminfo
		c1, c2   *runtimeapi.SwapUsage
		want     []string
		notWant  []string
		wantNode statsapi.SwapStats
		wantPod  *statsapi.SwapStats
	}{
		"no swap in use, memsw limit = the memory limit (NoSwap)": {
			files:   map[string]*string{"memory" + pod + "/c1/memory.memsw.limit_in_bytes": strPtr("79998976\n")},
			meminfo: "MemTotal:       8000000 kB\nSwapTotal:             0 kB\nSwapFree:              0 kB\n",
			want: []string{
				"node_swap_usage_bytes 0 1700000000000",
				`container_swap_usage_bytes{container="app",namespace="ns",pod="web"} 0 1700000000000`,
				`container_swap_limit_bytes{container="app",namespace="ns",pod="web"} 7.9998976e+07 1700000000000`,
				// c2's cgroup is gone and the runtime has no swap: the
				// kubelet's zeros.
				`container_swap_usage_bytes{container="side",namespace="ns",pod="web"} 0 1700000000000`,
				`container_swap_limit_bytes{container="side",namespace="ns",pod="web"} 0 1700000000000`,
				`pod_swap_usage_bytes{namespace="ns",pod="web"} 0 1700000000000`,
				"# HELP node_swap_usage_bytes [ALPHA] Current swap usage of the node in bytes. Reported only on non-windows systems",
				"# HELP container_swap_limit_bytes [ALPHA] Current amount of the container swap limit in bytes. Reported only on non-windows systems",
			},
			wantNode: statsapi.SwapStats{SwapUsageBytes: ptr(0), SwapAvailableBytes: ptr(0)},
			wantPod:  &statsapi.SwapStats{SwapUsageBytes: ptr(0)},
		},
		"swap in use, hierarchical total_swap": {
			files: map[string]*string{
				"memory/memory.stat":                               strPtr(v1MemoryStat("0", "1048576")),
				"memory" + pod + "/memory.stat":                    strPtr(v1MemoryStat("0", "12288")),
				"memory" + pod + "/c1/memory.stat":                 strPtr(v1MemoryStat("4096", "8192")),
				"memory" + pod + "/c1/memory.memsw.limit_in_bytes": strPtr("79998976\n"),
			},
			meminfo: "SwapTotal:       1048576 kB\n",
			// The runtime's figures do not count while the cgroup is read.
			c1: &runtimeapi.SwapUsage{Timestamp: at.UnixNano(), SwapUsageBytes: &runtimeapi.UInt64Value{Value: 5}},
			want: []string{
				"node_swap_usage_bytes 1.048576e+06 1700000000000",
				`container_swap_usage_bytes{container="app",namespace="ns",pod="web"} 8192 1700000000000`,
				`container_swap_limit_bytes{container="app",namespace="ns",pod="web"} 7.9998976e+07 1700000000000`,
				`pod_swap_usage_bytes{namespace="ns",pod="web"} 12288 1700000000000`,
			},
			wantNode: statsapi.SwapStats{SwapUsageBytes: ptr(1 << 20), SwapAvailableBytes: ptr(1<<30 - 1<<20)},
			wantPod:  &statsapi.SwapStats{SwapUsageBytes: ptr(12288)},
		},
		"swap in use, without use_hierarchy: the cgroup's own swap": {
			files: map[string]*string{
				"memory" + pod + "/c1/memory.stat":          strPtr(v1MemoryStat("4096", "8192")),
				"memory" + pod + "/c1/memory.use_hierarchy": strPtr("0\n"),
			},
			want:     []string{`container_swap_usage_bytes{container="app",namespace="ns",pod="web"} 4096 1700000000000`},
			notWant:  []string{`container_swap_limit_bytes{container="app"`},
			wantNode: statsapi.SwapStats{SwapUsageBytes: ptr(0)},
			wantPod:  &statsapi.SwapStats{SwapUsageBytes: ptr(0)},
		},
		"unlimited swap limit: no limit series": {
			files: map[string]*string{"memory" + pod + "/c1/memory.memsw.limit_in_bytes": strPtr(unlimitedV1)},
			want:  []string{`container_swap_usage_bytes{container="app",namespace="ns",pod="web"} 0 1700000000000`},
			// meminfo unreadable: the root's memsw limit, unlimited.
			notWant:  []string{`container_swap_limit_bytes{container="app"`},
			wantNode: statsapi.SwapStats{SwapUsageBytes: ptr(0)},
			wantPod:  &statsapi.SwapStats{SwapUsageBytes: ptr(0)},
		},
		"no pod cgroup: the runtime's figures, summed for the pod": {
			noPod: true,
			c1:    &runtimeapi.SwapUsage{Timestamp: at.UnixNano(), SwapUsageBytes: &runtimeapi.UInt64Value{Value: 100}, SwapAvailableBytes: &runtimeapi.UInt64Value{Value: 900}},
			c2:    &runtimeapi.SwapUsage{Timestamp: at.UnixNano(), SwapUsageBytes: &runtimeapi.UInt64Value{Value: 20}},
			want: []string{
				`container_swap_usage_bytes{container="app",namespace="ns",pod="web"} 100 1700000000000`,
				`container_swap_limit_bytes{container="app",namespace="ns",pod="web"} 1000 1700000000000`,
				`container_swap_usage_bytes{container="side",namespace="ns",pod="web"} 20 1700000000000`,
				`pod_swap_usage_bytes{namespace="ns",pod="web"} 120 1700000000000`,
			},
			notWant:  []string{`container_swap_limit_bytes{container="side"`},
			wantNode: statsapi.SwapStats{SwapUsageBytes: ptr(0)},
			wantPod:  &statsapi.SwapStats{SwapUsageBytes: ptr(120), SwapAvailableBytes: ptr(900)},
		},
	} {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			cgroupRoot, procRoot := filepath.Join(base, "cgroup"), filepath.Join(base, "proc")
			trees := []map[string]string{rootCgroupFiles()}
			if !tc.noPod {
				trees = append(trees, cgroupFiles(pod, "", 0), cgroupFiles(pod+"/c1", "200\n", 0))
			}
			for _, files := range trees {
				writeFiles(t, cgroupRoot, files)
			}
			for p, content := range tc.files {
				writeFiles(t, cgroupRoot, map[string]string{p: *content})
			}
			if tc.meminfo != "" {
				writeFiles(t, procRoot, map[string]string{"meminfo": tc.meminfo})
			}
			mounts := map[string]string{}
			for _, c := range []string{"cpu", "cpuacct", "memory", "pids", "blkio"} {
				mounts[c] = filepath.Join(cgroupRoot, c)
			}
			cgm, err := cm.New(cm.Config{Host: cm.NewHost(cm.HostConfig{V1Mounts: mounts})})
			if err != nil {
				t.Fatal(err)
			}
			c1, c2 := ctrStats("c1", "web", "app", 1, 1, at), ctrStats("c2", "web", "side", 1, 1, at)
			c1.Swap, c2.Swap = tc.c1, tc.c2
			for _, s := range []*runtimeapi.ContainerStats{c1, c2} {
				s.Attributes.Labels["io.kubernetes.pod.uid"] = "uid-1"
			}
			f := &fakeStats{stats: []*runtimeapi.ContainerStats{c1, c2},
				containers: []*runtimeapi.Container{{Id: "c1", CreatedAt: at.UnixNano()}, {Id: "c2", CreatedAt: at.UnixNano()}}}
			swap := &swapReader{cgroups: cgm, procRoot: procRoot, now: func() time.Time { return at }}

			m := resourceMetrics{runtime: f, node: func() nodeUsage { return nodeUsage{at: at} }, swap: swap}
			w := httptest.NewRecorder()
			m.ServeHTTP(w, httptest.NewRequest("GET", "/metrics/resource", nil))
			body := w.Body.String()
			for _, want := range tc.want {
				if !strings.Contains(body, want+"\n") {
					t.Errorf("missing %q in\n%s", want, body)
				}
			}
			for _, no := range tc.notWant {
				if strings.Contains(body, no) {
					t.Errorf("unexpected %q in\n%s", no, body)
				}
			}
			parser := expfmt.NewTextParser(model.LegacyValidation)
			if _, err := parser.TextToMetricFamilies(strings.NewReader(body)); err != nil {
				t.Fatalf("not the Prometheus text format: %v\n%s", err, body)
			}
			// The families in the kubelet's (the registry's) order.
			var names []string
			for _, line := range strings.Split(body, "\n") {
				if n, ok := strings.CutPrefix(line, "# TYPE "); ok {
					names = append(names, strings.Fields(n)[0])
				}
			}
			if !sort.StringsAreSorted(names) {
				t.Errorf("families not sorted: %q", names)
			}

			figs := swap.read(context.Background(), f.stats, f.containers)
			if got := figs.node; got == nil || !sameSwap(*got, tc.wantNode) || !got.Time.Time.Equal(at) {
				t.Errorf("node swap %s, want %s", swapString(got), swapString(&tc.wantNode))
			}
			if got := figs.pods["uid-1"]; (got == nil) != (tc.wantPod == nil) || got != nil && !sameSwap(*got, *tc.wantPod) {
				t.Errorf("pod swap %s, want %s", swapString(got), swapString(tc.wantPod))
			}
			// The summary carries the same figures.
			pods := podStats(f.stats, f.containers, figs)
			if len(pods) != 1 || len(pods[0].Containers) != 2 {
				t.Fatalf("summary pods %+v", pods)
			}
			if pods[0].Swap != figs.pods["uid-1"] || pods[0].Containers[0].Swap != figs.containers["c1"] || pods[0].Containers[1].Swap != figs.containers["c2"] {
				t.Errorf("summary swap: pod %s, containers %s %s", swapString(pods[0].Swap), swapString(pods[0].Containers[0].Swap), swapString(pods[0].Containers[1].Swap))
			}
		})
	}
}

// TestNoSwapWithoutCgroups: without a cgroup source (Config.Cgroups nil)
// neither endpoint has swap figures, as before.
func TestNoSwapWithoutCgroups(t *testing.T) {
	at := time.Unix(1700000000, 0)
	c1 := ctrStats("c1", "web", "app", 1, 1, at)
	c1.Swap = &runtimeapi.SwapUsage{Timestamp: at.UnixNano(), SwapUsageBytes: &runtimeapi.UInt64Value{Value: 100}}
	f := &fakeStats{stats: []*runtimeapi.ContainerStats{c1}, containers: []*runtimeapi.Container{{Id: "c1", CreatedAt: at.UnixNano()}}}
	h, err := New(Config{Runtime: fakeRuntime{f}, ImageFs: fakeImageFs{}, MemoryCapacity: func() (int64, error) { return 1 << 30, nil }, RootDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	h.ResourceMetrics.ServeHTTP(w, httptest.NewRequest("GET", "/metrics/resource", nil))
	if strings.Contains(w.Body.String(), "swap") {
		t.Errorf("swap series without a cgroup source:\n%s", w.Body)
	}
	s, err := h.Summarize(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Node.Swap != nil || len(s.Pods) != 1 || s.Pods[0].Swap != nil || s.Pods[0].Containers[0].Swap != nil {
		t.Errorf("summary swap without a cgroup source: node %v pods %+v", s.Node.Swap, s.Pods)
	}
}

// TestCgroupSwap: cAdvisor's swap figure and the kubelet's available
// swap, v1 and v2.
func TestCgroupSwap(t *testing.T) {
	v1 := func(swap, total uint64, hierarchy bool) *cgroups.Stats {
		st := cgroups.NewStats()
		st.MemoryStats.UseHierarchy = hierarchy
		st.MemoryStats.Stats = map[string]uint64{"total_rss": 1, "swap": swap, "total_swap": total}
		return st
	}
	v2 := func(swapPlusMem, mem uint64) *cgroups.Stats {
		st := cgroups.NewStats()
		st.MemoryStats.Stats = map[string]uint64{"anon": 1}
		st.MemoryStats.Usage.Usage, st.MemoryStats.SwapUsage.Usage = mem, swapPlusMem
		return st
	}
	for name, tc := range map[string]struct {
		stats    *cgroups.Stats
		noMemory bool
		limit    uint64
		want     *statsapi.SwapStats
	}{
		"v1 hierarchical":       {stats: v1(5, 50, true), limit: 1000, want: &statsapi.SwapStats{SwapUsageBytes: ptr(50), SwapAvailableBytes: ptr(950)}},
		"v1 own":                {stats: v1(5, 50, false), limit: 1000, want: &statsapi.SwapStats{SwapUsageBytes: ptr(5), SwapAvailableBytes: ptr(995)}},
		"v1 unlimited":          {stats: v1(5, 50, true), limit: 9223372036854771712, want: &statsapi.SwapStats{SwapUsageBytes: ptr(50)}},
		"v2 swap.current":       {stats: v2(1500, 1000), limit: 2000, want: &statsapi.SwapStats{SwapUsageBytes: ptr(500), SwapAvailableBytes: ptr(1500)}},
		"v2 swap.max max":       {stats: v2(1000, 1000), limit: 1<<64 - 1, want: &statsapi.SwapStats{SwapUsageBytes: ptr(0)}},
		"v2 swap.max 0":         {stats: v2(1000, 1000), limit: 0, want: &statsapi.SwapStats{SwapUsageBytes: ptr(0), SwapAvailableBytes: ptr(0)}},
		"usage above the limit": {stats: v1(0, 50, true), limit: 10, want: &statsapi.SwapStats{SwapUsageBytes: ptr(50), SwapAvailableBytes: ptr(0)}},
		"no memory controller":  {stats: v1(0, 50, true), noMemory: true, limit: 10},
	} {
		t.Run(name, func(t *testing.T) {
			cg := cm.CgroupSample{Stats: tc.stats, Spec: cm.CgroupSpec{HasMemory: !tc.noMemory}}
			got := cgroupSwap(cg, tc.limit, time.Unix(1, 0))
			if (got == nil) != (tc.want == nil) || got != nil && !sameSwap(*got, *tc.want) {
				t.Errorf("cgroupSwap = %s, want %s", swapString(got), swapString(tc.want))
			}
		})
	}
}

func strPtr(s string) *string { return &s }

func sameSwap(a, b statsapi.SwapStats) bool {
	eq := func(x, y *uint64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return eq(a.SwapUsageBytes, b.SwapUsageBytes) && eq(a.SwapAvailableBytes, b.SwapAvailableBytes)
}

func swapString(s *statsapi.SwapStats) string {
	if s == nil {
		return "nil"
	}
	v := func(x *uint64) string {
		if x == nil {
			return "-"
		}
		return model.SampleValue(*x).String()
	}
	return "{usage " + v(s.SwapUsageBytes) + " available " + v(s.SwapAvailableBytes) + "}"
}
