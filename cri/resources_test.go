package cri

import (
	"testing"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

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
		"guaranteed": {req: testutil.Resources("500m", "16Mi"), lim: testutil.Resources("500m", "16Mi"),
			want: &runtimeapi.LinuxContainerResources{CpuShares: 512, CpuPeriod: 100000, CpuQuota: 50000, MemoryLimitInBytes: 16 << 20, OomScoreAdj: -997}},
		"burstable, a quarter of the memory": {req: testutil.Resources("250m", "1Gi"), lim: testutil.Resources("1", "2Gi"),
			want: &runtimeapi.LinuxContainerResources{CpuShares: 256, CpuPeriod: 100000, CpuQuota: 100000, MemoryLimitInBytes: 2 * gi, OomScoreAdj: 750}},
		"burstable, limit only sets shares": {lim: testutil.Resources("", "64Mi"),
			want: &runtimeapi.LinuxContainerResources{CpuShares: 2, CpuPeriod: 100000, MemoryLimitInBytes: 64 << 20, OomScoreAdj: 999}},
		"burstable, tiny cpu limit: quota at least 1ms": {req: testutil.Resources("1m", ""), lim: testutil.Resources("5m", ""),
			want: &runtimeapi.LinuxContainerResources{CpuShares: 2, CpuPeriod: 100000, CpuQuota: 1000, OomScoreAdj: 999}},
		"burstable, request near the node's memory": {req: testutil.Resources("", "4Gi"),
			want: &runtimeapi.LinuxContainerResources{CpuShares: 2, CpuPeriod: 100000, OomScoreAdj: 3}},
		"burstable sidecar no likelier to die than the smallest regular container": {req: testutil.Resources("", "16Mi"), sidecar: true,
			others: []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{Requests: testutil.Resources("", "2Gi")}}},
			want:   &runtimeapi.LinuxContainerResources{CpuShares: 2, CpuPeriod: 100000, OomScoreAdj: 500}},
		"huge cpu request capped": {req: testutil.Resources("1000", ""),
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
	c := v1.Container{Name: "c", Image: "busybox", Resources: v1.ResourceRequirements{Limits: testutil.Resources("", "16Mi"), Requests: testutil.Resources("", "16Mi")}}
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{c}}}
	cfg, err := ContainerConfig(pod, &c, ContainerTypeRegular, 0, "busybox", &RunContainerOptions{MemoryCapacity: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.GetLinux().GetResources(); r.GetMemoryLimitInBytes() != 16<<20 || r.GetOomScoreAdj() != 985 {
		t.Errorf("container config resources %v, want a 16Mi memory limit and oom_score_adj 985", r)
	}
}
