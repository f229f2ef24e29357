package cm

import (
	"fmt"
	"path"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fscommon"
)

// maxMemorySize: a limit above it is none (the kernel rounds "no limit"
// below MaxInt64; the kubelet's isMemoryUnlimited).
const maxMemorySize = uint64(1 << 62)

// PodsMemory reads the node-allocatable cgroup (kubepods) as cAdvisor
// reads it for the kubelet's summary ("pods" system container, the
// allocatableMemory.available signal): its memory usage, its working set
// (usage less inactive file pages, never below 0) and its limit (0: none;
// Config.PodsMemory set by Start). cgroup v1: memory.usage_in_bytes,
// memory.limit_in_bytes and total_inactive_file of memory.stat; v2:
// memory.current, memory.max and inactive_file.
func (m *Manager) PodsMemory() (usage, workingSet, limit uint64, err error) {
	name := path.Join(m.root, podsCgroup)
	mgr, err := m.manager(name, &cgroups.Resources{SkipDevices: true})
	if err != nil {
		return 0, 0, 0, err
	}
	dir, usageFile, limitFile, inactiveKey := mgr.Path("memory"), "memory.usage_in_bytes", "memory.limit_in_bytes", "total_inactive_file"
	if m.host.v2 {
		dir, usageFile, limitFile, inactiveKey = mgr.Path(""), "memory.current", "memory.max", "inactive_file"
	}
	if dir == "" {
		return 0, 0, 0, fmt.Errorf("cgroup %s: no memory hierarchy", name)
	}
	if usage, err = fscommon.GetCgroupParamUint(dir, usageFile); err != nil {
		return 0, 0, 0, fmt.Errorf("memory usage of cgroup %s: %w", name, err)
	}
	if limit, err = fscommon.GetCgroupParamUint(dir, limitFile); err != nil {
		return 0, 0, 0, fmt.Errorf("memory limit of cgroup %s: %w", name, err)
	}
	if limit > maxMemorySize {
		limit = 0
	}
	inactive, err := fscommon.GetValueByKey(dir, "memory.stat", inactiveKey)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("inactive file pages of cgroup %s: %w", name, err)
	}
	if inactive < usage {
		workingSet = usage - inactive
	}
	return usage, workingSet, limit, nil
}

// PodsCgroupSample reads the node-allocatable cgroup (kubepods) whole,
// as cAdvisor reads it for the kubelet's "pods" system container: its
// CPU time, memory.stat (RSS, page faults) and limits. A kubepods that no
// hierarchy holds (--cgroups-per-qos=false, or before Start) is an error
// wrapping os.ErrNotExist.
func (m *Manager) PodsCgroupSample() (CgroupSample, error) {
	return m.sample(path.Join(m.root, podsCgroup))
}

// PodsDir is the node-allocatable cgroup's (kubepods) directory in the
// hierarchy of controller (v1; v2: the unified directory, whatever the
// controller): the memcg threshold notifier of allocatableMemory.available
// watches its memory.usage_in_bytes.
func (m *Manager) PodsDir(controller string) (string, error) {
	mgr, err := m.manager(path.Join(m.root, podsCgroup), &cgroups.Resources{SkipDevices: true})
	if err != nil {
		return "", err
	}
	return mgr.Path(controller), nil
}
