package stats

import (
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// TestPodEphemeralStorage: a pod's ephemeral storage is its writable
// layers, its containers' logs and its local ephemeral volumes (emptyDir
// on disk, configMap), as the kubelet's; a secret volume is not.
func TestPodEphemeralStorage(t *testing.T) {
	root := t.TempDir()
	write := func(path string, n int) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	logs := filepath.Join(root, "logs")
	write(filepath.Join(logs, "ns_web_uid-1", "app", "0.log"), 64<<10)
	vols := filepath.Join(root, "pods", "uid-1", "volumes")
	write(filepath.Join(vols, "kubernetes.io~empty-dir", "scratch", "f"), 128<<10)
	write(filepath.Join(vols, "kubernetes.io~secret", "token", "f"), 32<<10)
	v := newVolumeStats(root)
	layer := uint64(4096)
	p := statsapi.PodStats{PodRef: statsapi.PodReference{Namespace: "ns", Name: "web", UID: "uid-1"},
		Containers:       []statsapi.ContainerStats{{Name: "app", Rootfs: &statsapi.FsStats{UsedBytes: &layer}}},
		EphemeralStorage: &statsapi.FsStats{UsedBytes: ptrTo(layer)}}
	p.VolumeStats = v.forPod("uid-1")
	rootFs := statfs(root, statsapiTime())
	addLogs(&p, logs, rootFs)
	addEphemeralVolumes(&p, v.localEphemeral("uid-1"))
	if c := p.Containers[0].Logs; c == nil || *c.UsedBytes < 64<<10 || c.CapacityBytes != rootFs.CapacityBytes || c.InodesFree != rootFs.InodesFree {
		t.Fatalf("container logs %+v, want at least 64Ki on the root filesystem's capacity and inodes", c)
	}
	var vol uint64
	for _, s := range p.VolumeStats {
		if s.Name == "scratch" {
			vol = *s.UsedBytes
		}
	}
	want := layer + *p.Containers[0].Logs.UsedBytes + vol
	if got := *p.EphemeralStorage.UsedBytes; got != want || vol < 128<<10 {
		t.Errorf("ephemeral storage %d, want layer %d + logs %d + emptyDir %d = %d (the secret not counted)", got, layer, *p.Containers[0].Logs.UsedBytes, vol, want)
	}
}

func TestReadRlimit(t *testing.T) {
	root := t.TempDir()
	for f, data := range map[string]string{"sys/kernel/pid_max": "4194304\n", "sys/kernel/threads-max": "100000\n", "loadavg": "1.00 0.50 0.25 4/777 1234\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, f), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := readRlimit(root, statsapiTime())
	if r.MaxPID == nil || *r.MaxPID != 100000 || r.NumOfRunningProcesses == nil || *r.NumOfRunningProcesses != 777 {
		t.Errorf("rlimit %+v, want max 100000 (threads-max below pid_max), 777 tasks", r)
	}
}

func ptrTo(v uint64) *uint64 { return &v }

func statsapiTime() metav1.Time { return metav1.Now() }
