package podutil

import v1 "k8s.io/api/core/v1"

// IsStaticPod is the kubelet's kubetypes.IsStaticPod: the pod came from
// another source than the API server (its kubernetes.io/config.source
// annotation is set and is not "api"), i.e. from a manifest file.
func IsStaticPod(pod *v1.Pod) bool {
	src, ok := pod.Annotations["kubernetes.io/config.source"]
	return ok && src != "api"
}
