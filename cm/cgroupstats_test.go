package cm

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// writeCgroup writes files (hierarchy -> file -> content) into the
// cgroup name of a temporary v1 tree.
func writeCgroup(t *testing.T, mounts map[string]string, name string, files map[string]map[string]string) {
	t.Helper()
	for ctrl, fs := range files {
		dir := filepath.Join(mounts[ctrl], name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, content := range fs {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// v1ContainerFiles is a container's cgroup on this machine's v1 layout
// (cpu and cpuacct apart, as here), with the values a busy BestEffort
// container with an 80M limit shows.
func v1ContainerFiles() map[string]map[string]string {
	return map[string]map[string]string{
		"cpu": {"cpu.shares": "2\n", "cpu.cfs_period_us": "100000\n", "cpu.cfs_quota_us": "-1\n", "cgroup.procs": "4242\n4250\n",
			"cpu.stat": "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n", "cgroup.clone_children": "0\n"},
		"cpuacct": {"cpuacct.usage": "2500000000\n", "cpuacct.stat": "user 150\nsystem 50\n", "cpuacct.usage_percpu": "1500000000 1000000000 \n"},
		"memory": {"memory.stat": "cache 4096\nrss 1048576\nmapped_file 8192\nswap 0\npgfault 300\npgmajfault 2\ntotal_cache 4096\ntotal_rss 1048576\ntotal_mapped_file 8192\ntotal_swap 0\ntotal_inactive_file 4096\ntotal_active_file 0\n",
			"memory.usage_in_bytes": "1200128\n", "memory.max_usage_in_bytes": "2400256\n", "memory.failcnt": "0\n",
			"memory.limit_in_bytes": "79998976\n", "memory.memsw.usage_in_bytes": "1200128\n", "memory.memsw.max_usage_in_bytes": "2400256\n",
			"memory.memsw.failcnt": "0\n", "memory.memsw.limit_in_bytes": "79998976\n", "memory.soft_limit_in_bytes": "9223372036854771712\n",
			"memory.use_hierarchy": "1\n", "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"},
		"pids":  {"pids.current": "3\n", "pids.max": "max\n"},
		"blkio": {"blkio.throttle.io_service_bytes_recursive": "8:0 Read 40960\n8:0 Write 4096\n8:0 Sync 45056\n8:0 Async 0\n8:0 Discard 0\n8:0 Total 45056\nTotal 45056\n", "blkio.throttle.io_serviced_recursive": "8:0 Read 10\n8:0 Write 1\n8:0 Total 11\nTotal 11\n"},
	}
}

func v1StatsTree(t *testing.T) (map[string]string, *Manager) {
	t.Helper()
	base := t.TempDir()
	mounts := map[string]string{}
	for _, c := range []string{"cpu", "cpuacct", "memory", "pids", "blkio"} {
		mounts[c] = filepath.Join(base, c)
	}
	m, err := New(Config{Root: "/", Host: NewHost(HostConfig{V1Mounts: mounts})})
	if err != nil {
		t.Fatal(err)
	}
	return mounts, m
}

// TestContainerCgroupSample reads a container's cgroup below a pod
// cgroup crivk has not synced since it started (found in its QoS class)
// as cAdvisor reads it: the library's statistics, the limits, the OOM
// kills, the processes and the creation time.
func TestContainerCgroupSample(t *testing.T) {
	mounts, m := v1StatsTree(t)
	const ctr = "abc123"
	name := "/kubepods/burstable/poduid-1/" + ctr
	writeCgroup(t, mounts, name, v1ContainerFiles())
	old := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(mounts["cpu"], name, "cgroup.clone_children"), old, old); err != nil {
		t.Fatal(err)
	}
	s, err := m.ContainerCgroupSample(types.UID("uid-1"), ctr)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != name {
		t.Errorf("name %q, want %q", s.Name, name)
	}
	want := CgroupSpec{HasCPU: true, CPUShares: 2, CPUPeriod: 100000, HasMemory: true, MemoryLimit: 79998976, MemorySwapLimit: 79998976,
		MemoryReservation: 9223372036854771712}
	if s.Spec != want {
		t.Errorf("spec %+v, want %+v", s.Spec, want)
	}
	if s.OOMKills != 3 {
		t.Errorf("OOM kills %d, want 3", s.OOMKills)
	}
	if !slices.Equal(s.Procs, []int{4242, 4250}) {
		t.Errorf("procs %v", s.Procs)
	}
	if !s.Created.Equal(old) {
		t.Errorf("created %v, want %v (the oldest of the directories and cgroup.clone_children)", s.Created, old)
	}
	st := s.Stats
	if st.CpuStats.CpuUsage.TotalUsage != 2500000000 || st.CpuStats.CpuUsage.UsageInUsermode == 0 || st.CpuStats.CpuUsage.UsageInKernelmode == 0 {
		t.Errorf("cpu %+v", st.CpuStats.CpuUsage)
	}
	if st.MemoryStats.Usage.Usage != 1200128 || st.MemoryStats.Usage.MaxUsage != 2400256 || st.MemoryStats.Stats["total_rss"] != 1048576 {
		t.Errorf("memory %+v", st.MemoryStats)
	}
	if st.PidsStats.Current != 3 || st.PidsStats.Limit != 0 {
		t.Errorf("pids %+v", st.PidsStats)
	}
	if len(st.BlkioStats.IoServiceBytesRecursive) == 0 {
		t.Errorf("no blkio %+v", st.BlkioStats)
	}
}

// TestCgroupSampleAbsent: a container or pod without a cgroup is an
// os.ErrNotExist, so the caller can tell "gone" from "unreadable".
func TestCgroupSampleAbsent(t *testing.T) {
	mounts, m := v1StatsTree(t)
	writeCgroup(t, mounts, "/kubepods/besteffort/poduid-2", map[string]map[string]string{"cpu": {"cgroup.procs": ""}})
	for name, read := range map[string]func() error{
		"container of a pod with a cgroup": func() error { _, err := m.ContainerCgroupSample("uid-2", "gone"); return err },
		"container of a pod without one":   func() error { _, err := m.ContainerCgroupSample("uid-3", "x"); return err },
		"pod without one":                  func() error { _, err := m.PodCgroupSample("uid-3"); return err },
	} {
		t.Run(name, func(t *testing.T) {
			if err := read(); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("err %v, want os.ErrNotExist", err)
			}
		})
	}
}

// TestReadSpec covers the limits' files of both versions, as cAdvisor's
// GetSpec reads them.
func TestReadSpec(t *testing.T) {
	for name, x := range map[string]struct {
		v2       bool
		cpu, mem map[string]string
		noCPU    bool
		want     CgroupSpec
	}{
		"v1 quota": {cpu: map[string]string{"cpu.shares": "512", "cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "50000"},
			mem:  map[string]string{"memory.limit_in_bytes": "1048576"},
			want: CgroupSpec{HasCPU: true, CPUShares: 512, CPUPeriod: 100000, CPUQuota: 50000, HasMemory: true, MemoryLimit: 1048576}},
		"v1 no quota": {cpu: map[string]string{"cpu.shares": "2", "cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "-1"},
			mem: map[string]string{}, want: CgroupSpec{HasCPU: true, CPUShares: 2, CPUPeriod: 100000, HasMemory: true}},
		"v1 no cpu hierarchy": {noCPU: true, mem: map[string]string{"memory.limit_in_bytes": "4096"},
			want: CgroupSpec{HasMemory: true, MemoryLimit: 4096}},
		"v2 max": {v2: true, cpu: map[string]string{"cpu.weight": "1", "cpu.max": "max 100000", "memory.max": "max", "memory.swap.max": "0", "memory.min": "0"},
			want: CgroupSpec{HasCPU: true, CPUShares: 2, CPUPeriod: 100000, HasMemory: true, MemoryLimit: math.MaxUint64}},
		"v2 quota": {v2: true, cpu: map[string]string{"cpu.weight": "10000", "cpu.max": "25000 100000", "memory.max": "83886080", "memory.min": "1024"},
			want: CgroupSpec{HasCPU: true, CPUShares: 262144, CPUPeriod: 100000, CPUQuota: 25000, HasMemory: true, MemoryLimit: 83886080, MemoryReservation: 1024}},
	} {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			cpuDir, memDir := filepath.Join(base, "cpu"), filepath.Join(base, "memory")
			if x.v2 {
				memDir = cpuDir
			}
			for _, d := range []struct {
				dir   string
				files map[string]string
			}{{cpuDir, x.cpu}, {memDir, x.mem}} {
				dir, files := d.dir, d.files
				if files == nil {
					continue
				}
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				for f, c := range files {
					if err := os.WriteFile(filepath.Join(dir, f), []byte(c+"\n"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			if x.noCPU {
				cpuDir = ""
			}
			if got := readSpec(cpuDir, memDir, x.v2); got != x.want {
				t.Errorf("spec %+v, want %+v", got, x.want)
			}
		})
	}
}

// TestRootCgroupSample reads the machine's root cgroup as cAdvisor's "/":
// a v1 root has no pids.current and no memory.limit files of its own in
// some hierarchies; what can be read is there, the rest is zero.
func TestRootCgroupSample(t *testing.T) {
	mounts, m := v1StatsTree(t)
	files := v1ContainerFiles()
	delete(files, "pids") // the v1 root has no pids.current nor pids.max
	delete(files["memory"], "memory.max_usage_in_bytes")
	writeCgroup(t, mounts, "/", files)
	s, err := m.RootCgroupSample()
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "/" || s.Stats.CpuStats.CpuUsage.TotalUsage != 2500000000 || !slices.Equal(s.Procs, []int{4242, 4250}) || s.OOMKills != 3 {
		t.Errorf("root sample %+v", s)
	}
	if s.Stats.MemoryStats.Usage.Usage != 0 {
		t.Errorf("memory read although memory.max_usage_in_bytes is missing: %+v", s.Stats.MemoryStats.Usage)
	}
	if s.Spec.CPUShares != 2 || s.Spec.MemoryLimit != 79998976 {
		t.Errorf("spec %+v", s.Spec)
	}
}
