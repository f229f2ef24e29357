package stats

import (
	"context"
	"encoding/json"
	"net/http/httptest"
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
