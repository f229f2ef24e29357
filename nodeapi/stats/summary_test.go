package stats

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func TestSummary(t *testing.T) {
	at := time.Unix(1700000000, 0)
	web1 := ctrStats("c1", "web", "app", 3000, 100, at)
	web2 := ctrStats("c2", "web", "side", 2000, 50, at)
	web1.WritableLayer = &runtimeapi.FilesystemUsage{Timestamp: at.UnixNano(), UsedBytes: &runtimeapi.UInt64Value{Value: 4096}}
	for _, s := range []*runtimeapi.ContainerStats{web1, web2} {
		s.Attributes.Labels["io.kubernetes.pod.uid"] = "uid-web"
	}
	gone := ctrStats("x", "old", "x", 7, 7, at)
	f := &fakeStats{stats: []*runtimeapi.ContainerStats{web1, web2, gone},
		containers: []*runtimeapi.Container{{Id: "c1", CreatedAt: at.UnixNano()}, {Id: "c2", CreatedAt: at.UnixNano()}}}
	dir := t.TempDir()
	s := summary{
		runtime: f, nodeName: "n1", rootDir: dir, started: at,
		imageFs: func(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
			return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
				FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: dir}, UsedBytes: &runtimeapi.UInt64Value{Value: 777}}}}, nil
		},
		node:        func() nodeUsage { return nodeUsage{cpuSeconds: 2, workingSetBytes: 1000, at: at} },
		memCapacity: func() (int64, error) { return 4000, nil },
	}
	s.sandboxes = func(_ context.Context, f *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
		if f.GetLabelSelector()["io.crivk.managed-by"] != "crivk" {
			t.Errorf("sandbox stats filter %v, want crivk's sandboxes", f)
		}
		return []*runtimeapi.PodSandboxStats{{
			Attributes: &runtimeapi.PodSandboxAttributes{Metadata: &runtimeapi.PodSandboxMetadata{Uid: "uid-web"}},
			Linux: &runtimeapi.LinuxPodSandboxStats{Network: &runtimeapi.NetworkUsage{Timestamp: at.UnixNano(),
				DefaultInterface: &runtimeapi.NetworkInterfaceUsage{Name: "eth0", RxBytes: &runtimeapi.UInt64Value{Value: 111}, TxBytes: &runtimeapi.UInt64Value{Value: 222}},
				Interfaces:       []*runtimeapi.NetworkInterfaceUsage{{Name: "eth0", RxBytes: &runtimeapi.UInt64Value{Value: 111}, TxBytes: &runtimeapi.UInt64Value{Value: 222}}}}},
		}}, nil
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/stats/summary", nil))
	var got statsapi.Summary
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, w.Body.String())
	}
	n := got.Node
	if n.NodeName != "n1" || *n.CPU.UsageCoreNanoSeconds != 2e9 || *n.Memory.WorkingSetBytes != 1000 || *n.Memory.AvailableBytes != 3000 {
		t.Errorf("node stats %+v cpu %+v memory %+v", n, n.CPU, n.Memory)
	}
	if n.Fs == nil || *n.Fs.CapacityBytes == 0 || n.Runtime == nil || *n.Runtime.ImageFs.UsedBytes != 777 {
		t.Errorf("node filesystems %+v runtime %+v", n.Fs, n.Runtime)
	}
	if len(got.Pods) != 1 {
		t.Fatalf("pods %+v, want the running one", got.Pods)
	}
	p := got.Pods[0]
	if p.PodRef != (statsapi.PodReference{Name: "web", Namespace: "ns", UID: "uid-web"}) || len(p.Containers) != 2 {
		t.Errorf("pod %+v", p)
	}
	if *p.CPU.UsageCoreNanoSeconds != 5000 || *p.Memory.WorkingSetBytes != 150 || *p.EphemeralStorage.UsedBytes != 4096 {
		t.Errorf("pod sums cpu %d memory %d ephemeral %d", *p.CPU.UsageCoreNanoSeconds, *p.Memory.WorkingSetBytes, *p.EphemeralStorage.UsedBytes)
	}
	if nw := p.Network; nw == nil || nw.Name != "eth0" || *nw.RxBytes != 111 || *nw.TxBytes != 222 || len(nw.Interfaces) != 1 {
		t.Errorf("pod network %+v, want eth0 with 111/222 bytes", nw)
	}
	if c := p.Containers[0]; c.Name != "app" || *c.Rootfs.UsedBytes != 4096 || *c.CPU.UsageCoreNanoSeconds != 3000 {
		t.Errorf("container %+v", c)
	}
}

// TestSummaryFigures: the node's CPU rate (0 on the first summary, then
// the rate between summaries) and memory usage, RSS and page faults; a
// container's memory figures as the runtime reports them; the pod's CPU
// rate and memory figures summed over its containers, a figure a
// container lacks adding 0 (the kubelet's CRI stats provider).
func TestSummaryFigures(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	v := func(x uint64) *runtimeapi.UInt64Value { return &runtimeapi.UInt64Value{Value: x} }
	app := ctrStats("c1", "web", "app", 3000, 100, t0)
	app.Cpu.UsageNanoCores = v(40)
	app.Memory = &runtimeapi.MemoryUsage{Timestamp: t0.UnixNano(), WorkingSetBytes: v(100), UsageBytes: v(120), AvailableBytes: v(900),
		RssBytes: v(80), PageFaults: v(1000), MajorPageFaults: v(3)}
	layerFs := t.TempDir()
	app.WritableLayer = &runtimeapi.FilesystemUsage{Timestamp: t0.UnixNano(), FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: layerFs},
		UsedBytes: v(4096), InodesUsed: v(9)}
	side := ctrStats("c2", "web", "side", 2000, 50, t0) // no rate, rss, faults or available bytes
	for _, s := range []*runtimeapi.ContainerStats{app, side} {
		s.Attributes.Labels["io.kubernetes.pod.uid"] = "uid-web"
	}
	f := &fakeStats{stats: []*runtimeapi.ContainerStats{app, side},
		containers: []*runtimeapi.Container{{Id: "c1", CreatedAt: t0.UnixNano()}, {Id: "c2", CreatedAt: t0.UnixNano()}}}
	usage := nodeUsage{cpuSeconds: 2, workingSetBytes: 1000, usageBytes: 1500, rssBytes: 700, pageFaults: 5000, majorPageFaults: 12, at: t0}
	s := summary{
		runtime: f, nodeName: "n1", rootDir: t.TempDir(), started: t0, rates: newCPURates(),
		imageFs: func(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
			return &runtimeapi.ImageFsInfoResponse{}, nil
		},
		node:        func() nodeUsage { return usage },
		memCapacity: func() (int64, error) { return 4000, nil },
	}
	for i, x := range []struct {
		at        time.Duration
		cpuNs     uint64
		nanoCores uint64
	}{{0, 2e9, 0}, {4 * time.Second, 4e9, 5e8}} {
		usage.at, usage.cpuSeconds = t0.Add(x.at), float64(x.cpuNs)/1e9
		got, err := s.get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n := got.Node
		if n.CPU.UsageNanoCores == nil || *n.CPU.UsageNanoCores != x.nanoCores || *n.CPU.UsageCoreNanoSeconds != x.cpuNs {
			t.Errorf("summary %d: node cpu %+v, want %d ns at %d nanocores", i, n.CPU, x.cpuNs, x.nanoCores)
		}
		m := n.Memory
		if *m.UsageBytes != 1500 || *m.WorkingSetBytes != 1000 || *m.RSSBytes != 700 || *m.PageFaults != 5000 || *m.MajorPageFaults != 12 || *m.AvailableBytes != 3000 {
			t.Errorf("summary %d: node memory %+v", i, m)
		}
	}
	got, err := s.get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p := got.Pods[0]
	c := p.Containers[0]
	if cm := c.Memory; c.Name != "app" || *cm.UsageBytes != 120 || *cm.AvailableBytes != 900 || *cm.RSSBytes != 80 || *cm.PageFaults != 1000 ||
		*cm.MajorPageFaults != 3 || *c.CPU.UsageNanoCores != 40 {
		t.Errorf("container %s cpu %+v memory %+v", c.Name, c.CPU, c.Memory)
	}
	if r := c.Rootfs; r == nil || *r.UsedBytes != 4096 || *r.InodesUsed != 9 || r.CapacityBytes == nil || *r.CapacityBytes == 0 ||
		r.AvailableBytes == nil || r.Inodes == nil || r.InodesFree == nil {
		t.Errorf("container rootfs %+v, want the layer's 4096 bytes and 9 inodes on its filesystem's capacity", r)
	}
	if e, fs := p.EphemeralStorage, got.Node.Fs; e == nil || *e.UsedBytes != 4096 || *e.InodesUsed != 9 || e.CapacityBytes == nil || *e.CapacityBytes != *fs.CapacityBytes {
		t.Errorf("pod ephemeral storage %+v, want 4096 bytes, 9 inodes, the node filesystem's capacity %d", e, *fs.CapacityBytes)
	}
	if sm := p.Containers[1].Memory; sm.RSSBytes != nil || sm.PageFaults != nil || sm.AvailableBytes != nil {
		t.Errorf("container side memory %+v, want no figures the runtime did not give", sm)
	}
	pm := p.Memory
	if *p.CPU.UsageNanoCores != 40 || *p.CPU.UsageCoreNanoSeconds != 5000 || *pm.WorkingSetBytes != 150 || *pm.UsageBytes != 120 ||
		*pm.AvailableBytes != 900 || *pm.RSSBytes != 80 || *pm.PageFaults != 1000 || *pm.MajorPageFaults != 3 {
		t.Errorf("pod cpu %+v memory %+v", p.CPU, p.Memory)
	}
}

// TestSummarySandboxStatsOneByOne: containerd fails the whole
// ListPodSandboxStats when one sandbox's metrics fail (a pod being torn
// down); the running pods' sandboxes are then asked one by one, and the
// pods whose sandbox answers keep their network figures.
func TestSummarySandboxStatsOneByOne(t *testing.T) {
	at := time.Unix(1700000000, 0)
	web := ctrStats("c1", "web", "app", 3000, 100, at)
	web.Attributes.Labels["io.kubernetes.pod.uid"] = "uid-web"
	db := ctrStats("c2", "db", "app", 3000, 100, at)
	db.Attributes.Labels["io.kubernetes.pod.uid"] = "uid-db"
	f := &fakeStats{stats: []*runtimeapi.ContainerStats{web, db}, containers: []*runtimeapi.Container{
		{Id: "c1", PodSandboxId: "sb-web", CreatedAt: at.UnixNano()},
		{Id: "c2", PodSandboxId: "sb-db", CreatedAt: at.UnixNano()},
		{Id: "c3", PodSandboxId: "sb-web", CreatedAt: at.UnixNano()},
	}}
	s := summary{
		runtime: f, nodeName: "n1", rootDir: t.TempDir(), started: at,
		imageFs: func(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
			return &runtimeapi.ImageFsInfoResponse{}, nil
		},
		node:        func() nodeUsage { return nodeUsage{cpuSeconds: 2, workingSetBytes: 1000, at: at} },
		memCapacity: func() (int64, error) { return 4000, nil },
	}
	var asked []string
	s.sandboxes = func(_ context.Context, f *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
		asked = append(asked, f.GetId())
		if f.GetLabelSelector()["io.crivk.managed-by"] != "crivk" {
			t.Errorf("sandbox stats filter %v, want crivk's sandboxes", f)
		}
		switch f.GetId() {
		case "sb-web":
			return []*runtimeapi.PodSandboxStats{{
				Attributes: &runtimeapi.PodSandboxAttributes{Id: "sb-web", Metadata: &runtimeapi.PodSandboxMetadata{Uid: "uid-web"}},
				Linux: &runtimeapi.LinuxPodSandboxStats{Network: &runtimeapi.NetworkUsage{Timestamp: at.UnixNano(),
					DefaultInterface: &runtimeapi.NetworkInterfaceUsage{Name: "eth0", RxBytes: &runtimeapi.UInt64Value{Value: 111}}}},
			}}, nil
		case "sb-db":
			return nil, errors.New(`failed to decode sandbox container metrics for sandbox "sb-db": cgroups: cgroup deleted`)
		default:
			return nil, errors.New(`failed to decode sandbox container metrics for sandbox "sb-gone": cgroups: cgroup deleted`)
		}
	}
	got, err := s.get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"", "sb-web", "sb-db"}; !slices.Equal(asked, want) {
		t.Errorf("sandboxes asked %q, want %q (the list, then each running pod's sandbox once)", asked, want)
	}
	for _, p := range got.Pods {
		switch p.PodRef.UID {
		case "uid-web":
			if p.Network == nil || p.Network.Name != "eth0" || *p.Network.RxBytes != 111 {
				t.Errorf("web's network %+v, want eth0 with 111 bytes received", p.Network)
			}
		case "uid-db":
			if p.Network != nil {
				t.Errorf("db's network %+v, want none (its sandbox's stats failed)", p.Network)
			}
		}
	}
	if len(got.Pods) != 2 {
		t.Errorf("pods %+v, want web and db", got.Pods)
	}
}
