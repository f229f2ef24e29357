package podutil

import (
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// PodRequests is the pod's requests as the kubelet and the scheduler count
// them, component-helpers' resource.PodRequests: the pod-level requests
// when the pod sets them (pod-level resources), else the larger of the
// biggest init container's and the sum of the app containers' and the
// sidecars' (restartable init containers, counted with the init
// containers started before each), and the overhead added to every
// resource it names.
func PodRequests(pod *v1.Pod) v1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

// PodRequest is the pod's request of name as the kubelet's admission and
// resize count it (its GetResourceRequest): 1 for pods, millicores for
// cpu, the units of the others; PodRequests' rule, but the overhead added
// only to a request that is not zero.
func PodRequest(pod *v1.Pod, name v1.ResourceName) int64 {
	if name == v1.ResourcePods {
		return 1
	}
	q := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{ExcludeOverhead: true})[name]
	if o, ok := pod.Spec.Overhead[name]; ok && !q.IsZero() {
		q.Add(o)
	}
	if name == v1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}
