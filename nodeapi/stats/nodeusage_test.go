package stats

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/crivk/crivk/cm"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestNodeMemoryAvailable: the summary's node memory, and so the
// eviction manager's memory.available, on both cgroup versions, from the
// root cgroup as package cm reads it: available = the machine's memory
// (MemTotal) less the root's working set. On v2 the root has no
// memory.current: the usage is anon + file of its memory.stat, as
// opencontainers/cgroups gives cAdvisor (and so the kubelet) the root's.
func TestNodeMemoryAvailable(t *testing.T) {
	const memTotal = 8 << 30
	at := time.Unix(1700000000, 0)
	for name, x := range map[string]struct {
		v2                    bool
		files                 map[string]string
		cpuNs, usage, ws, rss uint64
	}{
		"cgroup v1": {files: map[string]string{"cpuacct/cpuacct.usage": "2500000000\n", "memory/memory.usage_in_bytes": "3221225472\n",
			"memory/memory.stat": "total_rss 2147483648\ntotal_inactive_file 1073741824\npgfault 10\npgmajfault 1\n"},
			cpuNs: 2500000000, usage: 3 << 30, ws: 2 << 30, rss: 2 << 30},
		"cgroup v2": {v2: true, files: map[string]string{"cpu.stat": "usage_usec 2500000\n",
			"memory.stat": "anon 2147483648\nfile 1073741824\ninactive_file 536870912\npgfault 10\npgmajfault 1\n"},
			cpuNs: 2500000000, usage: 3 << 30, ws: 3<<30 - 512<<20, rss: 2 << 30},
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
			host := cm.NewHost(cm.HostConfig{V1Mounts: map[string]string{"cpuacct": filepath.Join(root, "cpuacct"), "memory": filepath.Join(root, "memory")}})
			if x.v2 {
				host = cm.NewHost(cm.HostConfig{V2Mount: root})
			}
			dir := t.TempDir()
			s := summary{runtime: &fakeStats{}, nodeName: "n1", rootDir: dir, started: at, rates: newCPURates(),
				imageFs: func(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
					return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: dir}}}}, nil
				},
				node:        func() nodeUsage { return readNodeUsage(host, at) },
				memCapacity: func() (int64, error) { return memTotal, nil },
			}
			got, err := s.get(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			m, c := got.Node.Memory, got.Node.CPU
			if m == nil || m.AvailableBytes == nil || m.WorkingSetBytes == nil || m.UsageBytes == nil || m.RSSBytes == nil {
				t.Fatalf("node memory %+v, want every figure", m)
			}
			if *m.UsageBytes != x.usage || *m.WorkingSetBytes != x.ws || *m.RSSBytes != x.rss || *m.AvailableBytes != memTotal-x.ws ||
				*m.PageFaults != 10 || *m.MajorPageFaults != 1 {
				t.Errorf("node memory usage %d ws %d rss %d available %d faults %d/%d; want %d %d %d %d 10/1", *m.UsageBytes, *m.WorkingSetBytes,
					*m.RSSBytes, *m.AvailableBytes, *m.PageFaults, *m.MajorPageFaults, x.usage, x.ws, x.rss, memTotal-x.ws)
			}
			if c == nil || c.UsageCoreNanoSeconds == nil || *c.UsageCoreNanoSeconds != x.cpuNs {
				t.Errorf("node CPU %+v, want %d ns", c, x.cpuNs)
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
