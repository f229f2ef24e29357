package podutil

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// AppArmorProfile is the AppArmor profile container c of pod runs with,
// nil for none: the container's securityContext field, else its
// deprecated container.apparmor.security.beta.kubernetes.io/<name>
// annotation, else the pod's securityContext field (the kubelet's
// pkg/security/apparmor GetProfile). An annotation with an unknown value
// is ignored, as the kubelet does. Admission (lifecycle/admission) and the
// CRI config (cri) both read it, so that the profile checked is the
// profile run.
func AppArmorProfile(pod *v1.Pod, c *v1.Container) *v1.AppArmorProfile {
	if c.SecurityContext != nil && c.SecurityContext.AppArmorProfile != nil {
		return c.SecurityContext.AppArmorProfile
	}
	if v, ok := pod.Annotations[v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+c.Name]; ok {
		switch {
		case v == v1.DeprecatedAppArmorBetaProfileRuntimeDefault:
			return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}
		case v == v1.DeprecatedAppArmorBetaProfileNameUnconfined:
			return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}
		case strings.HasPrefix(v, v1.DeprecatedAppArmorBetaProfileNamePrefix):
			name := strings.TrimPrefix(v, v1.DeprecatedAppArmorBetaProfileNamePrefix)
			return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: &name}
		}
	}
	if sc := pod.Spec.SecurityContext; sc != nil && sc.AppArmorProfile != nil {
		return sc.AppArmorProfile
	}
	return nil
}

// AllContainers calls f with every container of pod: init, regular, then
// ephemeral (as their common fields), until f returns false.
func AllContainers(pod *v1.Pod, f func(*v1.Container) bool) {
	for i := range pod.Spec.InitContainers {
		if !f(&pod.Spec.InitContainers[i]) {
			return
		}
	}
	for i := range pod.Spec.Containers {
		if !f(&pod.Spec.Containers[i]) {
			return
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if !f((*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)) {
			return
		}
	}
}
