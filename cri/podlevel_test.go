package cri

import (
	"testing"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestContainerResourcesPodLevel checks the CRI values of containers of
// pods with pod-level resources against the kubelet's
// generateLinuxContainerResources (getCPULimit, getMemoryLimit) and
// GetContainerOOMScoreAdjust (remainingPodMemReqPerContainer), 4 GiB node.
func TestContainerResourcesPodLevel(t *testing.T) {
	const gi = int64(1) << 30
	res := testutil.Resources
	for name, tc := range map[string]struct {
		podLevel v1.ResourceRequirements
		req, lim v1.ResourceList // of the container checked
		other    v1.ResourceRequirements
		want     *runtimeapi.LinuxContainerResources
	}{
		// Guaranteed at pod level: the container without limits takes the
		// pod's; without a request its shares come from that limit.
		"no container resources under a guaranteed pod": {podLevel: v1.ResourceRequirements{Requests: res("100m", "100Mi"), Limits: res("100m", "100Mi")},
			want: &runtimeapi.LinuxContainerResources{CpuShares: 102, CpuPeriod: 100000, CpuQuota: 10000, MemoryLimitInBytes: 100 << 20, OomScoreAdj: -997}},
		"own limits kept": {podLevel: v1.ResourceRequirements{Requests: res("200m", "200Mi"), Limits: res("200m", "200Mi")},
			req: res("50m", "50Mi"), lim: res("100m", "100Mi"),
			want: &runtimeapi.LinuxContainerResources{CpuShares: 51, CpuPeriod: 100000, CpuQuota: 10000, MemoryLimitInBytes: 100 << 20, OomScoreAdj: -997}},
		"memory limit only at pod level": {podLevel: v1.ResourceRequirements{Requests: res("", "1Gi"), Limits: res("", "1Gi")},
			req: res("100m", ""),
			// 1Gi minus the other container's 512Mi, shared by two: 256Mi each.
			other: v1.ResourceRequirements{Requests: res("", "512Mi")},
			want:  &runtimeapi.LinuxContainerResources{CpuShares: 102, CpuPeriod: 100000, MemoryLimitInBytes: gi, OomScoreAdj: 938}},
		"pod-level requests only": {podLevel: v1.ResourceRequirements{Requests: res("1", "2Gi")},
			req: res("", "1Gi"),
			// (2Gi - 1Gi) / 2 added to 1Gi: 1.5Gi of 4Gi.
			want: &runtimeapi.LinuxContainerResources{CpuShares: 2, CpuPeriod: 100000, OomScoreAdj: 625}},
	} {
		t.Run(name, func(t *testing.T) {
			pl := tc.podLevel
			c := v1.Container{Name: "c", Resources: v1.ResourceRequirements{Requests: tc.req, Limits: tc.lim}}
			pod := &v1.Pod{Spec: v1.PodSpec{Resources: &pl, Containers: []v1.Container{c, {Name: "other", Resources: tc.other}}}}
			got := containerResources(pod, &c, ContainerTypeRegular, 4*gi)
			if got.String() != tc.want.String() {
				t.Errorf("resources\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}
