package podutil

import v1 "k8s.io/api/core/v1"

// SystemCriticalPriority is scheduling.SystemCriticalPriority (2*10^9): the
// lowest priority of the system-cluster-critical and system-node-critical
// classes.
const SystemCriticalPriority = 2000000000

// IsCriticalPod is the kubelet's kubetypes.IsCriticalPod: a static pod, a
// mirror pod, or a pod of priority SystemCriticalPriority or more. Admission
// lets such a pod preempt others; eviction never ranks it for eviction.
func IsCriticalPod(pod *v1.Pod) bool {
	if IsStaticPod(pod) {
		return true
	}
	if _, ok := pod.Annotations[v1.MirrorPodAnnotationKey]; ok {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= SystemCriticalPriority
}
