package podutil

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestPodRequests(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	c := func(cpu, mem string) v1.Container {
		r := v1.ResourceList{}
		if cpu != "" {
			r[v1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			r[v1.ResourceMemory] = resource.MustParse(mem)
		}
		return v1.Container{Resources: v1.ResourceRequirements{Requests: r}}
	}
	sidecar := func(cpu, mem string) v1.Container {
		s := c(cpu, mem)
		s.RestartPolicy = &always
		return s
	}
	tests := map[string]struct {
		spec                v1.PodSpec
		wantCPU, wantMemory int64 // PodRequests: millicores, bytes
		reqCPU, reqMemory   int64 // PodRequest
	}{
		"app containers add up": {
			spec:    v1.PodSpec{Containers: []v1.Container{c("100m", "64Mi"), c("200m", "")}},
			wantCPU: 300, wantMemory: 64 << 20, reqCPU: 300, reqMemory: 64 << 20},
		"the biggest init container wins": {
			spec:    v1.PodSpec{InitContainers: []v1.Container{c("1", "16Mi")}, Containers: []v1.Container{c("100m", "64Mi")}},
			wantCPU: 1000, wantMemory: 64 << 20, reqCPU: 1000, reqMemory: 64 << 20},
		"a sidecar adds to the app containers and to later init containers": {
			spec: v1.PodSpec{InitContainers: []v1.Container{sidecar("100m", "32Mi"), c("500m", "")},
				Containers: []v1.Container{c("100m", "64Mi")}},
			wantCPU: 600, wantMemory: 96 << 20, reqCPU: 600, reqMemory: 96 << 20},
		"overhead: added by PodRequests, by PodRequest only to a request": {
			spec: v1.PodSpec{Containers: []v1.Container{c("100m", "")},
				Overhead: v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m"), v1.ResourceMemory: resource.MustParse("8Mi")}},
			wantCPU: 150, wantMemory: 8 << 20, reqCPU: 150, reqMemory: 0},
		"pod-level requests replace the containers'": {
			spec: v1.PodSpec{Containers: []v1.Container{c("100m", "64Mi")},
				Resources: &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi")}}},
			wantCPU: 2000, wantMemory: 1 << 30, reqCPU: 2000, reqMemory: 1 << 30},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := &v1.Pod{Spec: tc.spec}
			got := PodRequests(pod)
			if cpu, mem := got.Cpu().MilliValue(), got.Memory().Value(); cpu != tc.wantCPU || mem != tc.wantMemory {
				t.Errorf("PodRequests = cpu %dm memory %d, want %dm %d", cpu, mem, tc.wantCPU, tc.wantMemory)
			}
			if cpu, mem := PodRequest(pod, v1.ResourceCPU), PodRequest(pod, v1.ResourceMemory); cpu != tc.reqCPU || mem != tc.reqMemory {
				t.Errorf("PodRequest = cpu %dm memory %d, want %dm %d", cpu, mem, tc.reqCPU, tc.reqMemory)
			}
			if n := PodRequest(pod, v1.ResourcePods); n != 1 {
				t.Errorf("PodRequest(pods) = %d, want 1", n)
			}
		})
	}
}
