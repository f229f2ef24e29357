package podutil

import (
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// QOSClass is the pod's QoS class as the API server recorded it in its
// status, or computed as the kubelet's ComputePodQOS when the status has
// none (see ComputeQOSClass).
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return ComputeQOSClass(pod)
}

// ComputeQOSClass computes the QoS class from the spec, ignoring the status,
// as the kubelet v1.37's ComputePodQOS with PodLevelResources and
// PodLevelResourcesFixKubeletQOSClass (beta, on):
//   - when the pod's spec.resources requests or limits a pod-level
//     resource (cpu, memory, hugepages-*: resourcehelper's
//     IsPodLevelResourcesSet; an empty {}, {requests: {}} or {limits: {}}
//     does not count since v1.37, #137150), only the pod-level cpu and
//     memory count, and the containers' own values are not read: BestEffort when
//     neither requests nor limits cpu or memory, Guaranteed when it limits
//     both and the requests equal the limits, else Burstable;
//   - otherwise BestEffort when no container (init containers included)
//     requests or limits cpu or memory; Guaranteed when every container
//     limits both and the summed requests equal the summed limits;
//     Burstable for anything else.
func ComputeQOSClass(pod *v1.Pod) v1.PodQOSClass {
	requests, limits := v1.ResourceList{}, v1.ResourceList{}
	guaranteed := true
	if pr := pod.Spec.Resources; resourcehelper.IsPodLevelResourcesSet(pod) {
		addQOSResources(requests, pr.Requests)
		if len(pr.Limits) > 0 {
			found := addQOSResources(limits, pr.Limits)
			if !found[v1.ResourceCPU] || !found[v1.ResourceMemory] {
				guaranteed = false
			}
		}
	} else {
		all := append(append([]v1.Container{}, pod.Spec.Containers...), pod.Spec.InitContainers...)
		for _, c := range all {
			addQOSResources(requests, c.Resources.Requests)
			found := addQOSResources(limits, c.Resources.Limits)
			if !found[v1.ResourceCPU] || !found[v1.ResourceMemory] {
				guaranteed = false
			}
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return v1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
				break
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

// addQOSResources adds the positive cpu and memory quantities of list to
// sum and reports which it found.
func addQOSResources(sum, list v1.ResourceList) map[v1.ResourceName]bool {
	found := map[v1.ResourceName]bool{}
	for name, q := range list {
		if (name != v1.ResourceCPU && name != v1.ResourceMemory) || q.Sign() <= 0 {
			continue
		}
		found[name] = true
		total := q.DeepCopy()
		if prev, ok := sum[name]; ok {
			total.Add(prev)
		}
		sum[name] = total
	}
	return found
}
