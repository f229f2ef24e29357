package cri

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestContainerSELinuxOptions: a container without SELinux options of its
// own gets the pod's; one with its own gets them whole, not merged field
// by field with the pod's (the kubelet's DetermineEffectiveSecurityContext).
func TestContainerSELinuxOptions(t *testing.T) {
	podOpts := &v1.SELinuxOptions{User: "system_u", Role: "system_r", Type: "pod_t", Level: "s0:c1,c2"}
	ctrOpts := &v1.SELinuxOptions{Level: "s0:c3,c4"}
	for name, tc := range map[string]struct {
		pod, ctr *v1.SELinuxOptions
		want     *runtimeapi.SELinuxOption
	}{
		"none": {},
		"the pod's": {pod: podOpts,
			want: &runtimeapi.SELinuxOption{User: "system_u", Role: "system_r", Type: "pod_t", Level: "s0:c1,c2"}},
		"the container's": {ctr: ctrOpts, want: &runtimeapi.SELinuxOption{Level: "s0:c3,c4"}},
		"the container's whole over the pod's": {pod: podOpts, ctr: ctrOpts,
			want: &runtimeapi.SELinuxOption{Level: "s0:c3,c4"}},
	} {
		t.Run(name, func(t *testing.T) {
			pod := syncPod(v1.RestartPolicyAlways, image("a", "busybox:1.36"))
			if tc.pod != nil {
				pod.Spec.SecurityContext = &v1.PodSecurityContext{SELinuxOptions: tc.pod}
			}
			if tc.ctr != nil {
				pod.Spec.Containers[0].SecurityContext = &v1.SecurityContext{SELinuxOptions: tc.ctr}
			}
			cfg, err := ContainerConfig(pod, &pod.Spec.Containers[0], ContainerTypeRegular, 0, "sha256:x", &RunContainerOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Linux.SecurityContext.SelinuxOptions; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("SELinux options %v, want %v", got, tc.want)
			}
		})
	}
}
