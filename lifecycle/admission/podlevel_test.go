package admission

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestAdmitCountsPodLevelResources: a pod's pod-level requests
// (spec.resources, PodLevelResources beta on) replace its containers' sum
// in admission, for the pod and for the pods already running, with the
// overhead added, as the kubelet's resource fit.
func TestAdmitCountsPodLevelResources(t *testing.T) {
	podLevel := func(mem string) func(*v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse(mem)}}
		}
	}
	overhead := func(mem string) func(*v1.Pod) {
		return func(p *v1.Pod) { p.Spec.Overhead = v1.ResourceList{v1.ResourceMemory: resource.MustParse(mem)} }
	}
	for name, tc := range map[string]struct {
		pod     *v1.Pod
		active  []*v1.Pod
		message string
	}{
		"containers small, pod level too big": {pod: pod("p", requests("", "1Gi"), podLevel("5Gi")),
			message: "Node didn't have enough resource: memory, requested: 5368709120, used: 0, capacity: 4294967296"},
		"pod level plus overhead too big": {pod: pod("p", podLevel("3Gi"), overhead("1536Mi")),
			message: "Node didn't have enough resource: memory, requested: 4831838208, used: 0, capacity: 4294967296"},
		"running pod's pod-level request is used": {pod: pod("p", requests("", "2Gi")), active: []*v1.Pod{pod("q", requests("", "1Gi"), podLevel("3Gi"))},
			message: "Node didn't have enough resource: memory, requested: 2147483648, used: 3221225472, capacity: 4294967296"},
	} {
		t.Run(name, func(t *testing.T) {
			r := Admit(tc.pod, node(), tc.active)
			if tc.message == "" {
				if !r.Admit {
					t.Fatalf("rejected: %+v", r)
				}
				return
			}
			if r.Admit || r.Reason != "OutOfmemory" || r.Message != tc.message {
				t.Fatalf("got %+v, want OutOfmemory %q", r, tc.message)
			}
		})
	}
}
