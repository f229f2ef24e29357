package status

import (
	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// volumeMounts is a container status' volumeMounts, as the kubelet's
// convertToAPIContainerStatuses fills them (the CRI knows no volume names,
// so they come from the spec, not the runtime): a container that does not
// exist yet reports its spec's mounts (podutil.VolumeMountStatuses); one
// that exists keeps what the previous status said of it, the field being
// immutable once published, and reports none when there is no previous
// status of it (the kubelet's too).
func volumeMounts(in Input, c *v1.Container, typ cri.ContainerType, exists bool) []v1.VolumeMountStatus {
	if !exists {
		return podutil.VolumeMountStatuses(c, in.RecursiveReadOnlyMounts)
	}
	if prev := previousStatus(in.Previous, c.Name, typ); prev != nil {
		return prev.VolumeMounts
	}
	return nil
}

// previousStatus is the status of the named container of kind typ in prev.
func previousStatus(prev v1.PodStatus, name string, typ cri.ContainerType) *v1.ContainerStatus {
	list := prev.ContainerStatuses
	switch typ {
	case cri.ContainerTypeInit:
		list = prev.InitContainerStatuses
	case cri.ContainerTypeEphemeral:
		list = prev.EphemeralContainerStatuses
	}
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

// containerUser is a container status' user: the identity the runtime
// reports its process runs with (the kubelet's convertContainerStatusUser,
// SupplementalGroupsPolicy being on); nil when the runtime reports none.
func containerUser(u *runtimeapi.ContainerUser) *v1.ContainerUser {
	if u == nil {
		return nil
	}
	out := &v1.ContainerUser{}
	if l := u.GetLinux(); l != nil {
		out.Linux = &v1.LinuxContainerUser{
			UID:                l.GetUid(),
			GID:                l.GetGid(),
			SupplementalGroups: l.GetSupplementalGroups(),
		}
	}
	return out
}
