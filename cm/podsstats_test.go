package cm

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestPodsMemory reads kubepods' memory files on temporary v1 and v2
// trees: usage, working set (usage - inactive file, floored at 0) and
// limit (0 when unlimited), as cAdvisor reads them for the kubelet's
// "pods" system container.
func TestPodsMemory(t *testing.T) {
	const gib = 1 << 30
	for name, x := range map[string]struct {
		v2               bool
		files            map[string]string // file in kubepods' memory directory -> content; nil: none written
		usage, ws, limit uint64
		wantErr          bool
	}{
		"v1 limited": {files: map[string]string{"memory.usage_in_bytes": "3221225472", "memory.limit_in_bytes": "8589934592",
			"memory.stat": "cache 5\ntotal_cache 9\ntotal_inactive_file 1073741824\n"}, usage: 3 * gib, ws: 2 * gib, limit: 8 * gib},
		"v1 unlimited": {files: map[string]string{"memory.usage_in_bytes": "1073741824", "memory.limit_in_bytes": "9223372036854771712",
			"memory.stat": "total_inactive_file 0\n"}, usage: gib, ws: gib},
		"v1 inactive above usage": {files: map[string]string{"memory.usage_in_bytes": "100", "memory.limit_in_bytes": "1000",
			"memory.stat": "total_inactive_file 200\n"}, usage: 100, ws: 0, limit: 1000},
		"v1 no usage file": {files: map[string]string{"memory.limit_in_bytes": "1000", "memory.stat": ""}, wantErr: true},
		"v2 limited": {v2: true, files: map[string]string{"memory.current": "3221225472", "memory.max": "4294967296",
			"memory.stat": "anon 1\nfile 2\ninactive_file 536870912\n"}, usage: 3 * gib, ws: 3*gib - gib/2, limit: 4 * gib},
		"v2 max": {v2: true, files: map[string]string{"memory.current": "10", "memory.max": "max", "memory.stat": "inactive_file 4\n"},
			usage: 10, ws: 6},
	} {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			cfg := Config{Root: "/crivk"}
			dir := filepath.Join(base, "crivk", "kubepods")
			if x.v2 {
				cfg.Host = NewHost(HostConfig{V2Mount: base})
			} else {
				cfg.Host = NewHost(HostConfig{V1Mounts: map[string]string{"memory": filepath.Join(base, "memory"), "cpu": filepath.Join(base, "cpu")}})
				dir = filepath.Join(base, "memory", "crivk", "kubepods")
			}
			m, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for f, c := range x.files {
				if err := os.WriteFile(filepath.Join(dir, f), []byte(c), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := m.PodsDir("memory"); err != nil || got != dir {
				t.Errorf("PodsDir(memory) = %q, %v; want %q", got, err, dir)
			}
			usage, ws, limit, err := m.PodsMemory()
			if x.wantErr {
				if err == nil {
					t.Fatalf("no error; got %d %d %d", usage, ws, limit)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if usage != x.usage || ws != x.ws || limit != x.limit {
				t.Errorf("usage %d working set %d limit %d, want %d %d %d", usage, ws, limit, x.usage, x.ws, x.limit)
			}
		})
	}
}

// TestPodsCgroupSample reads kubepods whole on a temporary v1 tree (the
// machine's layout, as the container samples): the cumulative CPU time
// and memory.stat the "pods" system container's CPU, RSS and page faults
// come from; a kubepods not made yet is os.ErrNotExist.
func TestPodsCgroupSample(t *testing.T) {
	mounts, m := v1StatsTree(t)
	if _, err := m.PodsCgroupSample(); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("before kubepods exists: %v, want os.ErrNotExist", err)
	}
	writeCgroup(t, mounts, "/kubepods", v1ContainerFiles())
	s, err := m.PodsCgroupSample()
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "/kubepods" || !s.Spec.HasCPU || !s.Spec.HasMemory {
		t.Errorf("name %q spec %+v, want /kubepods with cpu and memory", s.Name, s.Spec)
	}
	mem := s.Stats.MemoryStats
	if s.Stats.CpuStats.CpuUsage.TotalUsage != 2500000000 || !mem.UseHierarchy || mem.Stats["total_rss"] != 1048576 ||
		mem.Stats["pgfault"] != 300 || mem.Stats["pgmajfault"] != 2 {
		t.Errorf("cpu %d memory %+v", s.Stats.CpuStats.CpuUsage.TotalUsage, mem)
	}
}
