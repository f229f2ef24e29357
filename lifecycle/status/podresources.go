package status

import (
	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// PodCgroup is what the pod cgroup has of CPU and memory, read from
// cgroupfs when the status is made (package cm's PodCgroupConfig, the
// kubelet's GetPodCgroupConfig): the CPU shares (on cgroup v2 the weight
// converted back), the CFS quota (-1: none) and period in microseconds,
// the memory limit in bytes (0: none).
type PodCgroup struct {
	CPUShares, CPUQuota, CPUPeriod, MemoryLimit int64
}

// setPodResources sets the pod-level status.resources and
// status.allocatedResources, as the kubelet v1.37 with PodLevelResources
// and InPlacePodLevelResourcesVerticalScaling on (both beta, on by
// default) does for every pod in convertStatusToAPIStatus: the allocated
// requests are the pod's requests (component-helpers' PodRequests:
// pod-level values where the pod sets them, else its containers'), the
// resources those of podResources.
func setPodResources(s *v1.PodStatus, in Input) {
	s.Resources = podResources(in)
	s.AllocatedResources = podutil.PodRequests(in.Pod)
}

// podResources is the kubelet's convertToAPIPodLevelResourcesStatus for
// in.Pod, the allocated pod with the API's status of it: before the API
// shows the pod Running, its effective allocated resources (its requests
// and limits as PodRequests and PodLimits count them, the pod-level ones
// kept for the rest); once it shows it Running, the pod cgroup's actual
// values where it has them (in.PodCgroup), the pod-level spec's
// elsewhere:
//
//   - CPU request: the shares' millicores, unless both they and the
//     allocated request are at or below the least shares, or the shares
//     are those the allocated request gives once through cgroup v2's
//     weight (a lossy round trip): then the allocated request;
//   - CPU limit: the quota's millicores, unless both they and the
//     allocated limit are at or below the least effective limit (10m);
//   - memory limit: the cgroup's;
//   - memory request: the pod-level one, else the pod's requests' (the
//     cgroup has none);
//   - a value the cgroup does not give (none set, or not read) is the
//     previous status' when that showed the pod Running too.
//
// The kubelet reads the cgroup only for a pod its pod manager has
// Running; in.Pod.Status is the API's status of the pod, as there.
func podResources(in Input) *v1.ResourceRequirements {
	pod := in.Pod
	if pod.Status.Phase != v1.PodRunning {
		r := pod.Spec.Resources.DeepCopy()
		if r == nil {
			r = &v1.ResourceRequirements{}
		}
		r.Requests = resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
		r.Limits = resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
		return r
	}
	var cpuRequest, cpuLimit, memoryLimit *resource.Quantity
	if cg := in.PodCgroup; cg != nil {
		if m := podutil.SharesToMilliCPU(cg.CPUShares); cg.CPUShares > 0 && m > 0 {
			cpuRequest = resource.NewMilliQuantity(m, resource.DecimalSI)
		}
		if m := podutil.QuotaToMilliCPU(cg.CPUQuota, cg.CPUPeriod); cg.CPUPeriod > 0 && m > 0 {
			cpuLimit = resource.NewMilliQuantity(m, resource.DecimalSI)
		}
		if cg.MemoryLimit > 0 {
			memoryLimit = resource.NewQuantity(cg.MemoryLimit, resource.BinarySI)
		}
	}
	r := pod.Spec.Resources.DeepCopy()
	if r == nil {
		r = &v1.ResourceRequirements{}
	}
	if r.Requests == nil {
		r.Requests = v1.ResourceList{}
	}
	if r.Limits == nil {
		r.Limits = v1.ResourceList{}
	}
	var old v1.ResourceRequirements
	if in.Previous.Resources != nil {
		old = *in.Previous.Resources
	}
	keep := func(name v1.ResourceName, from, into v1.ResourceList) {
		if in.Previous.Phase != v1.PodRunning {
			return
		}
		if q, ok := from[name]; ok {
			into[name] = q.DeepCopy()
		}
	}
	if cpuRequest != nil {
		if cpuRequest.MilliValue() > minShares || r.Requests.Cpu().MilliValue() > minShares {
			allocated := podutil.MilliCPUToShares(r.Requests.Cpu().MilliValue())
			if !sharesEqualAfterV2RoundTrip(allocated, in.PodCgroup.CPUShares) {
				r.Requests[v1.ResourceCPU] = *cpuRequest
			}
		}
	} else {
		keep(v1.ResourceCPU, old.Requests, r.Requests)
	}
	if _, ok := r.Requests[v1.ResourceMemory]; !ok {
		if q, ok := podutil.PodRequests(pod)[v1.ResourceMemory]; ok {
			r.Requests[v1.ResourceMemory] = q
		}
	}
	if cpuLimit != nil {
		if cpuLimit.MilliValue() > minMilliCPULimit || r.Limits.Cpu().MilliValue() > minMilliCPULimit {
			r.Limits[v1.ResourceCPU] = *cpuLimit
		}
	} else {
		keep(v1.ResourceCPU, old.Limits, r.Limits)
	}
	if memoryLimit != nil {
		r.Limits[v1.ResourceMemory] = *memoryLimit
	} else {
		keep(v1.ResourceMemory, old.Limits, r.Limits)
	}
	return r
}

// sharesEqualAfterV2RoundTrip is the kubelet's
// CPUSharesEqualAfterV2RoundTrip: whether readback is what allocated
// shares read as after cgroup v2's conversion to a weight and back (the
// kubelet applies it on either cgroup version).
func sharesEqualAfterV2RoundTrip(allocated, readback int64) bool {
	weight := int64(10000)
	if allocated < 262144 {
		weight = 1 + ((allocated-2)*9999)/262142
	}
	return ((weight-1)*262142)/9999+2 == readback
}
