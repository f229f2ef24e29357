package lifecycle

import (
	"context"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// makeEnvironment resolves the environment of container c of pod.
// TODO(issue 5): the kubelet's full semantics (fieldRef, resourceFieldRef,
// configMapKeyRef/secretKeyRef, envFrom, service links, $(VAR) expansion).
// Until then: nil, so the runtime manager uses the spec's literal values
// (virtual-kubelet resolves the rest before CreatePod).
func (e *Engine) makeEnvironment(_ context.Context, _ *v1.Pod, _ *v1.Container, _ []string) ([]*runtimeapi.KeyValue, error) {
	return nil, nil
}
