package cri

import (
	"context"
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

// relabelHelper gives container c one mount per volumeMount, asking for
// relabelling as the volume's entry in relabel says, and a termination
// message file mount that asks for it, as package lifecycle does.
type relabelHelper struct{ relabel map[string]bool }

func (h relabelHelper) GenerateRunContainerOptions(_ context.Context, _ *v1.Pod, c *v1.Container, _ []string, _ ImageVolumes) (*RunContainerOptions, error) {
	opts := &RunContainerOptions{}
	for _, vm := range c.VolumeMounts {
		opts.Mounts = append(opts.Mounts, &runtimeapi.Mount{ContainerPath: vm.MountPath, HostPath: "/host/" + vm.Name,
			Readonly: vm.ReadOnly, SelinuxRelabel: h.relabel[vm.Name]})
	}
	opts.Mounts = append(opts.Mounts, &runtimeapi.Mount{ContainerPath: "/dev/termination-log", HostPath: "/host/termination-log", SelinuxRelabel: true})
	return opts, nil
}
func (relabelHelper) PullSecrets(context.Context, *v1.Pod) []v1.Secret { return nil }

// TestSyncPodSELinuxRelabel: the mounts that ask for relabelling get CRI
// selinux_relabel only on a host with SELinux enabled (Config.SELinuxEnabled,
// the kubelet's selinux.GetEnabled() in kuberuntime's makeMounts); on a host
// without it no mount does, the termination message file's included. The
// rest of each mount is left as the helper made it.
func TestSyncPodSELinuxRelabel(t *testing.T) {
	for name, tc := range map[string]struct {
		enabled bool
		want    map[string]bool // container path -> selinux_relabel
	}{
		"SELinux enabled: the mounts that ask": {enabled: true,
			want: map[string]bool{"/data": true, "/conf": true, "/host": false, "/dev/termination-log": true}},
		"SELinux disabled: none": {enabled: false,
			want: map[string]bool{"/data": false, "/conf": false, "/host": false, "/dev/termination-log": false}},
	} {
		t.Run(name, func(t *testing.T) {
			f := newSyncFixture(t)
			f.is.SetFakeImages([]string{"busybox:1.36"})
			f.rt.cfg.SELinuxEnabled = func() bool { return tc.enabled }
			f.rt.SetRuntimeHelper(relabelHelper{relabel: map[string]bool{"data": true, "conf": true, "host": false}})
			c := image("a", "busybox:1.36")
			c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "conf", MountPath: "/conf", ReadOnly: true}, {Name: "host", MountPath: "/host"}}
			res, _ := f.sync(t, syncPod(v1.RestartPolicyAlways, c))
			if err := res.Error(); err != nil {
				t.Fatalf("SyncPod: %v", err)
			}
			if len(f.rs.created) != 1 {
				t.Fatalf("created %d containers", len(f.rs.created))
			}
			for _, cfg := range f.rs.created {
				got := map[string]bool{}
				for _, m := range cfg.GetMounts() {
					got[m.GetContainerPath()] = m.GetSelinuxRelabel()
					if m.GetHostPath() == "" || (m.GetContainerPath() == "/conf") != m.GetReadonly() {
						t.Errorf("mount %v changed", m)
					}
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("selinux_relabel by container path %v, want %v", got, tc.want)
				}
			}
		})
	}
}
