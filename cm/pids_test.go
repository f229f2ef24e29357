package cm

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestPodPidsLimit: with --pod-max-pids N > 0 every pod cgroup gets
// pids.max N whatever its class, and none otherwise (-1, the kubelet's
// default, and 0); kubepods gets the node's pid capacity less the
// reservations (Config.PodsPIDs), as the kubelet's node allocatable cgroup.
func TestPodPidsLimit(t *testing.T) {
	tests := map[string]struct {
		podLimit, podsPIDs int64
		wantPod, wantPods  string
	}{
		"unlimited (-1, the kubelet's default)": {podLimit: -1, podsPIDs: 4194304, wantPod: "", wantPods: "4194304"},
		"zero is unlimited too":                 {podLimit: 0, wantPod: "", wantPods: ""},
		"a limit":                               {podLimit: 100, podsPIDs: 32768 - 1000, wantPod: "100", wantPods: "31768"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			mounts := map[string]string{}
			for _, c := range []string{"cpu", "memory", "pids"} {
				mounts[c] = filepath.Join(base, c)
			}
			m, err := New(Config{Root: "/crivk", PodsPIDs: tt.podsPIDs, PodPidsLimit: tt.podLimit, Host: NewHost(HostConfig{V1Mounts: mounts})})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Start(); err != nil {
				t.Fatal(err)
			}
			pids := filepath.Join(mounts["pids"], "crivk/kubepods")
			if got := read(t, pids, "pids.max"); got != tt.wantPods {
				t.Errorf("kubepods pids.max = %q, want %q", got, tt.wantPods)
			}
			for _, p := range []*v1.Pod{guaranteed, burstable, besteffort} {
				if err := m.EnsurePod(p); err != nil {
					t.Fatal(err)
				}
				dir := filepath.Join(mounts["pids"], m.PodCgroup(p))
				if got := read(t, dir, "pids.max"); got != tt.wantPod {
					t.Errorf("%s: pids.max = %q, want %q", m.PodCgroup(p), got, tt.wantPod)
				}
			}
		})
	}
}

// TestPodPidsLimitKeptAfterRestart: a crivk restarted with another
// --pod-max-pids leaves the pids.max of the pod cgroups that exist, as the
// kubelet writes podPidsLimit only when it creates a pod cgroup; new pods
// get the new value.
func TestPodPidsLimitKeptAfterRestart(t *testing.T) {
	mounts, m := v1Tree(t)
	m.cfg.PodPidsLimit = 100
	if err := m.EnsurePod(burstable); err != nil {
		t.Fatal(err)
	}
	restarted, err := New(Config{Root: "/crivk", PodPidsLimit: 50, Host: NewHost(HostConfig{V1Mounts: mounts})})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*v1.Pod{burstable, guaranteed} {
		if err := restarted.EnsurePod(p); err != nil {
			t.Fatal(err)
		}
	}
	if got := read(t, filepath.Join(mounts["pids"], m.PodCgroup(burstable)), "pids.max"); got != "100" {
		t.Errorf("existing pod's pids.max = %q after the restart, want its own 100", got)
	}
	if got := read(t, filepath.Join(mounts["pids"], m.PodCgroup(guaranteed)), "pids.max"); got != "50" {
		t.Errorf("new pod's pids.max = %q, want the new 50", got)
	}
}

// TestContainerProcesses counts the lines of a container cgroup's
// cgroup.procs in the cpu hierarchy (cAdvisor's ProcessCount), found
// below the pod's cgroup whether or not this Manager made it.
func TestContainerProcesses(t *testing.T) {
	mounts, m := v1Tree(t)
	if err := m.EnsurePod(burstable); err != nil {
		t.Fatal(err)
	}
	write := func(pod, ctr, procs string) {
		dir := filepath.Join(mounts["cpu"], pod, ctr)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(procs), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(m.PodCgroup(burstable), "c1", "10\n11\n12\n")
	// A pod made before a restart: not in this Manager's record.
	write("/crivk/kubepods/besteffort/podold", "c2", "20\n")
	write(m.PodCgroup(burstable), "empty", "")
	tests := map[string]struct {
		uid, ctr string
		want     uint64
		notExist bool
	}{
		"three processes":          {uid: "b", ctr: "c1", want: 3},
		"a pod this Manager knows": {uid: "b", ctr: "empty", want: 0},
		"a pod from before":        {uid: "old", ctr: "c2", want: 1},
		"no such container":        {uid: "b", ctr: "gone", notExist: true},
		"no such pod":              {uid: "none", ctr: "c1", notExist: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := m.ContainerProcesses(types.UID(tt.uid), tt.ctr)
			if tt.notExist {
				if !errors.Is(err, os.ErrNotExist) {
					t.Errorf("ContainerProcesses = %d, %v; want an error wrapping os.ErrNotExist", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ContainerProcesses = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

// TestMaxPID is the smaller of kernel.pid_max and kernel.threads-max.
func TestMaxPID(t *testing.T) {
	proc := t.TempDir()
	if _, err := MaxPID(proc); err == nil {
		t.Error("MaxPID without the files: no error")
	}
	if err := os.MkdirAll(filepath.Join(proc, "sys/kernel"), 0o755); err != nil {
		t.Fatal(err)
	}
	for f, v := range map[string]string{"pid_max": "4194304\n", "threads-max": "63488\n"} {
		if err := os.WriteFile(filepath.Join(proc, "sys/kernel", f), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := MaxPID(proc); err != nil || got != 63488 {
		t.Errorf("MaxPID = %d, %v; want 63488", got, err)
	}
}

// TestNoPidsController: without the pids controller --pod-max-pids is
// refused at start, and kubepods is made without pids.max.
func TestNoPidsController(t *testing.T) {
	base := t.TempDir()
	mounts := map[string]string{"cpu": filepath.Join(base, "cpu"), "memory": filepath.Join(base, "memory")}
	if _, err := New(Config{Root: "/crivk", PodPidsLimit: 10, Host: NewHost(HostConfig{V1Mounts: mounts})}); err == nil {
		t.Error("New with --pod-max-pids and no pids controller: no error")
	}
	m, err := New(Config{Root: "/crivk", PodsPIDs: 32768, Host: NewHost(HostConfig{V1Mounts: mounts})})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(); err != nil {
		t.Errorf("Start without the pids controller: %v", err)
	}
}
