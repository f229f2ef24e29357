package podutil

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// ResolveRecursiveReadOnly is the kubelet's resolveRecursiveReadOnly:
// whether volumeMount m is to be recursively read-only on a runtime handler
// that does (supported) or does not support it, or why it cannot be. The
// runtime manager refuses a container with that error
// (CreateContainerConfigError); the container status' volumeMounts report
// Disabled for it, as the kubelet does.
func ResolveRecursiveReadOnly(m v1.VolumeMount, supported bool) (bool, error) {
	if m.RecursiveReadOnly == nil || *m.RecursiveReadOnly == v1.RecursiveReadOnlyDisabled {
		return false, nil
	}
	if !m.ReadOnly {
		return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not read-only", m.Name)
	}
	if m.MountPropagation != nil && *m.MountPropagation != v1.MountPropagationNone {
		return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not compatible with propagation %q",
			m.Name, *m.MountPropagation)
	}
	switch mode := *m.RecursiveReadOnly; mode {
	case v1.RecursiveReadOnlyIfPossible:
		return supported, nil
	case v1.RecursiveReadOnlyEnabled:
		if !supported {
			return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not supported by the runtime", m.Name)
		}
		return true, nil
	default:
		return false, fmt.Errorf("unknown recursive read-only mode %q", mode)
	}
}

// VolumeMountStatuses is what the kubelet's convertToAPIContainerStatuses
// reports of container c's volumeMounts before the container exists (the
// status then keeps it, immutable): name, mountPath and readOnly, and for a
// read-only mount its recursiveReadOnly resolved (Enabled or Disabled; a
// mount that cannot be resolved is Disabled). supported is whether the
// pod's runtime handler supports recursive read-only mounts.
func VolumeMountStatuses(c *v1.Container, supported bool) []v1.VolumeMountStatus {
	var out []v1.VolumeMountStatus
	for _, vm := range c.VolumeMounts {
		s := v1.VolumeMountStatus{Name: vm.Name, MountPath: vm.MountPath, ReadOnly: vm.ReadOnly}
		if vm.ReadOnly {
			mode := v1.RecursiveReadOnlyDisabled
			if rro, err := ResolveRecursiveReadOnly(vm, supported); err == nil && rro {
				mode = v1.RecursiveReadOnlyEnabled
			}
			s.RecursiveReadOnly = &mode
		}
		out = append(out, s)
	}
	return out
}
