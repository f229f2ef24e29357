package cri

import (
	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The kubelet's cgroup constants (pkg/kubelet/cm, pkg/kubelet/qos).
const (
	// quotaPeriod is the CFS period in microseconds (100 ms).
	quotaPeriod = 100000

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
	shares := podutil.MilliCPUToShares(cpuRequest.MilliValue())
	if !hasRequest && !cpuLimit.IsZero() {
		shares = podutil.MilliCPUToShares(cpuLimit.MilliValue())
	}
	return &runtimeapi.LinuxContainerResources{
		CpuShares:          shares,
		CpuPeriod:          quotaPeriod,
		CpuQuota:           podutil.MilliCPUToQuota(cpuLimit.MilliValue(), quotaPeriod),
		OomScoreAdj:        oomScoreAdj(pod, c, typ == ContainerTypeInit && podutil.IsSidecar(c), memoryCapacity),
		MemoryLimitInBytes: c.Resources.Limits.Memory().Value(),
	}
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
