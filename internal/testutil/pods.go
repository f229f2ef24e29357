package testutil

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Image is the image of every container Pod builds.
const Image = "busybox:1.36"

// Pod returns the pod prod/web, UID uid-1, with restart policy policy, an
// init container named after each of inits and a regular container named
// after each of containers, in order, each of image Image: the spec that
// status, phase and plan tests start from.
func Pod(policy v1.RestartPolicy, inits []string, containers ...string) *v1.Pod {
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "web", "prod", "uid-1"
	pod.Spec.RestartPolicy = policy
	for _, n := range inits {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: n, Image: Image})
	}
	for _, n := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: n, Image: Image})
	}
	return pod
}

// Resources returns a resource list with cpu and memory quantities; an
// empty string leaves that resource out.
func Resources(cpu, mem string) v1.ResourceList {
	l := v1.ResourceList{}
	if cpu != "" {
		l[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		l[v1.ResourceMemory] = resource.MustParse(mem)
	}
	return l
}
