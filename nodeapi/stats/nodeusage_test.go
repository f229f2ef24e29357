package stats

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestReadNodeUsage reads the root cgroup's files on a temporary v1 tree
// as cAdvisor reads its root container: usage, working set (usage less
// total_inactive_file), RSS (total_rss, or rss when use_hierarchy is 0)
// and the cgroup's own pgfault and pgmajfault.
func TestReadNodeUsage(t *testing.T) {
	const stat = "rss 100\npgfault 5000\npgmajfault 12\ntotal_rss 700000\ntotal_pgfault 900000\ntotal_pgmajfault 80\ntotal_inactive_file 250000\n"
	for name, x := range map[string]struct {
		files                         map[string]string
		usage, ws, rss, faults, major uint64
		cpuSeconds                    float64
		wantMemErr                    bool
	}{
		"hierarchical": {files: map[string]string{"cpuacct/cpuacct.usage": "2500000000\n", "memory/memory.usage_in_bytes": "1000000\n",
			"memory/memory.stat": stat, "memory/memory.use_hierarchy": "1\n"},
			usage: 1000000, ws: 750000, rss: 700000, faults: 5000, major: 12, cpuSeconds: 2.5},
		"no use_hierarchy file": {files: map[string]string{"memory/memory.usage_in_bytes": "1000000\n", "memory/memory.stat": stat},
			usage: 1000000, ws: 750000, rss: 700000, faults: 5000, major: 12},
		"flat": {files: map[string]string{"memory/memory.usage_in_bytes": "1000000\n", "memory/memory.stat": stat, "memory/memory.use_hierarchy": "0\n"},
			usage: 1000000, ws: 750000, rss: 100, faults: 5000, major: 12},
		"no memory.stat":         {files: map[string]string{"memory/memory.usage_in_bytes": "1\n"}, wantMemErr: true},
		"no total_inactive_file": {files: map[string]string{"memory/memory.usage_in_bytes": "1\n", "memory/memory.stat": "rss 1\n"}, wantMemErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			for p, data := range x.files {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, p), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			u := readNodeUsage(root, time.Unix(1700000000, 0))
			if (u.memError != nil) != x.wantMemErr {
				t.Fatalf("memory error %v, want error: %v", u.memError, x.wantMemErr)
			}
			if x.wantMemErr {
				return
			}
			if u.usageBytes != x.usage || u.workingSetBytes != x.ws || u.rssBytes != x.rss || u.pageFaults != x.faults || u.majorPageFaults != x.major {
				t.Errorf("usage %d ws %d rss %d faults %d major %d, want %d %d %d %d %d", u.usageBytes, u.workingSetBytes, u.rssBytes,
					u.pageFaults, u.majorPageFaults, x.usage, x.ws, x.rss, x.faults, x.major)
			}
			if x.cpuSeconds != 0 && (u.cpuErr != nil || u.cpuSeconds != x.cpuSeconds) {
				t.Errorf("cpu %v s (%v), want %v", u.cpuSeconds, u.cpuErr, x.cpuSeconds)
			}
		})
	}
}
