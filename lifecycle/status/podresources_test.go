package status

import (
	"testing"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestPodLevelStatusResources: status.resources and
// status.allocatedResources at pod level, as the kubelet v1.37's
// convertToAPIPodLevelResourcesStatus and PodRequests set them (the e2e
// spec "PLR Pod InPlace Resize" reads them): the effective allocation
// until the API shows the pod Running, then the pod cgroup's values where
// it has them.
func TestPodLevelStatusResources(t *testing.T) {
	res := testutil.Resources
	rr := func(req, lim v1.ResourceList) *v1.ResourceRequirements {
		return &v1.ResourceRequirements{Requests: req, Limits: lim}
	}
	withLimits := func(c v1.Container, req, lim v1.ResourceList) v1.Container {
		c.Resources = v1.ResourceRequirements{Requests: req, Limits: lim}
		return c
	}
	plain := v1.Container{Name: "a", Image: "busybox"}
	sidecar := v1.Container{Name: "s", Image: "busybox", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)}
	cgroup := func(cpuMilli, limitMilli, mem int64) *PodCgroup {
		quota := limitMilli * 100
		if limitMilli == 0 {
			quota = -1
		}
		return &PodCgroup{CPUShares: cpuMilli * 1024 / 1000, CPUQuota: quota, CPUPeriod: 100000, MemoryLimit: mem}
	}
	for name, tc := range map[string]struct {
		podLevel      *v1.ResourceRequirements
		containers    []v1.Container
		initContainer []v1.Container
		apiPhase      v1.PodPhase
		prev          v1.PodStatus
		cgroup        *PodCgroup
		want          *v1.ResourceRequirements
		wantAllocated v1.ResourceList
	}{
		"pending, pod-level resources: the pod's requests and limits": {
			podLevel:   rr(res("100m", "100Mi"), res("200m", "200Mi")),
			containers: []v1.Container{withLimits(plain, res("50m", "50Mi"), nil)},
			apiPhase:   v1.PodPending,
			want:       rr(res("100m", "100Mi"), res("200m", "200Mi")), wantAllocated: res("100m", "100Mi"),
		},
		"pending, pod-level CPU only: memory from the containers": {
			podLevel:   rr(res("100m", ""), res("200m", "")),
			containers: []v1.Container{withLimits(plain, res("50m", "50Mi"), res("", "80Mi"))},
			want:       rr(res("100m", "50Mi"), res("200m", "80Mi")), wantAllocated: res("100m", "50Mi"),
		},
		"pending, no pod-level resources: containers and sidecars summed": {
			containers:    []v1.Container{withLimits(plain, res("50m", "50Mi"), res("100m", "100Mi"))},
			initContainer: []v1.Container{withLimits(sidecar, res("20m", "10Mi"), res("20m", "10Mi"))},
			want:          rr(res("70m", "60Mi"), res("120m", "110Mi")), wantAllocated: res("70m", "60Mi"),
		},
		"running, the cgroup as allocated": {
			podLevel: rr(res("100m", "100Mi"), res("200m", "200Mi")), containers: []v1.Container{plain},
			apiPhase: v1.PodRunning, cgroup: cgroup(100, 200, 200<<20),
			want: rr(res("100m", "100Mi"), res("200m", "200Mi")), wantAllocated: res("100m", "100Mi"),
		},
		"running, a resize in progress: the cgroup's values, the allocated memory request": {
			podLevel: rr(res("100m", "100Mi"), res("200m", "200Mi")), containers: []v1.Container{plain},
			apiPhase: v1.PodRunning, cgroup: cgroup(50, 100, 150<<20),
			want: rr(res("50m", "100Mi"), res("100m", "150Mi")), wantAllocated: res("100m", "100Mi"),
		},
		"running, cgroup v2's lossy weight: the allocated CPU request": {
			podLevel: rr(res("20m", ""), res("30m", "")), containers: []v1.Container{plain},
			apiPhase: v1.PodRunning, cgroup: &PodCgroup{CPUShares: 2, CPUQuota: 3000, CPUPeriod: 100000},
			want: rr(res("20m", ""), res("30m", "")), wantAllocated: res("20m", ""),
		},
		"running, tiny values at the floors: the allocated ones": {
			podLevel: rr(res("1m", ""), res("5m", "")), containers: []v1.Container{plain},
			apiPhase: v1.PodRunning, cgroup: &PodCgroup{CPUShares: 2, CPUQuota: 1000, CPUPeriod: 100000},
			want: rr(res("1m", ""), res("5m", "")), wantAllocated: res("1m", ""),
		},
		"running, no cgroup read: the previous status' values": {
			podLevel: rr(res("100m", "100Mi"), res("200m", "200Mi")), containers: []v1.Container{plain},
			apiPhase: v1.PodRunning,
			prev:     v1.PodStatus{Phase: v1.PodRunning, Resources: rr(res("50m", "1Gi"), res("100m", "150Mi"))},
			want:     rr(res("50m", "100Mi"), res("100m", "150Mi")), wantAllocated: res("100m", "100Mi"),
		},
		"running, no cgroup read, previous status pending: the allocation": {
			podLevel: rr(res("100m", "100Mi"), res("200m", "200Mi")), containers: []v1.Container{plain},
			apiPhase: v1.PodRunning,
			prev:     v1.PodStatus{Phase: v1.PodPending, Resources: rr(res("50m", "1Gi"), res("100m", "150Mi"))},
			want:     rr(res("100m", "100Mi"), res("200m", "200Mi")), wantAllocated: res("100m", "100Mi"),
		},
		"running burstable pod without pod-level resources: cgroup CPU request, containers' memory request": {
			containers: []v1.Container{withLimits(plain, res("250m", "64Mi"), nil)},
			apiPhase:   v1.PodRunning, cgroup: cgroup(250, 0, 0),
			want: rr(res("250m", "64Mi"), v1.ResourceList{}), wantAllocated: res("250m", "64Mi"),
		},
		"running best-effort pod: nothing": {
			containers: []v1.Container{plain}, apiPhase: v1.PodRunning, cgroup: &PodCgroup{CPUShares: 2, CPUQuota: -1, CPUPeriod: 100000},
			want: rr(v1.ResourceList{}, v1.ResourceList{}), wantAllocated: v1.ResourceList{},
		},
	} {
		t.Run(name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid-1", Name: "web", Namespace: "prod"},
				Spec:   v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, Resources: tc.podLevel, Containers: tc.containers, InitContainers: tc.initContainer},
				Status: v1.PodStatus{Phase: tc.apiPhase}}
			s := Generate(Input{Pod: pod, Previous: tc.prev, Runtime: rtStatus(true), RuntimeName: "containerd", Now: now, PodCgroup: tc.cgroup})
			if !apiequality.Semantic.DeepEqual(s.Resources, tc.want) {
				t.Errorf("status.resources = %v, want %v", s.Resources, tc.want)
			}
			if !apiequality.Semantic.DeepEqual(s.AllocatedResources, tc.wantAllocated) {
				t.Errorf("status.allocatedResources = %v, want %v", s.AllocatedResources, tc.wantAllocated)
			}
		})
	}
}
