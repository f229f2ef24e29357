package cm

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"
	"github.com/opencontainers/cgroups/fscommon"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// CgroupSample is one pod's or container's cgroup, read as cAdvisor's
// cgroupfs handlers read a container's for the kubelet's
// /metrics/cadvisor (github.com/google/cadvisor container/libcontainer
// and container/common.GetSpec). It is a value read once: nothing in it
// follows the cgroup afterwards.
type CgroupSample struct {
	// Name is the cgroup's name within each hierarchy, cAdvisor's
	// container name and its "id" label:
	// /kubepods/burstable/pod<uid>[/<container ID>].
	Name string
	// Stats is the library's GetStats of the cgroup (every hierarchy on
	// v1): CPU time, memory, block I/O and the pids controller, the
	// figures cAdvisor converts into its ContainerStats.
	Stats *cgroups.Stats
	// Spec holds the cgroup's limits.
	Spec CgroupSpec
	// OOMKills is the kernel's count of processes of the cgroup killed by
	// the OOM killer: oom_kill of memory.oom_control (v1) or of
	// memory.events (v2); 0 on kernels without it.
	OOMKills uint64
	// Procs are the processes in the cgroup (cgroup.procs of the cpu
	// hierarchy on v1, of the unified one on v2), in the kernel's order:
	// the pid of a container's first process comes first.
	Procs []int
	// Created is cAdvisor's creation time of the cgroup: the oldest
	// modification time of its directories and of their
	// cgroup.clone_children (v1) or cgroup.events (v2).
	Created time.Time
}

// CgroupSpec is a cgroup's configuration as cAdvisor's ContainerSpec
// reads it. A value the kernel reports as unlimited ("max", or a v1
// limit near MaxInt64) is kept as read (math.MaxUint64 for "max"): the
// reader decides how to show "unlimited".
type CgroupSpec struct {
	// HasCPU: the cpu hierarchy holds the cgroup.
	HasCPU bool
	// CPUShares is cpu.shares (v1); v2: cpu.weight converted back to
	// shares as cAdvisor does.
	CPUShares uint64
	// CPUPeriod and CPUQuota are the CFS period and quota in
	// microseconds; CPUQuota 0: none.
	CPUPeriod, CPUQuota uint64
	// HasMemory: the memory hierarchy holds the cgroup.
	HasMemory bool
	// MemoryLimit, MemorySwapLimit and MemoryReservation are
	// memory.limit_in_bytes, memory.memsw.limit_in_bytes and
	// memory.soft_limit_in_bytes (v1), or memory.max, memory.swap.max
	// and memory.min (v2); 0 for a file that is not there.
	MemoryLimit, MemorySwapLimit, MemoryReservation uint64
}

// PodCgroupSample reads the pod's cgroup (cAdvisor's raw container of
// the pod). A pod without a cgroup is an error wrapping os.ErrNotExist.
func (m *Manager) PodCgroupSample(podUID types.UID) (CgroupSample, error) {
	for _, name := range m.podCgroupNames(podUID) {
		s, err := m.sample(name)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return CgroupSample{}, fmt.Errorf("cgroup of pod %s: %w", podUID, err)
		}
		return s, nil
	}
	return CgroupSample{}, fmt.Errorf("pod %s has no cgroup: %w", podUID, os.ErrNotExist)
}

// ContainerCgroupSample reads a container's (or a sandbox's) cgroup
// below its pod's: containerd names it <pod cgroup>/<container ID>
// (cgroupfs driver). A container without a cgroup (exited, or a pod
// without one) is an error wrapping os.ErrNotExist.
func (m *Manager) ContainerCgroupSample(podUID types.UID, containerID string) (CgroupSample, error) {
	for _, pod := range m.podCgroupNames(podUID) {
		s, err := m.sample(path.Join(pod, containerID))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return CgroupSample{}, fmt.Errorf("cgroup of container %s of pod %s: %w", containerID, podUID, err)
		}
		return s, nil
	}
	return CgroupSample{}, fmt.Errorf("container %s of pod %s has no cgroup: %w", containerID, podUID, os.ErrNotExist)
}

// RootCgroupSample reads the machine's root cgroup "/" (not
// --cgroup-root): Host.RootCgroupSample.
func (m *Manager) RootCgroupSample() (CgroupSample, error) { return m.host.RootCgroupSample() }

// RootCgroupSample reads the machine's root cgroup "/", cAdvisor's root
// container: the controllers whose files the root has (on v1 the root has
// no pids.current, which cAdvisor leaves out too), each read on its own
// and left at zero when it cannot be read.
func (h *Host) RootCgroupSample() (CgroupSample, error) {
	mgr, err := h.manager("/", &cgroups.Resources{SkipDevices: true})
	if err != nil {
		return CgroupSample{}, err
	}
	s := CgroupSample{Name: "/"}
	cpuDir, memDir := mgr.Path("cpu"), mgr.Path("memory")
	if h.v2 {
		cpuDir, memDir = mgr.Path(""), mgr.Path("")
		// The root has no pids, memory.current or cpu.max: the library
		// returns what it read with the error, as cAdvisor ignores it.
		s.Stats, _ = mgr.GetStats()
		if s.Stats == nil {
			s.Stats = cgroups.NewStats()
		}
	} else {
		s.Stats = cgroups.NewStats()
		for ctrl, sub := range map[string]interface {
			GetStats(path string, stats *cgroups.Stats) error
		}{"cpu": &fs.CpuGroup{}, "cpuacct": &fs.CpuacctGroup{}, "memory": &fs.MemoryGroup{}, "blkio": &fs.BlkioGroup{}} {
			if dir := mgr.Path(ctrl); dir != "" {
				_ = sub.GetStats(dir, s.Stats)
			}
		}
	}
	if s.Procs, err = cgroups.GetPids(cpuDir); err != nil {
		return CgroupSample{}, fmt.Errorf("processes of the root cgroup: %w", err)
	}
	s.Spec = readSpec(cpuDir, memDir, h.v2)
	s.OOMKills = oomKills(memDir, h.v2)
	s.Created = created(mgr.GetPaths(), h.v2)
	return s, nil
}

// oomKills is the oom_kill counter of the memory cgroup in dir; 0 when
// the kernel has none.
func oomKills(dir string, v2 bool) uint64 {
	file := "memory.oom_control"
	if v2 {
		file = "memory.events"
	}
	n, _ := fscommon.GetValueByKey(dir, file, "oom_kill")
	return n
}

// podCgroupNames are the names the pod's cgroup may have: the one
// EnsurePod made, or, for a pod not synced since crivk started, its name
// in each QoS class.
func (m *Manager) podCgroupNames(podUID types.UID) []string {
	m.mu.Lock()
	prev, ok := m.applied[podUID]
	m.mu.Unlock()
	if ok {
		return []string{prev.name}
	}
	var names []string
	for _, q := range []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		names = append(names, path.Join(m.qosCgroup(q), podPrefix+string(podUID)))
	}
	return names
}

// sample reads the named cgroup; one that no hierarchy holds is an error
// wrapping os.ErrNotExist. The cgroup may go while it is read (its
// container exits): an error then, never a partial sample.
func (m *Manager) sample(name string) (CgroupSample, error) {
	mgr, err := m.manager(name, &cgroups.Resources{SkipDevices: true})
	if err != nil {
		return CgroupSample{}, err
	}
	if !m.exists(mgr) {
		return CgroupSample{}, fmt.Errorf("cgroup %s: %w", name, os.ErrNotExist)
	}
	s := CgroupSample{Name: name}
	if s.Stats, err = mgr.GetStats(); err != nil {
		return CgroupSample{}, fmt.Errorf("statistics of cgroup %s: %w", name, err)
	}
	cpuDir, memDir := mgr.Path("cpu"), mgr.Path("memory")
	if m.host.v2 {
		cpuDir, memDir = mgr.Path(""), mgr.Path("")
	}
	if s.Procs, err = cgroups.GetPids(cpuDir); err != nil {
		return CgroupSample{}, fmt.Errorf("processes of cgroup %s: %w", name, err)
	}
	s.Spec = readSpec(cpuDir, memDir, m.host.v2)
	s.OOMKills = oomKills(memDir, m.host.v2)
	s.Created = created(mgr.GetPaths(), m.host.v2)
	return s, nil
}

// readSpec reads the limits as cAdvisor's GetSpec: a file that cannot be
// read is 0, as there.
func readSpec(cpuDir, memDir string, v2 bool) CgroupSpec {
	var s CgroupSpec
	if cpuDir != "" && dirExists(cpuDir) {
		s.HasCPU = true
		if v2 {
			if w := readUint(cpuDir, "cpu.weight"); w > 0 {
				s.CPUShares = weightToShares(w)
			}
			if quota, period, ok := strings.Cut(readString(cpuDir, "cpu.max"), " "); ok {
				if quota != "max" {
					s.CPUQuota, _ = strconv.ParseUint(quota, 10, 64)
				}
				s.CPUPeriod, _ = strconv.ParseUint(period, 10, 64)
			}
		} else {
			s.CPUShares = readUint(cpuDir, "cpu.shares")
			s.CPUPeriod = readUint(cpuDir, "cpu.cfs_period_us")
			if q := readString(cpuDir, "cpu.cfs_quota_us"); q != "" && q != "-1" {
				s.CPUQuota, _ = strconv.ParseUint(q, 10, 64)
			}
		}
	}
	if memDir == "" {
		return s
	}
	if v2 {
		if _, err := os.Stat(filepath.Join(memDir, "memory.max")); err == nil {
			s.HasMemory = true
			s.MemoryLimit = readUint(memDir, "memory.max")
			s.MemorySwapLimit = readUint(memDir, "memory.swap.max")
			s.MemoryReservation = readUint(memDir, "memory.min")
		}
	} else if dirExists(memDir) {
		s.HasMemory = true
		s.MemoryLimit = readUint(memDir, "memory.limit_in_bytes")
		s.MemorySwapLimit = readUint(memDir, "memory.memsw.limit_in_bytes")
		s.MemoryReservation = readUint(memDir, "memory.soft_limit_in_bytes")
	}
	return s
}

// weightToShares inverts cpuWeight (the kubelet's and runc's conversion),
// as cAdvisor's convertCPUWeightToCPULimit.
func weightToShares(weight uint64) uint64 {
	if weight < 1 || weight > 10000 {
		return 0
	}
	return 2 + ((weight-1)*262142)/9999
}

// created is the oldest modification time of the directories and of
// their cgroup.clone_children (v1) or cgroup.events (v2): a cgroup
// directory's own time changes when a child is made.
func created(paths map[string]string, v2 bool) time.Time {
	var oldest time.Time
	older := func(p string) {
		if fi, err := os.Stat(p); err == nil && (oldest.IsZero() || fi.ModTime().Before(oldest)) {
			oldest = fi.ModTime()
		}
	}
	file := "cgroup.clone_children"
	if v2 {
		file = "cgroup.events"
	}
	for _, dir := range paths {
		older(dir)
		older(filepath.Join(dir, file))
	}
	return oldest
}

func dirExists(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}

func readString(dir, file string) string {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// readUint reads a number; "max" is math.MaxUint64, anything unreadable 0.
func readUint(dir, file string) uint64 {
	v, err := fscommon.GetCgroupParamUint(dir, file)
	if err != nil {
		return 0
	}
	return v
}
