package admission

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestAdmitCountsOverhead: a pod's RuntimeClass overhead (spec.overhead,
// set by the API server from the RuntimeClass) counts in admission, for
// the pod and for the pods already running, as on the kubelet.
func TestAdmitCountsOverhead(t *testing.T) {
	overhead := func(mem string) func(*v1.Pod) {
		return func(p *v1.Pod) { p.Spec.Overhead = v1.ResourceList{v1.ResourceMemory: resource.MustParse(mem)} }
	}
	for name, tc := range map[string]struct {
		pod     *v1.Pod
		active  []*v1.Pod
		message string
	}{
		"fits without overhead": {pod: pod("p", requests("", "3Gi"))},
		"overhead makes it too big": {pod: pod("p", requests("", "3Gi"), overhead("1536Mi")),
			message: "Node didn't have enough resource: memory, requested: 4831838208, used: 0, capacity: 4294967296"},
		"running pod's overhead is used": {pod: pod("p", requests("", "2Gi")), active: []*v1.Pod{pod("q", requests("", "1Gi"), overhead("1536Mi"))},
			message: "Node didn't have enough resource: memory, requested: 2147483648, used: 2684354560, capacity: 4294967296"},
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
