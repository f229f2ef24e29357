package cm

import (
	"os"
	"path/filepath"
	"testing"
)

// writeTree writes files (path below base -> content) into base.
func writeTree(t *testing.T, base string, files map[string]string) {
	t.Helper()
	for p, data := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(base, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(base, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNodeUsage reads the root cgroup on temporary v1 and v2 trees as
// cAdvisor reads its root container "/": on v1 cpuacct.usage, the usage,
// working set (usage less total_inactive_file), RSS (total_rss, or rss
// when use_hierarchy is 0) and the root's own pgfault and pgmajfault; on
// v2 usage_usec of cpu.stat, and, where the root has no memory.current,
// anon + file of memory.stat as the usage (opencontainers/cgroups'
// rootStatsFromMeminfo), less inactive_file as the working set, anon as
// the RSS.
func TestNodeUsage(t *testing.T) {
	const v1Stat = "rss 100\npgfault 5000\npgmajfault 12\ntotal_rss 700000\ntotal_pgfault 900000\ntotal_pgmajfault 80\ntotal_inactive_file 250000\n"
	// A v2 root's memory.stat (kernel 6.1, abridged): anon + file is the
	// usage the kernel would charge, 3 GiB + 1 GiB here.
	const v2Stat = "anon 3221225472\nfile 1073741824\nkernel 104857600\nshmem 1048576\nfile_mapped 52428800\n" +
		"inactive_anon 4096\nactive_anon 3221221376\ninactive_file 805306368\nactive_file 268435456\npgfault 91234\npgmajfault 321\n"
	for name, x := range map[string]struct {
		v2         bool
		files      map[string]string
		want       NodeMemory
		cpu        uint64
		wantMemErr bool
		wantCPUErr bool
	}{
		"v1 hierarchical": {files: map[string]string{"cpuacct/cpuacct.usage": "2500000000\n", "memory/memory.usage_in_bytes": "1000000\n",
			"memory/memory.stat": v1Stat, "memory/memory.use_hierarchy": "1\n"},
			want: NodeMemory{Usage: 1000000, WorkingSet: 750000, RSS: 700000, PageFaults: 5000, MajorPageFaults: 12}, cpu: 2500000000},
		"v1 no use_hierarchy file": {files: map[string]string{"memory/memory.usage_in_bytes": "1000000\n", "memory/memory.stat": v1Stat},
			want: NodeMemory{Usage: 1000000, WorkingSet: 750000, RSS: 700000, PageFaults: 5000, MajorPageFaults: 12}, wantCPUErr: true},
		"v1 flat": {files: map[string]string{"memory/memory.usage_in_bytes": "1000000\n", "memory/memory.stat": v1Stat, "memory/memory.use_hierarchy": "0\n"},
			want: NodeMemory{Usage: 1000000, WorkingSet: 750000, RSS: 100, PageFaults: 5000, MajorPageFaults: 12}, wantCPUErr: true},
		"v1 no memory.stat":         {files: map[string]string{"memory/memory.usage_in_bytes": "1\n"}, wantMemErr: true, wantCPUErr: true},
		"v1 no total_inactive_file": {files: map[string]string{"memory/memory.usage_in_bytes": "1\n", "memory/memory.stat": "rss 1\n"}, wantMemErr: true, wantCPUErr: true},
		"v2 root: no memory.current": {v2: true, files: map[string]string{"cpu.stat": "usage_usec 7250000\nuser_usec 5000000\nsystem_usec 2250000\n",
			"memory.stat": v2Stat},
			want: NodeMemory{Usage: 4 << 30, WorkingSet: 4<<30 - 805306368, RSS: 3221225472, PageFaults: 91234, MajorPageFaults: 321}, cpu: 7250000000},
		"v2 namespaced root with memory.current": {v2: true, files: map[string]string{"cpu.stat": "usage_usec 1\n",
			"memory.current": "5000000000\n", "memory.stat": v2Stat},
			want: NodeMemory{Usage: 5000000000, WorkingSet: 5000000000 - 805306368, RSS: 3221225472, PageFaults: 91234, MajorPageFaults: 321}, cpu: 1000},
		"v2 inactive above usage": {v2: true, files: map[string]string{"cpu.stat": "usage_usec 1\n", "memory.stat": "anon 10\nfile 20\ninactive_file 40\n"},
			want: NodeMemory{Usage: 30, WorkingSet: 0, RSS: 10}, cpu: 1000},
		"v2 no inactive_file": {v2: true, files: map[string]string{"memory.stat": "anon 10\nfile 20\n"}, wantMemErr: true, wantCPUErr: true},
		"v2 no usage_usec":    {v2: true, files: map[string]string{"cpu.stat": "user_usec 1\n", "memory.stat": "inactive_file 0\n"}, wantCPUErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			writeTree(t, base, x.files)
			cfg := HostConfig{V1Mounts: map[string]string{"cpuacct": filepath.Join(base, "cpuacct"), "memory": filepath.Join(base, "memory")}}
			if x.v2 {
				cfg = HostConfig{V2Mount: base}
			}
			u := NewHost(cfg).NodeUsage()
			if (u.MemoryErr != nil) != x.wantMemErr {
				t.Fatalf("memory error %v, want error: %v", u.MemoryErr, x.wantMemErr)
			}
			if (u.CPUErr != nil) != x.wantCPUErr {
				t.Fatalf("CPU error %v, want error: %v", u.CPUErr, x.wantCPUErr)
			}
			if !x.wantMemErr && u.Memory != x.want {
				t.Errorf("memory %+v, want %+v", u.Memory, x.want)
			}
			if !x.wantCPUErr && u.CPU != x.cpu {
				t.Errorf("CPU %d ns, want %d", u.CPU, x.cpu)
			}
		})
	}
}

// TestHostVersionAndMemcg: the version the filesystem chooses, and the
// root memory cgroup of the threshold notification, which v2 has none of.
func TestHostVersionAndMemcg(t *testing.T) {
	base := t.TempDir()
	v1 := NewHost(HostConfig{V1Mounts: map[string]string{"memory": filepath.Join(base, "memory")}})
	if v1.Version() != 1 || v1.MemcgDir() != filepath.Join(base, "memory") {
		t.Errorf("v1: version %d, memcg %q", v1.Version(), v1.MemcgDir())
	}
	if noMem := NewHost(HostConfig{V1Mounts: map[string]string{"cpu": base}}); noMem.MemcgDir() != "" {
		t.Errorf("v1 without memory: memcg %q, want none", noMem.MemcgDir())
	}
	v2 := NewHost(HostConfig{V2Mount: base})
	if v2.Version() != 2 || v2.MemcgDir() != "" {
		t.Errorf("v2: version %d, memcg %q; want 2 and none", v2.Version(), v2.MemcgDir())
	}
}

// TestSwapAccounting: the kubelet's checkSwapControllerAvailability on a
// fake cgroup mount: v1, memory.memsw.limit_in_bytes of the root memory
// cgroup; v2, memory.swap.max of the process' own cgroup.
func TestSwapAccounting(t *testing.T) {
	for name, tc := range map[string]struct {
		v2         bool
		files      []string // below the cgroup mount
		selfCgroup string   // "": no /proc/self/cgroup
		want       bool
	}{
		"v1 with swap accounting": {files: []string{"memory/memory.memsw.limit_in_bytes"}, want: true},
		"v1 without":              {files: []string{"memory/memory.limit_in_bytes"}},
		"v2, own cgroup has memory.swap.max": {v2: true, files: []string{"system.slice/crivk.service/memory.swap.max"},
			selfCgroup: "0::/system.slice/crivk.service\n", want: true},
		"v2, only the root's would": {v2: true, files: []string{"memory.swap.max"}, selfCgroup: "0::/system.slice/crivk.service\n"},
		"v2, own cgroup unreadable": {v2: true, files: []string{"system.slice/crivk.service/memory.swap.max"}},
	} {
		t.Run(name, func(t *testing.T) {
			root, proc := t.TempDir(), t.TempDir()
			files := map[string]string{}
			for _, f := range tc.files {
				files[f] = "max\n"
			}
			writeTree(t, root, files)
			if tc.selfCgroup != "" {
				writeTree(t, proc, map[string]string{"self/cgroup": tc.selfCgroup})
			}
			cfg := HostConfig{V1Mounts: map[string]string{"memory": filepath.Join(root, "memory")}, ProcRoot: proc}
			if tc.v2 {
				cfg = HostConfig{V2Mount: root, ProcRoot: proc}
			}
			if got := NewHost(cfg).SwapAccounting(); got != tc.want {
				t.Errorf("SwapAccounting = %v, want %v", got, tc.want)
			}
		})
	}
}
