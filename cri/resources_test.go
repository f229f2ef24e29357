package cri

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func rl(cpu, mem string) v1.ResourceList {
	l := v1.ResourceList{}
	if cpu != "" {
		l[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		l[v1.ResourceMemory] = resource.MustParse(mem)
	}
	return l
}

// TestContainerResources checks the CRI values per QoS class against the
// kubelet's formulas (pkg/kubelet/kuberuntime, pkg/kubelet/cm,
// pkg/kubelet/qos) for a 4 GiB node.
func TestContainerResources(t *testing.T) {
	const gi = int64(1) << 30
	always := v1.ContainerRestartPolicyAlways
	for name, tc := range map[string]struct {
		req, lim v1.ResourceList
		others   []v1.Container // further regular containers
		sidecar  bool
		want     *runtimeapi.LinuxContainerResources
	}{
		"besteffort": {want: &runtimeapi.LinuxContainerResources{CpuShares: 2, CpuPeriod: 100000, OomScoreAdj: 1000}},
		"guaranteed": {req: rl("500m", "16Mi"), lim: rl("500m", "16Mi"),
			want: &runtimeapi.LinuxContainerResources{CpuShares: 512, CpuPeriod: 100000, CpuQuota: 50000, MemoryLimitInBytes: 16 << 20, OomScoreAdj: -997}},
		"burstable, a quarter of the memory": {req: rl("250m", "1Gi"), lim: rl("1", "2Gi"),
			want: &runtimeapi.LinuxContainerResources{CpuShares: 256, CpuPeriod: 100000, CpuQuota: 100000, MemoryLimitInBytes: 2 * gi, OomScoreAdj: 750}},
		"burstable, limit only sets shares": {lim: rl("", "64Mi"),
			want: &runtimeapi.LinuxContainerResources{CpuShares: 2, CpuPeriod: 100000, MemoryLimitInBytes: 64 << 20, OomScoreAdj: 999}},
		"burstable, tiny cpu limit: quota at least 1ms": {req: rl("1m", ""), lim: rl("5m", ""),
			want: &runtimeapi.LinuxContainerResources{CpuShares: 2, CpuPeriod: 100000, CpuQuota: 1000, OomScoreAdj: 999}},
		"burstable, request near the node's memory": {req: rl("", "4Gi"),
			want: &runtimeapi.LinuxContainerResources{CpuShares: 2, CpuPeriod: 100000, OomScoreAdj: 3}},
		"burstable sidecar no likelier to die than the smallest regular container": {req: rl("", "16Mi"), sidecar: true,
			others: []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{Requests: rl("", "2Gi")}}},
			want:   &runtimeapi.LinuxContainerResources{CpuShares: 2, CpuPeriod: 100000, OomScoreAdj: 500}},
		"huge cpu request capped": {req: rl("1000", ""),
			want: &runtimeapi.LinuxContainerResources{CpuShares: 262144, CpuPeriod: 100000, OomScoreAdj: 999}},
	} {
		t.Run(name, func(t *testing.T) {
			c := v1.Container{Name: "c", Resources: v1.ResourceRequirements{Requests: tc.req, Limits: tc.lim}}
			pod := &v1.Pod{}
			typ := ContainerTypeRegular
			if tc.sidecar {
				c.RestartPolicy = &always
				pod.Spec.InitContainers = []v1.Container{c}
				pod.Spec.Containers = tc.others
				typ = ContainerTypeInit
			} else {
				pod.Spec.Containers = append([]v1.Container{c}, tc.others...)
			}
			got := containerResources(pod, &c, typ, 4*gi)
			if got.String() != tc.want.String() {
				t.Errorf("resources\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

func TestContainerConfigCarriesResources(t *testing.T) {
	c := v1.Container{Name: "c", Image: "busybox", Resources: v1.ResourceRequirements{Limits: rl("", "16Mi"), Requests: rl("", "16Mi")}}
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{c}}}
	cfg, err := ContainerConfig(pod, &c, ContainerTypeRegular, 0, "busybox", &RunContainerOptions{MemoryCapacity: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.GetLinux().GetResources(); r.GetMemoryLimitInBytes() != 16<<20 || r.GetOomScoreAdj() != 985 {
		t.Errorf("container config resources %v, want a 16Mi memory limit and oom_score_adj 985", r)
	}
}
