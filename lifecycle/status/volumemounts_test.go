package status

import (
	"reflect"
	"testing"

	"github.com/crivk/crivk/cri"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// TestContainerStatusVolumeMounts: the statuses' volumeMounts as the
// kubelet's convertToAPIContainerStatuses fills them: from the spec while
// a container does not exist (recursiveReadOnly resolved against the
// handler), then the previous status' value, immutable (a spec that says
// otherwise changes nothing), and none for an existing container with no
// previous status. Init, regular and ephemeral containers alike.
func TestContainerStatusVolumeMounts(t *testing.T) {
	mounts := []v1.VolumeMount{{Name: "cache", MountPath: "/cache"},
		{Name: "cfg", MountPath: "/etc/cfg", ReadOnly: true, RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyIfPossible)}}
	fromSpec := func(rro v1.RecursiveReadOnlyMode) []v1.VolumeMountStatus {
		return []v1.VolumeMountStatus{{Name: "cache", MountPath: "/cache"},
			{Name: "cfg", MountPath: "/etc/cfg", ReadOnly: true, RecursiveReadOnly: ptr.To(rro)}}
	}
	published := []v1.VolumeMountStatus{{Name: "old", MountPath: "/old"}}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod", UID: "uid-1"},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "i", Image: "busybox:1.36", VolumeMounts: mounts}},
			Containers:     []v1.Container{{Name: "a", Image: "busybox:1.36", VolumeMounts: mounts}},
			EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{
				Name: "e", Image: "busybox:1.36", VolumeMounts: mounts}}},
		},
	}
	prevWith := func(vm []v1.VolumeMountStatus) v1.PodStatus {
		return v1.PodStatus{
			InitContainerStatuses:      []v1.ContainerStatus{{Name: "i", VolumeMounts: vm}},
			ContainerStatuses:          []v1.ContainerStatus{{Name: "a", VolumeMounts: vm}},
			EphemeralContainerStatuses: []v1.ContainerStatus{{Name: "e", VolumeMounts: vm}},
		}
	}
	for name, tc := range map[string]struct {
		rt   *cri.PodStatus
		prev v1.PodStatus
		rro  bool
		want []v1.VolumeMountStatus
	}{
		"no container yet: the spec's":                    {rt: rtStatus(true), want: fromSpec(v1.RecursiveReadOnlyDisabled)},
		"no container yet, handler with RRO: Enabled":     {rt: rtStatus(true), rro: true, want: fromSpec(v1.RecursiveReadOnlyEnabled)},
		"no container yet, a previous status: the spec's": {rt: rtStatus(true), prev: prevWith(published), want: fromSpec(v1.RecursiveReadOnlyDisabled)},
		"container exists: the previous status' (immutable)": {rt: rtStatus(true, ini("i", 0, cri.StateExited, 0), reg("a", 0, cri.StateRunning, 0), rtCtr("e", cri.ContainerTypeEphemeral, 0, cri.StateRunning, 0)),
			prev: prevWith(published), want: published},
		"container exists, no previous status: none": {rt: rtStatus(true, ini("i", 0, cri.StateExited, 0), reg("a", 0, cri.StateRunning, 0), rtCtr("e", cri.ContainerTypeEphemeral, 0, cri.StateRunning, 0)),
			rro: true},
	} {
		t.Run(name, func(t *testing.T) {
			s := Generate(Input{Pod: pod, Previous: tc.prev, Runtime: tc.rt, RuntimeName: "containerd", Now: now, RecursiveReadOnlyMounts: tc.rro})
			for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses, s.EphemeralContainerStatuses} {
				if len(list) != 1 {
					t.Fatalf("statuses %+v, want one", list)
				}
				if got := list[0].VolumeMounts; !reflect.DeepEqual(got, tc.want) {
					t.Errorf("%s: volumeMounts = %+v, want %+v", list[0].Name, got, tc.want)
				}
			}
		})
	}
}

// TestContainerStatusUser: the status' user is the runtime's (the CRI
// status' user, the kubelet's convertContainerStatusUser): none when the
// runtime reports none (containerd 1.6), an empty one when it reports no
// Linux part.
func TestContainerStatusUser(t *testing.T) {
	withUser := func(c cri.ContainerStatus, u *runtimeapi.ContainerUser) cri.ContainerStatus {
		c.User = u
		return c
	}
	linux := &runtimeapi.ContainerUser{Linux: &runtimeapi.LinuxContainerUser{Uid: 1000, Gid: 3000, SupplementalGroups: []int64{3000, 4000}}}
	for name, tc := range map[string]struct {
		rt   cri.ContainerStatus
		want *v1.ContainerUser
	}{
		"running, reported": {rt: withUser(reg("a", 0, cri.StateRunning, 0), linux),
			want: &v1.ContainerUser{Linux: &v1.LinuxContainerUser{UID: 1000, GID: 3000, SupplementalGroups: []int64{3000, 4000}}}},
		"exited, reported": {rt: withUser(reg("a", 0, cri.StateExited, 1), linux),
			want: &v1.ContainerUser{Linux: &v1.LinuxContainerUser{UID: 1000, GID: 3000, SupplementalGroups: []int64{3000, 4000}}}},
		"not reported":            {rt: reg("a", 0, cri.StateRunning, 0)},
		"reported, no Linux part": {rt: withUser(reg("a", 0, cri.StateRunning, 0), &runtimeapi.ContainerUser{}), want: &v1.ContainerUser{}},
	} {
		t.Run(name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod", UID: "uid-1"},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a", Image: "busybox:1.36"}}}}
			s := Generate(Input{Pod: pod, Runtime: rtStatus(true, tc.rt), RuntimeName: "containerd", Now: now})
			if got := s.ContainerStatuses[0].User; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("user = %+v, want %+v", got, tc.want)
			}
		})
	}
	// No container yet: no user.
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}}
	if u := Generate(Input{Pod: pod, Runtime: rtStatus(true), Now: now}).ContainerStatuses[0].User; u != nil {
		t.Errorf("waiting container: user %+v, want none", u)
	}
}
