package stats

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crivk/crivk/cm"
	"github.com/opencontainers/cgroups"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func init() {
	// The cgroup library reads a plain directory tree as cgroupfs.
	cgroups.TestMode = true
}

// writeFiles writes path -> content under root.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// cgroupFiles are a cgroup's v1 files (hierarchy/<name>/file): a busy
// container with an 80M limit, cpu.shares 2, pids procs, 3 OOM kills.
func cgroupFiles(name, procs string, oomKills int) map[string]string {
	f := map[string]string{
		"cpu/cpu.shares": "2\n", "cpu/cpu.cfs_period_us": "100000\n", "cpu/cpu.cfs_quota_us": "-1\n", "cpu/cgroup.procs": procs,
		"cpu/cpu.stat":                 "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n",
		"cpuacct/cpuacct.usage":        "2500000000\n",
		"cpuacct/cpuacct.stat":         "user 150\nsystem 50\n",
		"cpuacct/cpuacct.usage_percpu": "1500000000 1000000000 \n",
		"memory/memory.stat": "cache 4096\nrss 1048576\nmapped_file 8192\nswap 0\npgfault 300\npgmajfault 2\n" +
			"total_cache 4096\ntotal_rss 1048576\ntotal_mapped_file 8192\ntotal_swap 0\ntotal_inactive_file 4096\ntotal_active_file 0\n",
		"memory/memory.usage_in_bytes": "1200128\n", "memory/memory.max_usage_in_bytes": "2400256\n", "memory/memory.failcnt": "0\n",
		"memory/memory.limit_in_bytes": "79998976\n", "memory/memory.memsw.limit_in_bytes": "9223372036854771712\n",
		"memory/memory.memsw.usage_in_bytes": "1200128\n", "memory/memory.memsw.max_usage_in_bytes": "2400256\n", "memory/memory.memsw.failcnt": "0\n",
		"memory/memory.soft_limit_in_bytes": "9223372036854771712\n", "memory/memory.use_hierarchy": "1\n",
		"memory/memory.oom_control": fmt.Sprintf("oom_kill_disable 0\nunder_oom 0\noom_kill %d\n", oomKills),
		"pids/pids.current":         "3\n", "pids/pids.max": "max\n",
		"blkio/blkio.throttle.io_service_bytes_recursive": "8:0 Read 40960\n8:0 Write 4096\n8:0 Sync 45056\n8:0 Async 0\n8:0 Discard 0\n8:0 Total 45056\nTotal 45056\n",
		"blkio/blkio.throttle.io_serviced_recursive":      "8:0 Read 10\n8:0 Write 1\n8:0 Sync 11\n8:0 Async 0\n8:0 Discard 0\n8:0 Total 11\nTotal 11\n",
	}
	out := map[string]string{}
	for p, c := range f {
		ctrl, file, _ := strings.Cut(p, "/")
		out[filepath.Join(ctrl, name, file)] = c
	}
	return out
}

// rootCgroupFiles is the machine's root cgroup: no pids files (v1).
func rootCgroupFiles() map[string]string {
	out := map[string]string{}
	for p, c := range cgroupFiles("/", "1\n", 0) {
		if !strings.HasPrefix(p, "pids/") {
			out[p] = c
		}
	}
	return out
}

type fakeSandboxes struct {
	sandboxes []*runtimeapi.PodSandbox
	err       error
	filters   []*runtimeapi.PodSandboxFilter
}

func (f *fakeSandboxes) ListPodSandbox(_ context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	f.filters = append(f.filters, filter)
	return f.sandboxes, f.err
}

type fakeImager string

func (f fakeImager) SandboxImage(context.Context) (string, error) { return string(f), nil }

func podLabels(uid, name string) map[string]string {
	return map[string]string{"io.kubernetes.pod.uid": uid, "io.kubernetes.pod.namespace": "ns", "io.kubernetes.pod.name": name}
}

// cadvisorFixture is a node with one pod (uid-1, "web") on a temporary v1
// cgroup tree and /proc: its sandbox sb1 (pid 100, eth0 and lo), its
// container c1 "app" (pids 200 and 201, 3 fds of which one a socket, 2
// OOM kills), and a running container c2 whose cgroup is gone.
func cadvisorFixture(t *testing.T) (cadvisorHandler, *fakeSandboxes, time.Time, string) {
	t.Helper()
	base := t.TempDir()
	cgroupRoot, procRoot, sysRoot := filepath.Join(base, "cgroup"), filepath.Join(base, "proc"), filepath.Join(base, "sys")
	pod := "/kubepods/burstable/poduid-1"
	for _, files := range []map[string]string{
		rootCgroupFiles(),
		cgroupFiles(pod, "", 0),
		cgroupFiles(pod+"/sb1", "100\n", 0),
		cgroupFiles(pod+"/c1", "201\n200\n", 2),
	} {
		writeFiles(t, cgroupRoot, files)
	}
	writeFiles(t, procRoot, map[string]string{
		"200/limits": "Limit                     Soft Limit           Hard Limit           Units     \n" +
			"Max cpu time              unlimited            unlimited            seconds   \n" +
			"Max open files            1048576              1048576              files     \n",
		"201/limits": "Max open files            1024                 4096                 files     \n",
		"100/limits": "Max open files            unlimited            unlimited            files     \n",
		"100/net/dev": "Inter-|   Receive                                                |  Transmit\n" +
			" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n" +
			"    lo:     100       1    0    0    0     0          0         0      100       1    0    0    0     0       0          0\n" +
			"  eth0:    2048      12    1    2    0     0          0         0     1024       8    3    4    0     0       0          0\n",
	})
	for pid, links := range map[string][]string{"200": {"/dev/null", "socket:[4711]"}, "201": {"pipe:[12]"}} {
		dir := filepath.Join(procRoot, pid, "fd")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, l := range links {
			if err := os.Symlink(l, filepath.Join(dir, fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	writeFiles(t, sysRoot, map[string]string{"dev/block/8:0/uevent": "MAJOR=8\nMINOR=0\nDEVNAME=sda\nDEVTYPE=disk\n"})
	// The machine: init's limits and interfaces, an ext4 mounted at base
	// and bound again below it (one filesystem), a tmpfs, a proc.
	mnt := filepath.Join(base, "mnt")
	if err := os.MkdirAll(filepath.Join(mnt, "bound"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, procRoot, map[string]string{
		"1/limits": "Max open files            1073741816           1073741816           files     \n",
		"1/net/dev": "h1\nh2\n    lo: 5 5 0 0 0 0 0 0 5 5 0 0 0 0 0 0\n  ens3: 9000 90 0 0 0 0 0 0 7000 70 0 0 0 0 0 0\n" +
			" veth1: 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1\n",
		"self/mountinfo": "25 1 8:1 / " + base + " rw,relatime shared:1 - ext4 /dev/sda1 rw\n" +
			"26 25 0:22 / " + filepath.Join(base, "proc") + " rw - proc proc rw\n" +
			"27 25 0:23 / " + mnt + " rw - tmpfs tmpfs rw\n" +
			"28 25 8:1 /sub " + filepath.Join(mnt, "bound") + " rw - ext4 /dev/sda1 rw\n",
		"diskstats": "   8       0 sda 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1\n   8       1 sda1 100 2 800 30 50 5 400 20 0 40 60 0 0 0 0\n",
	})
	mounts := map[string]string{}
	for _, c := range []string{"cpu", "cpuacct", "memory", "pids", "blkio"} {
		mounts[c] = filepath.Join(cgroupRoot, c)
	}
	cgm, err := cm.New(cm.Config{Host: cm.NewHost(cm.HostConfig{V1Mounts: mounts})})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC)
	sbx := &fakeSandboxes{sandboxes: []*runtimeapi.PodSandbox{{Id: "sb1", Labels: podLabels("uid-1", "web")}}}
	ctrLabels := func(name string) map[string]string {
		l := podLabels("uid-1", "web")
		l["io.kubernetes.container.name"] = name
		return l
	}
	rt := &fakeStats{containers: []*runtimeapi.Container{
		{Id: "c1", PodSandboxId: "sb1", Labels: ctrLabels("app"), Image: &runtimeapi.ImageSpec{Image: "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"}},
		{Id: "c2", PodSandboxId: "sb1", Labels: ctrLabels("exited")},
	}}
	h := newCadvisorHandler(cadvisorSource{containers: rt, sandboxes: sbx, sandboxImage: fakeImager("registry.k8s.io/pause:3.10"),
		cgroups: cgm, procRoot: procRoot, clock: clocktesting.NewFakePassiveClock(at)}, sysRoot)
	return h, sbx, at, mnt
}

func scrape(t *testing.T, h cadvisorHandler) map[string]*dto.MetricFamily {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics/cadvisor", nil))
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(w.Body.String()))
	if err != nil {
		t.Fatalf("not the Prometheus text format: %v\n%s", err, w.Body)
	}
	return fams
}

// series finds the series of a family whose labels include want.
func series(fams map[string]*dto.MetricFamily, name string, want map[string]string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range fams[name].GetMetric() {
		ok := true
		for k, v := range want {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			ok = ok && found
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	}
	return m.GetUntyped().GetValue()
}

// TestCadvisorMetrics scrapes the fixture node and checks, series by
// series, the families and labels the node e2e suite's ContainerMetrics
// spec asserts, with the values of the fixture's files.
func TestCadvisorMetrics(t *testing.T) {
	h, sbx, at, mnt := cadvisorFixture(t)
	fams := scrape(t, h)
	app := map[string]string{"container": "app", "namespace": "ns", "pod": "web", "id": "/kubepods/burstable/poduid-1/c1",
		"name": "c1", "image": "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"}
	sandbox := map[string]string{"container": "", "namespace": "ns", "pod": "web", "id": "/kubepods/burstable/poduid-1/sb1",
		"name": "sb1", "image": "registry.k8s.io/pause:3.10"}
	root := map[string]string{"container": "", "namespace": "", "pod": "", "id": "/", "name": "", "image": ""}
	podCg := map[string]string{"container": "", "namespace": "ns", "pod": "web", "id": "/kubepods/burstable/poduid-1", "name": "", "image": ""}
	with := func(base map[string]string, extra ...string) map[string]string {
		l := map[string]string{}
		for k, v := range base {
			l[k] = v
		}
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		return l
	}
	// The kubelet's cAdvisor has exported no CpuLoadMetrics since v1.37
	// (#139870).
	for _, gone := range []string{"container_cpu_load_average_10s", "container_cpu_load_d_average_10s", "container_tasks_state"} {
		if f, ok := fams[gone]; ok {
			t.Errorf("%s exported: %v", gone, f)
		}
	}
	for _, tc := range []struct {
		family string
		labels map[string]string
		want   float64
	}{
		{"container_last_seen", app, float64(at.Unix())},
		{"container_start_time_seconds", app, -1}, // checked below
		{"container_cpu_usage_seconds_total", with(app, "cpu", "total"), 2.5},
		{"container_cpu_user_seconds_total", app, 1.5},
		{"container_cpu_system_seconds_total", app, 0.5},
		{"container_memory_cache", app, 4096},
		{"container_memory_rss", app, 1048576},
		{"container_memory_mapped_file", app, 8192},
		{"container_memory_swap", app, 0},
		{"container_memory_failcnt", app, 0},
		{"container_memory_usage_bytes", app, 1200128},
		{"container_memory_max_usage_bytes", app, 2400256},
		{"container_memory_working_set_bytes", app, 1200128 - 4096},
		{"container_memory_failures_total", with(app, "failure_type", "pgfault", "scope", "container"), 300},
		{"container_memory_failures_total", with(app, "failure_type", "pgmajfault", "scope", "hierarchy"), 2},
		{"container_fs_reads_bytes_total", with(app, "device", "/dev/sda"), 40960},
		{"container_fs_writes_bytes_total", with(app, "device", "/dev/sda"), 4096},
		{"container_fs_reads_total", with(app, "device", "/dev/sda"), 10},
		{"container_fs_writes_total", with(app, "device", "/dev/sda"), 1},
		{"container_blkio_device_usage_total", with(app, "device", "/dev/sda", "major", "8", "minor", "0", "operation", "Read"), 40960},
		{"container_blkio_device_usage_total", with(app, "operation", "Total"), 45056},
		{"container_processes", app, 2},
		{"container_file_descriptors", app, 3},
		{"container_sockets", app, 1},
		{"container_threads", app, 3},
		{"container_threads_max", app, 0},
		{"container_ulimits_soft", with(app, "ulimit", "max_open_files"), 1048576}, // pid 200, the lowest
		{"container_oom_events_total", app, 2},
		{"container_spec_cpu_period", app, 100000},
		{"container_spec_cpu_shares", app, 2},
		{"container_spec_memory_limit_bytes", app, 79998976},
		{"container_spec_memory_reservation_limit_bytes", app, 0},
		{"container_spec_memory_swap_limit_bytes", app, 0},
		{"container_network_receive_bytes_total", with(sandbox, "interface", "eth0"), 2048},
		{"container_network_receive_packets_total", with(sandbox, "interface", "eth0"), 12},
		{"container_network_receive_errors_total", with(sandbox, "interface", "eth0"), 1},
		{"container_network_receive_packets_dropped_total", with(sandbox, "interface", "eth0"), 2},
		{"container_network_transmit_bytes_total", with(sandbox, "interface", "eth0"), 1024},
		{"container_network_transmit_packets_total", with(sandbox, "interface", "eth0"), 8},
		{"container_network_transmit_errors_total", with(sandbox, "interface", "eth0"), 3},
		{"container_network_transmit_packets_dropped_total", with(sandbox, "interface", "eth0"), 4},
		{"container_ulimits_soft", with(sandbox, "ulimit", "max_open_files"), -1},
		{"container_spec_memory_limit_bytes", podCg, 79998976},
		{"container_processes", podCg, 0},
		{"container_scrape_error", nil, 0},
		{"container_cpu_usage_seconds_total", with(root, "cpu", "total"), 2.5},
		{"container_processes", root, 1},
		{"container_ulimits_soft", with(root, "ulimit", "max_open_files"), 1073741816},
		{"container_network_receive_bytes_total", with(root, "interface", "ens3"), 9000},
		{"container_network_transmit_packets_total", with(root, "interface", "ens3"), 70},
		{"container_fs_reads_total", with(root, "device", "/dev/sda1"), 100},
		{"container_fs_reads_merged_total", with(root, "device", "/dev/sda1"), 2},
		{"container_fs_sector_reads_total", with(root, "device", "/dev/sda1"), 800},
		{"container_fs_read_seconds_total", with(root, "device", "/dev/sda1"), 30 / 1e9},
		{"container_fs_writes_total", with(root, "device", "/dev/sda1"), 50},
		{"container_fs_writes_merged_total", with(root, "device", "/dev/sda1"), 5},
		{"container_fs_sector_writes_total", with(root, "device", "/dev/sda1"), 400},
		{"container_fs_write_seconds_total", with(root, "device", "/dev/sda1"), 20 / 1e9},
		{"container_fs_io_current", with(root, "device", "/dev/sda1"), 0},
		{"container_fs_io_time_seconds_total", with(root, "device", "/dev/sda1"), 40 / 1e9},
		{"container_fs_io_time_weighted_seconds_total", with(root, "device", "/dev/sda1"), 60 / 1e9},
		{"container_fs_io_time_weighted_seconds_total", with(root, "device", mnt), 0},
		{"container_fs_limit_bytes", with(root, "device", "/dev/sda1"), -1},
		{"container_fs_usage_bytes", with(root, "device", "/dev/sda1"), -1},
		{"container_fs_inodes_total", with(root, "device", "/dev/sda1"), -1},
		{"container_fs_inodes_free", with(root, "device", "/dev/sda1"), -1},
	} {
		t.Run(tc.family+fmt.Sprint(tc.labels), func(t *testing.T) {
			got := series(fams, tc.family, tc.labels)
			if len(got) != 1 {
				t.Fatalf("%d series of %s with %v, want 1; family: %v", len(got), tc.family, tc.labels, fams[tc.family])
			}
			if tc.want >= -0.5 && value(got[0]) != tc.want {
				t.Errorf("%s = %v, want %v", tc.family, value(got[0]), tc.want)
			}
		})
	}

	t.Run("start time is the cgroup's", func(t *testing.T) {
		got := series(fams, "container_start_time_seconds", app)
		if len(got) != 1 || time.Since(time.Unix(int64(value(got[0])), 0)) > time.Hour {
			t.Errorf("start time %v: not the fixture cgroup's creation", got)
		}
	})
	t.Run("the root's filesystems: one per source, measured", func(t *testing.T) {
		if got := series(fams, "container_fs_limit_bytes", root); len(got) != 2 {
			t.Errorf("%d filesystems, want /dev/sda1 and the tmpfs (the bind mount is the same ext4, proc is none): %v", len(got), got)
		}
		for _, m := range series(fams, "container_fs_limit_bytes", root) {
			if value(m) <= 0 {
				t.Errorf("limit %v", m)
			}
		}
		if got := series(fams, "container_fs_reads_bytes_total", root); len(got) != 1 {
			t.Errorf("reads_bytes: the root's blkio device only, not the filesystems: %v", got)
		}
	})
	t.Run("no network for a container or a pod cgroup, no lo or veth", func(t *testing.T) {
		for _, l := range []map[string]string{app, podCg, with(sandbox, "interface", "lo"), with(root, "interface", "veth1")} {
			if got := series(fams, "container_network_receive_bytes_total", l); len(got) != 0 {
				t.Errorf("network series for %v: %v", l, got)
			}
		}
	})
	t.Run("a container without a cgroup is left out", func(t *testing.T) {
		if got := series(fams, "container_last_seen", map[string]string{"container": "exited"}); len(got) != 0 {
			t.Errorf("series for the exited container: %v", got)
		}
	})
	t.Run("stats are dated, specs are not", func(t *testing.T) {
		if ts := series(fams, "container_memory_rss", app)[0].GetTimestampMs(); ts != at.UnixMilli() {
			t.Errorf("timestamp %d, want %d", ts, at.UnixMilli())
		}
		if ts := series(fams, "container_spec_cpu_shares", app)[0].GetTimestampMs(); ts != 0 {
			t.Errorf("spec timestamp %d, want none", ts)
		}
	})
	t.Run("no quota, no cfs series", func(t *testing.T) {
		if _, ok := fams["container_cpu_cfs_periods_total"]; ok {
			t.Error("container_cpu_cfs_periods_total without a CFS quota")
		}
	})
	t.Run("the runtime is asked for crivk's ready sandboxes", func(t *testing.T) {
		f := sbx.filters[0]
		if f.GetState().GetState() != runtimeapi.PodSandboxState_SANDBOX_READY || f.GetLabelSelector()["io.crivk.managed-by"] != "crivk" {
			t.Errorf("filter %v", f)
		}
	})

	sbx.err = errors.New("runtime down")
	fams = scrape(t, h)
	if got := series(fams, "container_scrape_error", nil); len(got) != 1 || value(got[0]) != 1 {
		t.Errorf("a runtime failure is not a scrape error: %v", got)
	}
}

// TestReadProcFiles covers the /proc parsers on their edge cases.
func TestReadProcFiles(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"1/limits":  "Max open files            1024                 4096                 files     \n",
		"2/limits":  "Max open files            unlimited            unlimited            files     \n",
		"3/limits":  "Max processes             10                   10                   processes \n",
		"4/limits":  "Max open files            lots                 4096                 files     \n",
		"5/net/dev": "h1\nh2\n  eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n veth12: 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1\n",
		"6/net/dev": "h1\nh2\n  eth0: 1 2 3\n",
	})
	for name, x := range map[string]struct {
		pid  int
		want *int64
	}{
		"a number": {1, i64(1024)}, "unlimited": {2, i64(-1)}, "no open files line": {3, nil}, "garbage": {4, nil}, "no file": {9, nil},
	} {
		t.Run("limits "+name, func(t *testing.T) {
			got := readMaxOpenFiles(filepath.Join(root, fmt.Sprint(x.pid), "limits"))
			if (got == nil) != (x.want == nil) || (got != nil && *got != *x.want) {
				t.Errorf("got %v, want %v", got, x.want)
			}
		})
	}
	ifs, err := readNetDev(root, 5)
	if err != nil || len(ifs) != 1 || ifs[0] != (netIface{name: "eth0", rxBytes: 1, rxPackets: 2, rxErrors: 3, rxDropped: 4, txBytes: 9, txPackets: 10, txErrors: 11, txDropped: 12}) {
		t.Errorf("net/dev: %+v, %v", ifs, err)
	}
	if _, err := readNetDev(root, 6); err == nil {
		t.Error("a short line is no error")
	}
}

// readFilesystems: escaped mount points, one entry per source, tmpfs and
// overlay named as cAdvisor names them, unwanted types left out, the
// device's diskstats attached.
func TestReadFilesystems(t *testing.T) {
	root := t.TempDir()
	spaced := filepath.Join(root, "a b")
	if err := os.MkdirAll(spaced, 0o755); err != nil {
		t.Fatal(err)
	}
	esc := strings.ReplaceAll(spaced, " ", `\040`)
	writeFiles(t, root, map[string]string{
		"diskstats": "   8       1 sda1 1 2 3 4 5 6 7 8 9 10 11 0 0 0 0\n",
		"self/mountinfo": "20 1 8:1 / " + root + " rw - ext4 /dev/sda1 rw\n" +
			"21 20 8:1 / " + esc + " rw - ext4 /dev/sda1 rw\n" + // a bind mount of the same source
			"22 20 0:40 / " + esc + " rw - tmpfs tmpfs rw\n" +
			"23 20 0:41 / " + root + " rw - overlay overlay rw\n" +
			"24 20 0:4 / " + root + " rw - proc proc rw\n",
	})
	got, err := readFilesystems(root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range got {
		names = append(names, f.device)
	}
	if want := []string{"/dev/sda1", spaced, "overlay_0-41"}; fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("filesystems %q, want %q", names, want)
	}
	if got[0].disk[0] != 1 || got[0].disk[10] != 11 || got[0].capacity == 0 {
		t.Errorf("/dev/sda1: %+v, want its diskstats and a capacity", got[0])
	}
}

func i64(v int64) *int64 { return &v }
