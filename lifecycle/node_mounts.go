package lifecycle

import (
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// nodeMounts returns the mounts the node itself manages for container c:
// TODO(issue 5): the kubelet-managed /etc/hosts and the termination message
// file. None yet.
func (e *Engine) nodeMounts(_ *v1.Pod, _ *v1.Container, _ []string) ([]*runtimeapi.Mount, error) {
	return nil, nil
}
