package admission

import (
	v1 "k8s.io/api/core/v1"
)

// ReasonSupplementalGroupsPolicy is the kubelet's rejection reason for a
// pod whose supplementalGroupsPolicy the node cannot apply
// (pkg/kubelet/lifecycle.SupplementalGroupsPolicyNotSupported).
const ReasonSupplementalGroupsPolicy = "SupplementalGroupsPolicyNotSupported"

// supplementalGroupsPolicy refuses a pod asking for
// supplementalGroupsPolicy: Strict (only the groups the pod names, not
// those of the image's /etc/group) on a node that does not advertise the
// feature in status.features (the kubelet's
// rejectPodAdmissionBasedOnSupplementalGroupsPolicy, GA in v1.35). crivk
// advertises no node features: its runtime here (containerd 1.6) reports
// none, so such a pod never runs with the merged groups it refused.
func supplementalGroupsPolicy(pod *v1.Pod, node *v1.Node) Result {
	sc := pod.Spec.SecurityContext
	if sc == nil || sc.SupplementalGroupsPolicy == nil || *sc.SupplementalGroupsPolicy != v1.SupplementalGroupsPolicyStrict {
		return admitted
	}
	if f := node.Status.Features; f != nil && f.SupplementalGroupsPolicy != nil && *f.SupplementalGroupsPolicy {
		return admitted
	}
	return Result{Reason: ReasonSupplementalGroupsPolicy, Message: "SupplementalGroupsPolicy=Strict is not supported in this node"}
}
