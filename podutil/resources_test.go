package podutil

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestContainerResourceValue(t *testing.T) {
	q := resource.MustParse
	alloc := v1.ResourceList{v1.ResourceCPU: q("2"), v1.ResourceMemory: q("4Gi"), v1.ResourceEphemeralStorage: q("100Gi")}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: q("1Mi")}}}},
		Containers: []v1.Container{
			{Name: "a", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: q("250m"), v1.ResourceMemory: q("64Mi")}, Requests: v1.ResourceList{v1.ResourceCPU: q("125m")}}},
			{Name: "zero", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: q("0")}}},
		},
	}}
	a := &pod.Spec.Containers[0]
	for name, tc := range map[string]struct {
		fs      v1.ResourceFieldSelector
		c       *v1.Container
		want    string
		wantErr bool
	}{
		"cpu limit in cores rounds up":     {fs: v1.ResourceFieldSelector{Resource: "limits.cpu"}, c: a, want: "1"},
		"cpu limit in millicores":          {fs: v1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: q("1m")}, c: a, want: "250"},
		"memory limit in Mi":               {fs: v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: q("1Mi")}, c: a, want: "64"},
		"cpu request":                      {fs: v1.ResourceFieldSelector{Resource: "requests.cpu", Divisor: q("1m")}, c: a, want: "125"},
		"unset limit is allocatable":       {fs: v1.ResourceFieldSelector{Resource: "limits.ephemeral-storage", Divisor: q("1Gi")}, c: a, want: "100"},
		"zero limit is allocatable":        {fs: v1.ResourceFieldSelector{ContainerName: "zero", Resource: "limits.memory", Divisor: q("1Gi")}, want: "4"},
		"unset request is zero":            {fs: v1.ResourceFieldSelector{Resource: "requests.memory"}, c: a, want: "0"},
		"named init container":             {fs: v1.ResourceFieldSelector{ContainerName: "init", Resource: "requests.memory"}, want: "1048576"},
		"named container wins over c":      {fs: v1.ResourceFieldSelector{ContainerName: "zero", Resource: "limits.cpu"}, c: a, want: "2"},
		"unknown container":                {fs: v1.ResourceFieldSelector{ContainerName: "nope", Resource: "limits.cpu"}, wantErr: true},
		"no container at all":              {fs: v1.ResourceFieldSelector{Resource: "limits.cpu"}, wantErr: true},
		"unsupported resource":             {fs: v1.ResourceFieldSelector{Resource: "limits.nvidia.com/gpu"}, c: a, wantErr: true},
		"not a limit or request":           {fs: v1.ResourceFieldSelector{Resource: "cpu"}, c: a, wantErr: true},
		"hugepages limit unset, none here": {fs: v1.ResourceFieldSelector{Resource: "limits.hugepages-2Mi"}, c: a, want: "0"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ContainerResourceValue(&tc.fs, pod, tc.c, alloc)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("got %q, %v; want %q (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestContainerResourceValuePodLevel: under pod-level limits a container
// without its own limit gets the pod's (the kubelet's
// defaultPodLimitsForDownwardAPI), cpu and memory only; its own limit
// still wins, and hugepages are never defaulted, not even to allocatable.
func TestContainerResourceValuePodLevel(t *testing.T) {
	q := resource.MustParse
	alloc := v1.ResourceList{v1.ResourceCPU: q("2"), v1.ResourceMemory: q("4Gi"), v1.ResourceEphemeralStorage: q("100Gi"), "hugepages-2Mi": q("8Mi")}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: v1.PodSpec{
		Resources: &v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: q("250m"), v1.ResourceMemory: q("32Mi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: q("1250m"), v1.ResourceMemory: q("64Mi")},
		},
		Containers: []v1.Container{
			{Name: "none"},
			{Name: "own", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: q("16Mi")}}},
		},
	}}
	memOnly := pod.DeepCopy()
	memOnly.Spec.Resources.Limits = v1.ResourceList{v1.ResourceMemory: q("64Mi")}
	for name, tc := range map[string]struct {
		pod  *v1.Pod
		fs   v1.ResourceFieldSelector
		want string
	}{
		// The node e2e spec "should provide default limits.cpu/memory from
		// pod level resources": CPU_LIMIT=2 (1250m rounded up), MEMORY_LIMIT=67108864.
		"cpu from the pod":                  {pod: pod, fs: v1.ResourceFieldSelector{ContainerName: "none", Resource: "limits.cpu"}, want: "2"},
		"memory from the pod":               {pod: pod, fs: v1.ResourceFieldSelector{ContainerName: "none", Resource: "limits.memory"}, want: "67108864"},
		"the container's own limit wins":    {pod: pod, fs: v1.ResourceFieldSelector{ContainerName: "own", Resource: "limits.memory", Divisor: q("1Mi")}, want: "16"},
		"ephemeral storage is allocatable":  {pod: pod, fs: v1.ResourceFieldSelector{ContainerName: "none", Resource: "limits.ephemeral-storage", Divisor: q("1Gi")}, want: "100"},
		"cpu without a pod-level cpu limit": {pod: memOnly, fs: v1.ResourceFieldSelector{ContainerName: "none", Resource: "limits.cpu", Divisor: q("1m")}, want: "2000"},
		"hugepages are not defaulted":       {pod: pod, fs: v1.ResourceFieldSelector{ContainerName: "none", Resource: "limits.hugepages-2Mi"}, want: "0"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ContainerResourceValue(&tc.fs, tc.pod, nil, alloc)
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
