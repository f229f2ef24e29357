package cm

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fscommon"
	v1 "k8s.io/api/core/v1"
)

// v1Unlimited is the least cgroup v1 memory.limit_in_bytes taken for no
// limit: the kernel reports an unlimited cgroup as PAGE_COUNTER_MAX pages,
// 0x7FFFFFFFFFFFF000 with 4 KiB pages, a little less with larger ones.
const v1Unlimited = math.MaxInt64 / 2

// PodCgroupConfig reads the CPU and memory values the pod's cgroup has now
// from cgroupfs, the kubelet's podContainerManager.GetPodCgroupConfig for
// the pod status' resources: the CPU shares (cpu.shares on v1, cpu.weight
// converted back to shares on v2, as the kubelet's cpuWeightToCPUShares),
// the CFS quota (-1: none) and period, and the memory limit (0: none; v2's
// "max", or v1's unlimited value, which the kubelet, refusing cgroup v1,
// never reads). It only reads; a pod without a cgroup, or a file that
// cannot be read, is an error.
func (m *Manager) PodCgroupConfig(pod *v1.Pod) (cpuShares, cpuQuota, cpuPeriod, memoryLimit int64, err error) {
	name := m.PodCgroup(pod)
	mgr, err := m.manager(name, &cgroups.Resources{SkipDevices: true})
	if err != nil {
		return 0, 0, 0, 0, err
	}
	fail := func(err error) (int64, int64, int64, int64, error) {
		return 0, 0, 0, 0, fmt.Errorf("reading pod cgroup %s: %w", name, err)
	}
	if m.host.v2 {
		dir := mgr.Path("")
		weight, err := fscommon.GetCgroupParamUint(dir, "cpu.weight")
		if err != nil {
			return fail(err)
		}
		max, err := fscommon.GetCgroupParamString(dir, "cpu.max")
		if err != nil {
			return fail(err)
		}
		quota, period, ok := strings.Cut(max, " ")
		if !ok {
			return fail(fmt.Errorf("cpu.max %q is not \"<quota> <period>\"", max))
		}
		cpuQuota = -1
		if quota != "max" {
			if cpuQuota, err = strconv.ParseInt(quota, 10, 64); err != nil {
				return fail(fmt.Errorf("cpu.max %q: %w", max, err))
			}
		}
		if cpuPeriod, err = strconv.ParseInt(period, 10, 64); err != nil {
			return fail(fmt.Errorf("cpu.max %q: %w", max, err))
		}
		mem, err := fscommon.GetCgroupParamUint(dir, "memory.max")
		if err != nil {
			return fail(err)
		}
		if mem <= math.MaxInt64 { // "max" reads as MaxUint64
			memoryLimit = int64(mem)
		}
		return int64(weightToShares(weight)), cpuQuota, cpuPeriod, memoryLimit, nil
	}
	cpu, memDir := mgr.Path("cpu"), mgr.Path("memory")
	shares, err := fscommon.GetCgroupParamUint(cpu, "cpu.shares")
	if err != nil {
		return fail(err)
	}
	q, err := fscommon.GetCgroupParamString(cpu, "cpu.cfs_quota_us")
	if err != nil {
		return fail(err)
	}
	if cpuQuota, err = strconv.ParseInt(q, 10, 64); err != nil {
		return fail(fmt.Errorf("cpu.cfs_quota_us %q: %w", q, err))
	}
	period, err := fscommon.GetCgroupParamUint(cpu, "cpu.cfs_period_us")
	if err != nil {
		return fail(err)
	}
	mem, err := fscommon.GetCgroupParamUint(memDir, "memory.limit_in_bytes")
	if err != nil {
		return fail(err)
	}
	if mem < v1Unlimited {
		memoryLimit = int64(mem)
	}
	return int64(shares), cpuQuota, int64(period), memoryLimit, nil
}
