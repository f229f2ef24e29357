package cri

import (
	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The kubelet's cgroup constants (pkg/kubelet/cm, pkg/kubelet/qos).
const (
	minShares     = 2
	maxShares     = 262144
	sharesPerCPU  = 1024
	milliCPUToCPU = 1000
	// quotaPeriod is the CFS period in microseconds (100 ms); a quota is
	// never set below minQuotaPeriod.
	quotaPeriod    = 100000
	minQuotaPeriod = 1000

	guaranteedOOMScoreAdj = -997
	// systemCriticalPriority is the lowest priority of critical pods
	// (scheduling.SystemCriticalPriority).
	systemCriticalPriority = 2000000000
	besteffortOOMScoreAdj  = 1000
)

// containerResources computes the CRI resources of container c of pod as
// the kubelet's generateLinuxContainerResources does on cgroup v1 with the
// default CPU CFS quota: CPU shares from the request (the limit when only
// a limit is set), CFS quota and period from the limit, the memory limit,
// and the OOM score adjustment of the pod's QoS class. memoryCapacity is
// the node's memory in bytes (Burstable containers' OOM score is relative
// to it); 0 leaves Burstable containers at the besteffort side of the
// scale.
func containerResources(pod *v1.Pod, c *v1.Container, typ ContainerType, memoryCapacity int64) *runtimeapi.LinuxContainerResources {
	cpuRequest, hasRequest := c.Resources.Requests[v1.ResourceCPU]
	cpuLimit := c.Resources.Limits[v1.ResourceCPU]
	shares := milliCPUToShares(cpuRequest.MilliValue())
	if !hasRequest && !cpuLimit.IsZero() {
		shares = milliCPUToShares(cpuLimit.MilliValue())
	}
	return &runtimeapi.LinuxContainerResources{
		CpuShares:          shares,
		CpuPeriod:          quotaPeriod,
		CpuQuota:           milliCPUToQuota(cpuLimit.MilliValue(), quotaPeriod),
		OomScoreAdj:        oomScoreAdj(pod, c, typ == ContainerTypeInit && podutil.IsSidecar(c), memoryCapacity),
		MemoryLimitInBytes: c.Resources.Limits.Memory().Value(),
	}
}

// milliCPUToShares is the kubelet's MilliCPUToShares: 1024 shares per CPU,
// at least 2 (also for no request), at most 262144.
func milliCPUToShares(milliCPU int64) int64 {
	if milliCPU == 0 {
		return minShares
	}
	shares := milliCPU * sharesPerCPU / milliCPUToCPU
	return min(max(shares, minShares), maxShares)
}

// milliCPUToQuota is the kubelet's MilliCPUToQuota: no limit is quota 0
// (unlimited); otherwise the limit's share of period, at least 1 ms.
func milliCPUToQuota(milliCPU, period int64) int64 {
	if milliCPU == 0 {
		return 0
	}
	return max(milliCPU*period/milliCPUToCPU, minQuotaPeriod)
}

// oomScoreAdj is the kubelet's GetContainerOOMScoreAdjust: Guaranteed
// pods and node-critical pods -997, BestEffort 1000, Burstable 1000 minus
// the container's memory request in thousandths of the node's memory,
// kept within [3, 999]; a Burstable sidecar is never more likely to be
// killed than the regular container with the smallest memory request.
// containerd here restricts negative values to its own score
// (restrict_oom_score_adj, docs/resources.md).
func oomScoreAdj(pod *v1.Pod, c *v1.Container, sidecar bool, memoryCapacity int64) int64 {
	if pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalPriority && pod.Spec.PriorityClassName == "system-node-critical" {
		return guaranteedOOMScoreAdj
	}
	switch podutil.QOSClass(pod) {
	case v1.PodQOSGuaranteed:
		return guaranteedOOMScoreAdj
	case v1.PodQOSBestEffort:
		return besteffortOOMScoreAdj
	}
	if memoryCapacity <= 0 {
		return besteffortOOMScoreAdj - 1
	}
	adj := 1000 - 1000*c.Resources.Requests.Memory().Value()/memoryCapacity
	if sidecar && len(pod.Spec.Containers) > 0 {
		minReq := pod.Spec.Containers[0].Resources.Requests.Memory().Value()
		for _, rc := range pod.Spec.Containers[1:] {
			minReq = min(minReq, rc.Resources.Requests.Memory().Value())
		}
		adj = min(adj, 1000-1000*minReq/memoryCapacity)
	}
	if adj < 1000+guaranteedOOMScoreAdj {
		return 1000 + guaranteedOOMScoreAdj
	}
	if adj == besteffortOOMScoreAdj {
		return adj - 1
	}
	return adj
}
