package cm

import (
	"reflect"
	"testing"

	"github.com/crivk/crivk/internal/testutil"
	"github.com/crivk/crivk/podutil"
	"github.com/opencontainers/cgroups"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestPodResourcesPodLevel checks the pod cgroup values of pods with
// pod-level resources (spec.resources) against the kubelet's
// ResourceConfigForPod with PodLevelResources on, cgroup v1, CFS quota on.
// The cases are those of the node e2e suite's pod_level_resources.go
// (test/e2e/common/node), after the API server's defaulting, plus overhead
// and init containers.
func TestPodResourcesPodLevel(t *testing.T) {
	rr := func(req, lim v1.ResourceList) v1.ResourceRequirements {
		return v1.ResourceRequirements{Requests: req, Limits: lim}
	}
	res := testutil.Resources
	const mi = 1 << 20
	for name, tc := range map[string]struct {
		podLevel   *v1.ResourceRequirements
		containers []v1.ResourceRequirements
		sidecars   []v1.ResourceRequirements // init containers before inits, restartPolicy Always
		inits      []v1.ResourceRequirements
		overhead   v1.ResourceList
		wantQOS    v1.PodQOSClass
		want       cgroups.Resources
	}{
		"guaranteed at pod level, containers without resources": {
			podLevel: &v1.ResourceRequirements{Requests: res("100m", "100Mi"), Limits: res("100m", "100Mi")}, containers: []v1.ResourceRequirements{{}, {}},
			wantQOS: v1.PodQOSGuaranteed, want: cgroups.Resources{CpuShares: 102, CpuQuota: 10000, CpuPeriod: quotaPeriod, Memory: 100 * mi},
		},
		"guaranteed at pod level, burstable containers": {
			podLevel:   &v1.ResourceRequirements{Requests: res("100m", "100Mi"), Limits: res("100m", "100Mi")},
			containers: []v1.ResourceRequirements{rr(res("50m", "50Mi"), res("100m", "100Mi")), rr(res("50m", "50Mi"), res("100m", "100Mi"))},
			wantQOS:    v1.PodQOSGuaranteed, want: cgroups.Resources{CpuShares: 102, CpuQuota: 10000, CpuPeriod: quotaPeriod, Memory: 100 * mi},
		},
		"pod-level limits, container requests": {
			podLevel:   &v1.ResourceRequirements{Limits: res("100m", "100Mi")},
			containers: []v1.ResourceRequirements{rr(res("50m", "50Mi"), nil), rr(res("30m", "30Mi"), nil)},
			wantQOS:    v1.PodQOSBurstable, want: cgroups.Resources{CpuShares: 81, CpuQuota: 10000, CpuPeriod: quotaPeriod, Memory: 100 * mi},
		},
		// The kubelet keeps the containers' limits declared when the pod
		// sets requests only: the pod cgroup gets their sums.
		"pod-level requests, containers with limits": {
			podLevel:   &v1.ResourceRequirements{Requests: res("100m", "100Mi")},
			containers: []v1.ResourceRequirements{rr(res("50m", "50Mi"), res("50m", "50Mi")), rr(res("50m", "50Mi"), res("50m", "50Mi"))},
			wantQOS:    v1.PodQOSBurstable, want: cgroups.Resources{CpuShares: 102, CpuQuota: 10000, CpuPeriod: quotaPeriod, Memory: 100 * mi},
		},
		"pod-level requests above guaranteed containers": {
			podLevel:   &v1.ResourceRequirements{Requests: res("100m", "100Mi")},
			containers: []v1.ResourceRequirements{rr(res("30m", "30Mi"), res("30m", "30Mi")), rr(res("30m", "30Mi"), res("30m", "30Mi"))},
			wantQOS:    v1.PodQOSBurstable, want: cgroups.Resources{CpuShares: 102, CpuQuota: 6000, CpuPeriod: quotaPeriod, Memory: 60 * mi},
		},
		"pod-level requests, one container without limits": {
			podLevel:   &v1.ResourceRequirements{Requests: res("100m", "100Mi")},
			containers: []v1.ResourceRequirements{rr(res("50m", "50Mi"), res("50m", "50Mi")), rr(res("30m", "30Mi"), nil)},
			wantQOS:    v1.PodQOSBurstable, want: cgroups.Resources{CpuShares: 102},
		},
		"pod-level cpu limit only": {
			podLevel:   &v1.ResourceRequirements{Requests: res("50m", ""), Limits: res("100m", "")},
			containers: []v1.ResourceRequirements{rr(nil, nil)},
			wantQOS:    v1.PodQOSBurstable, want: cgroups.Resources{CpuShares: 51, CpuQuota: 10000, CpuPeriod: quotaPeriod},
		},
		"pod-level memory request, container cpu request": {
			podLevel:   &v1.ResourceRequirements{Requests: res("", "200Mi"), Limits: res("200m", "200Mi")},
			containers: []v1.ResourceRequirements{rr(res("100m", "100Mi"), res("100m", "100Mi")), {}},
			wantQOS:    v1.PodQOSBurstable, want: cgroups.Resources{CpuShares: 102, CpuQuota: 20000, CpuPeriod: quotaPeriod, Memory: 200 * mi},
		},
		"guaranteed at pod level with overhead": {
			podLevel: &v1.ResourceRequirements{Requests: res("100m", "100Mi"), Limits: res("100m", "100Mi")}, containers: []v1.ResourceRequirements{{}},
			overhead: res("10m", "10Mi"),
			wantQOS:  v1.PodQOSGuaranteed, want: cgroups.Resources{CpuShares: 112, CpuQuota: 11000, CpuPeriod: quotaPeriod, Memory: 110 * mi},
		},
		// Without pod-level resources an init container without limits
		// leaves the limits undeclared (PodLimits' ContainerFn sees it).
		"init container without limits": {
			containers: []v1.ResourceRequirements{rr(res("100m", "100Mi"), res("200m", "200Mi"))},
			inits:      []v1.ResourceRequirements{rr(res("10m", ""), nil)},
			wantQOS:    v1.PodQOSBurstable, want: cgroups.Resources{CpuShares: 102},
		},
		// v1.37 looks at each container's own limits: a plain init
		// container without limits after a sidecar with limits leaves them
		// undeclared (v1.35's ContainerFn saw it with the sidecar's limits
		// added, and wrote quota 25000 and 250Mi).
		"init container without limits after a sidecar with limits": {
			containers: []v1.ResourceRequirements{rr(res("100m", "100Mi"), res("200m", "200Mi"))},
			sidecars:   []v1.ResourceRequirements{rr(res("50m", "50Mi"), res("50m", "50Mi"))},
			inits:      []v1.ResourceRequirements{rr(res("10m", ""), nil)},
			wantQOS:    v1.PodQOSBurstable, want: cgroups.Resources{CpuShares: 153},
		},
		"every container with limits, a sidecar included": {
			containers: []v1.ResourceRequirements{rr(res("100m", "100Mi"), res("200m", "200Mi"))},
			sidecars:   []v1.ResourceRequirements{rr(res("50m", "50Mi"), res("50m", "50Mi"))},
			inits:      []v1.ResourceRequirements{rr(res("10m", "10Mi"), res("10m", "10Mi"))},
			wantQOS:    v1.PodQOSBurstable, want: cgroups.Resources{CpuShares: 153, CpuQuota: 25000, CpuPeriod: quotaPeriod, Memory: 250 * mi},
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := pod("u", tc.containers...)
			p.Spec.Resources = tc.podLevel
			p.Spec.Overhead = tc.overhead
			for i, r := range tc.sidecars {
				p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: "sidecar" + string(rune('a'+i)), Resources: r,
					RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)})
			}
			for i, r := range tc.inits {
				p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: "init" + string(rune('a'+i)), Resources: r})
			}
			if q := podutil.QOSClass(p); q != tc.wantQOS {
				t.Errorf("QoS class %s, want %s", q, tc.wantQOS)
			}
			got := PodResources(p)
			tc.want.SkipDevices = true
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("PodResources:\n got shares %d quota %d period %d memory %d\nwant shares %d quota %d period %d memory %d",
					got.CpuShares, got.CpuQuota, got.CpuPeriod, got.Memory, tc.want.CpuShares, tc.want.CpuQuota, tc.want.CpuPeriod, tc.want.Memory)
			}
		})
	}
}
