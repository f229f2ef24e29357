package admission

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestAdmitSupplementalGroupsPolicy(t *testing.T) {
	policy := func(p v1.SupplementalGroupsPolicy) func(*v1.Pod) {
		return func(pod *v1.Pod) { pod.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: &p} }
	}
	supporting := node()
	supporting.Status.Features = &v1.NodeFeatures{SupplementalGroupsPolicy: ptr.To(true)}
	for name, tc := range map[string]struct {
		pod    *v1.Pod
		node   *v1.Node
		reject bool
	}{
		"unset":                         {pod: pod("p"), node: node()},
		"Merge":                         {pod: pod("p", policy(v1.SupplementalGroupsPolicyMerge)), node: node()},
		"Strict, node without features": {pod: pod("p", policy(v1.SupplementalGroupsPolicyStrict)), node: node(), reject: true},
		"Strict, node supporting it":    {pod: pod("p", policy(v1.SupplementalGroupsPolicyStrict)), node: supporting},
		"Strict comes before resources": {pod: pod("p", policy(v1.SupplementalGroupsPolicyStrict), requests("100", "")), node: node(), reject: true},
	} {
		t.Run(name, func(t *testing.T) {
			r := Admit(tc.pod, tc.node, nil)
			if !tc.reject {
				if !r.Admit {
					t.Fatalf("rejected: %+v", r)
				}
				return
			}
			if r.Admit || r.Reason != "SupplementalGroupsPolicyNotSupported" || r.Message != "SupplementalGroupsPolicy=Strict is not supported in this node" {
				t.Fatalf("got %+v", r)
			}
		})
	}
}
