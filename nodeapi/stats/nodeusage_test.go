package stats

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
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

// TestNodeNetwork: the summary's node network is init's interfaces that
// cAdvisor keeps (no lo, veth...), eth0 the default one, none without
// eth0; the containers' filesystem is the image filesystem.
func TestNodeNetwork(t *testing.T) {
	at := time.Unix(1700000000, 0)
	for name, x := range map[string]struct {
		netDev      string
		wantDefault string
		wantIfaces  []string
	}{
		"eth0": {netDev: "h1\nh2\n    lo: 5 5 0 0 0 0 0 0 5 5 0 0 0 0 0 0\n  eth0: 9000 90 2 0 0 0 0 0 7000 70 1 0 0 0 0 0\n veth1: 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1\n",
			wantDefault: "eth0", wantIfaces: []string{"eth0"}},
		"ens3, no default": {netDev: "h1\nh2\n  ens3: 9000 90 0 0 0 0 0 0 7000 70 0 0 0 0 0 0\n", wantIfaces: []string{"ens3"}},
	} {
		t.Run(name, func(t *testing.T) {
			proc := t.TempDir()
			if err := os.MkdirAll(filepath.Join(proc, "1", "net"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(proc, "1", "net", "dev"), []byte(x.netDev), 0o644); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			s := summary{runtime: &fakeStats{}, nodeName: "n1", rootDir: dir, started: at, procRoot: proc,
				imageFs: func(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
					return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: dir}}}}, nil
				},
				node:        func() nodeUsage { return nodeUsage{at: at} },
				memCapacity: func() (int64, error) { return 4000, nil },
			}
			got, err := s.get(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			n := got.Node.Network
			if n == nil || n.Name != x.wantDefault || len(n.Interfaces) != len(x.wantIfaces) {
				t.Fatalf("node network %+v, want default %q and %v", n, x.wantDefault, x.wantIfaces)
			}
			for i, it := range n.Interfaces {
				if it.Name != x.wantIfaces[i] || it.RxBytes == nil || *it.RxBytes != 9000 || *it.TxBytes != 7000 {
					t.Errorf("interface %d %+v, want %s with 9000/7000 bytes", i, it, x.wantIfaces[i])
				}
			}
			if x.wantDefault != "" && (*n.RxErrors != 2 || *n.TxErrors != 1) {
				t.Errorf("default interface errors %d/%d, want 2/1", *n.RxErrors, *n.TxErrors)
			}
			if r := got.Node.Runtime; r == nil || r.ContainerFs == nil || r.ContainerFs != r.ImageFs {
				t.Errorf("runtime %+v, want the containers' filesystem to be the image filesystem", r)
			}
		})
	}
}
