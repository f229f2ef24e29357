package cm

import (
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestPodCgroupConfig reads a pod cgroup's values back as the kubelet's
// GetPodCgroupConfig does (the pod status' resources): what EnsurePod
// wrote, the kernel's "no limit" as -1 (quota) and 0 (memory), on cgroup
// v1 and v2, and an error for a pod without a cgroup.
func TestPodCgroupConfig(t *testing.T) {
	type values struct{ shares, quota, period, memory int64 }
	write := func(t *testing.T, dir string, files map[string]string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, v := range files {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(t *testing.T, m *Manager, p *v1.Pod, want values) {
		t.Helper()
		shares, quota, period, memory, err := m.PodCgroupConfig(p)
		if got := (values{shares, quota, period, memory}); err != nil || got != want {
			t.Errorf("PodCgroupConfig(%s) = %+v, %v; want %+v", p.Name, got, err, want)
		}
	}

	t.Run("v1", func(t *testing.T) {
		mounts, m := v1Tree(t)
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
		if err := m.EnsurePod(guaranteed); err != nil {
			t.Fatal(err)
		}
		// The library writes only what it sets; the kernel has a period.
		write(t, filepath.Join(mounts["cpu"], "crivk/kubepods/podg"), map[string]string{"cpu.cfs_period_us": "100000"})
		check(t, m, guaranteed, values{768, 75000, 100000, 96 << 20})
		// A BestEffort pod: the kernel's values for no limit.
		write(t, filepath.Join(mounts["cpu"], "crivk/kubepods/besteffort/podbe"),
			map[string]string{"cpu.shares": "2", "cpu.cfs_quota_us": "-1", "cpu.cfs_period_us": "100000"})
		write(t, filepath.Join(mounts["memory"], "crivk/kubepods/besteffort/podbe"),
			map[string]string{"memory.limit_in_bytes": "9223372036854771712"})
		check(t, m, besteffort, values{2, -1, 100000, 0})
		if _, _, _, _, err := m.PodCgroupConfig(burstable); err == nil {
			t.Errorf("PodCgroupConfig of a pod without a cgroup: no error")
		}
	})

	t.Run("v2", func(t *testing.T) {
		base := t.TempDir()
		m, err := New(Config{Host: NewHost(HostConfig{V2Mount: base})})
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(base, "kubepods/podg"), map[string]string{"cpu.weight": "30", "cpu.max": "75000 100000", "memory.max": "100663296"})
		// cpu.weight 30 is 768 shares' weight; back to shares it is 762,
		// the kubelet's lossy round trip.
		check(t, m, guaranteed, values{762, 75000, 100000, 96 << 20})
		write(t, filepath.Join(base, "kubepods/besteffort/podbe"), map[string]string{"cpu.weight": "1", "cpu.max": "max 100000", "memory.max": "max"})
		check(t, m, besteffort, values{2, -1, 100000, 0})
	})
}
