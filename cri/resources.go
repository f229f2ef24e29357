package cri

import (
	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The kubelet's cgroup constants (pkg/kubelet/cm, pkg/kubelet/qos).
const (
	// quotaPeriod is the CFS period in microseconds (100 ms).
	quotaPeriod = 100000

	guaranteedOOMScoreAdj = -997
	besteffortOOMScoreAdj = 1000
)

// containerResources computes the CRI resources of container c of pod as
// the kubelet's generateLinuxContainerResources does on cgroup v1 with the
// default CPU CFS quota: CPU shares from the request (the limit when only
// a limit is set), CFS quota and period from the limit, the memory limit,
// and the OOM score adjustment of the pod's QoS class. memoryCapacity is
// the node's memory in bytes (Burstable containers' OOM score is relative
// to it); 0 leaves Burstable containers at the besteffort side of the
// scale. Under pod-level resources (spec.resources) a container without
// its own CPU or memory limit takes the pod-level one, as the kubelet's
// getCPULimit and getMemoryLimit.
func containerResources(pod *v1.Pod, c *v1.Container, typ ContainerType, memoryCapacity int64) *runtimeapi.LinuxContainerResources {
	cpuRequest, hasRequest := c.Resources.Requests[v1.ResourceCPU]
	cpuLimit, memLimit := *c.Resources.Limits.Cpu(), *c.Resources.Limits.Memory()
	if resourcehelper.IsPodLevelResourcesSet(pod) {
		if cpuLimit.IsZero() {
			cpuLimit = *pod.Spec.Resources.Limits.Cpu()
		}
		if memLimit.IsZero() {
			memLimit = *pod.Spec.Resources.Limits.Memory()
		}
	}
	shares := podutil.MilliCPUToShares(cpuRequest.MilliValue())
	if !hasRequest && !cpuLimit.IsZero() {
		shares = podutil.MilliCPUToShares(cpuLimit.MilliValue())
	}
	return &runtimeapi.LinuxContainerResources{
		CpuShares:          shares,
		CpuPeriod:          quotaPeriod,
		CpuQuota:           podutil.MilliCPUToQuota(cpuLimit.MilliValue(), quotaPeriod),
		OomScoreAdj:        oomScoreAdj(pod, c, typ == ContainerTypeInit && podutil.IsSidecar(c), memoryCapacity),
		MemoryLimitInBytes: memLimit.Value(),
	}
}

// oomScoreAdj is the kubelet's GetContainerOOMScoreAdjust: Guaranteed
// pods and node-critical pods -997, BestEffort 1000, Burstable 1000 minus
// the container's memory request in thousandths of the node's memory,
// kept within [3, 999] (with pod-level memory requests, the part of the
// pod's request no container asks for is shared equally among all the
// containers, init containers included, and added to each one's request);
// a Burstable sidecar is never more likely to be
// killed than the regular container with the smallest memory request.
// containerd here restricts negative values to its own score
// (restrict_oom_score_adj, docs/resources.md).
func oomScoreAdj(pod *v1.Pod, c *v1.Container, sidecar bool, memoryCapacity int64) int64 {
	if pod.Spec.Priority != nil && *pod.Spec.Priority >= podutil.SystemCriticalPriority && pod.Spec.PriorityClassName == "system-node-critical" {
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
	remaining := remainingPodMemoryRequestPerContainer(pod)
	adj := 1000 - 1000*(c.Resources.Requests.Memory().Value()+remaining)/memoryCapacity
	if sidecar && len(pod.Spec.Containers) > 0 {
		minReq := pod.Spec.Containers[0].Resources.Requests.Memory().Value()
		for _, rc := range pod.Spec.Containers[1:] {
			minReq = min(minReq, rc.Resources.Requests.Memory().Value())
		}
		adj = min(adj, 1000-1000*(minReq+remaining)/memoryCapacity)
	}
	if adj < 1000+guaranteedOOMScoreAdj {
		return 1000 + guaranteedOOMScoreAdj
	}
	if adj == besteffortOOMScoreAdj {
		return adj - 1
	}
	return adj
}

// remainingPodMemoryRequestPerContainer is the kubelet's
// remainingPodMemReqPerContainer: the pod-level memory request minus the
// containers' aggregated requests, divided by the number of containers
// (init containers counted); 0 without a pod-level memory request.
func remainingPodMemoryRequestPerContainer(pod *v1.Pod) int64 {
	if !resourcehelper.IsPodLevelRequestsSet(pod) || pod.Spec.Resources.Requests.Memory().IsZero() {
		return 0
	}
	n := int64(len(pod.Spec.Containers) + len(pod.Spec.InitContainers))
	if n == 0 {
		return 0
	}
	aggr := resourcehelper.AggregateContainerRequests(pod, resourcehelper.PodResourcesOptions{})
	return (pod.Spec.Resources.Requests.Memory().Value() - aggr.Memory().Value()) / n
}
