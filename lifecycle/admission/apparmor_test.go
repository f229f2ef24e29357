package admission

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestAppArmorAdmit(t *testing.T) {
	localhost := func(name string) *v1.AppArmorProfile {
		return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: &name}
	}
	podProfile := func(p *v1.AppArmorProfile) func(*v1.Pod) {
		return func(pod *v1.Pod) { pod.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: p} }
	}
	containerProfile := func(p *v1.AppArmorProfile) func(*v1.Pod) {
		return func(pod *v1.Pod) { pod.Spec.Containers[0].SecurityContext = &v1.SecurityContext{AppArmorProfile: p} }
	}
	annotation := func(container, value string) func(*v1.Pod) {
		return func(pod *v1.Pod) {
			pod.Annotations = map[string]string{v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + container: value}
		}
	}
	phase := func(ph v1.PodPhase) func(*v1.Pod) { return func(pod *v1.Pod) { pod.Status.Phase = ph } }
	const disabled = "Cannot enforce AppArmor: AppArmor is not enabled on the host"
	for name, tc := range map[string]struct {
		enabled bool
		pod     *v1.Pod
		message string // "" admitted
	}{
		"no profile, disabled host":          {pod: pod("p")},
		"pod Localhost, disabled host":       {pod: pod("p", podProfile(localhost("k8s-deny-write"))), message: disabled},
		"pod RuntimeDefault, disabled host":  {pod: pod("p", podProfile(&v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault})), message: disabled},
		"pod Unconfined, disabled host":      {pod: pod("p", podProfile(&v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}))},
		"container Localhost, disabled host": {pod: pod("p", containerProfile(localhost("x"))), message: disabled},
		"init container profile, disabled host": {pod: pod("p", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "i", SecurityContext: &v1.SecurityContext{AppArmorProfile: localhost("x")}}}
		}), message: disabled},
		"ephemeral container profile, disabled host": {pod: pod("p", func(p *v1.Pod) {
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "e",
				SecurityContext: &v1.SecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}}}}
		}), message: disabled},
		"annotation localhost, disabled host":    {pod: pod("p", annotation("c", "localhost/x")), message: disabled},
		"annotation runtime/default, disabled":   {pod: pod("p", annotation("c", "runtime/default")), message: disabled},
		"annotation unconfined, disabled host":   {pod: pod("p", annotation("c", "unconfined"))},
		"annotation of another container counts": {pod: pod("p", annotation("other", "localhost/x")), message: disabled},
		"running pod not rechecked":              {pod: pod("p", podProfile(localhost("x")), phase(v1.PodRunning))},
		"pending pod checked":                    {pod: pod("p", podProfile(localhost("x")), phase(v1.PodPending)), message: disabled},
		"Localhost, enabled host":                {enabled: true, pod: pod("p", podProfile(localhost("x")))},
		"empty Localhost name, enabled host": {enabled: true, pod: pod("p", containerProfile(localhost(" "))),
			message: `Cannot enforce AppArmor: invalid empty AppArmor profile name: "&AppArmorProfile{Type:Localhost,LocalhostProfile:* ,}"`},
		"empty annotation name, enabled host": {enabled: true, pod: pod("p", annotation("c", "localhost/")),
			message: `Cannot enforce AppArmor: invalid empty AppArmor profile name: "&AppArmorProfile{Type:Localhost,LocalhostProfile:*,}"`},
	} {
		t.Run(name, func(t *testing.T) {
			r := NewAppArmor(tc.enabled).Admit(tc.pod)
			if tc.message == "" {
				if !r.Admit {
					t.Fatalf("rejected: %+v", r)
				}
				return
			}
			if r.Admit || r.Reason != ReasonAppArmor || r.Message != tc.message {
				t.Fatalf("got %+v, want reason %q message %q", r, ReasonAppArmor, tc.message)
			}
		})
	}
}

func TestAppArmorNilAdmitsAll(t *testing.T) {
	var a *AppArmor
	p := pod("p")
	p.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}
	if r := a.Admit(p); !r.Admit {
		t.Fatalf("nil AppArmor rejected: %+v", r)
	}
}
