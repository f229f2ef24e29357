package status

import (
	"github.com/crivk/crivk/cri"
	v1 "k8s.io/api/core/v1"
)

// The kubelet's least effective CPU values (pkg/kubelet/cm): at or below
// them, the allocated value is reported rather than the runtime's.
const (
	minMilliCPULimit = 10
	minShares        = 2
)

// containerResources is a container's resources in its status, the
// kubelet's convertContainerStatusResources: spec is the container with
// its allocated resources, rc its newest instance in the runtime. A
// container that does not run reports its allocation; a running one the
// runtime's CPU request, CPU limit and memory limit where the allocation
// sets them (a value the runtime does not report is the previous status'
// for the same container, else the allocation's), and the allocation's
// memory request (no runtime value stands for it).
func containerResources(in Input, spec *v1.Container, rc *cri.ContainerStatus, apiID string) *v1.ResourceRequirements {
	res := spec.Resources.DeepCopy()
	if rc.State != cri.StateRunning {
		return res
	}
	var old *v1.ResourceRequirements
	for _, list := range [][]v1.ContainerStatus{in.Previous.InitContainerStatuses, in.Previous.ContainerStatuses, in.Previous.EphemeralContainerStatuses} {
		for i := range list {
			if p := &list[i]; p.Name == spec.Name && p.ContainerID == apiID && p.State.Running != nil && p.Resources != nil {
				old = p.Resources
			}
		}
	}
	keep := func(name v1.ResourceName, from func(*v1.ResourceRequirements) v1.ResourceList, into v1.ResourceList) {
		if old == nil {
			return
		}
		if q, ok := from(old)[name]; ok {
			into[name] = q.DeepCopy()
		}
	}
	limits := func(r *v1.ResourceRequirements) v1.ResourceList { return r.Limits }
	requests := func(r *v1.ResourceRequirements) v1.ResourceList { return r.Requests }
	cpuReq, cpuLim, memLim := cri.ActualResources(rc)
	if res.Limits != nil {
		if cpuLim != nil {
			if cpuLim.MilliValue() > minMilliCPULimit || res.Limits.Cpu().MilliValue() > minMilliCPULimit {
				res.Limits[v1.ResourceCPU] = *cpuLim
			}
		} else {
			keep(v1.ResourceCPU, limits, res.Limits)
		}
		if memLim != nil {
			res.Limits[v1.ResourceMemory] = *memLim
		} else {
			keep(v1.ResourceMemory, limits, res.Limits)
		}
	}
	if res.Requests != nil {
		if cpuReq != nil {
			// The kubelet compares the millicores with the least shares.
			if cpuReq.MilliValue() > minShares || res.Requests.Cpu().MilliValue() > minShares {
				res.Requests[v1.ResourceCPU] = *cpuReq
			}
		} else {
			keep(v1.ResourceCPU, requests, res.Requests)
		}
	}
	return res
}
