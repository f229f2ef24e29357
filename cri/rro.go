package cri

import (
	"context"
	"fmt"

	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Recursive read-only mounts (volumeMounts[].recursiveReadOnly, GA): a
// read-only mount whose submounts are read-only too. Only the runtime can
// make one, and it says whether it can per handler in its Status
// (RuntimeHandlerFeatures.recursive_read_only_mounts; containerd 1.6 reports
// no handlers at all, so none). As the kubelet's makeMounts:
//
//	Disabled or unset      a plain mount
//	IfPossible             recursive where the handler can, else plain
//	Enabled                recursive, or the container is not created:
//	                       CreateContainerConfigError "failed to resolve
//	                       recursive read-only mode: volume "v" requested
//	                       recursive read-only mode, but it is not
//	                       supported by the runtime"
//
// and either of the last two on a mount that is not readOnly, or that has a
// propagation other than None, is that error too.

// applyRecursiveReadOnly resolves the recursiveReadOnly of container c's
// volumeMounts for pod and marks the matching mounts (by container path)
// recursive. The runtime's Status is only asked when a mount asks for it.
// The error is the kubelet's CreateContainerConfigError text.
func (r *Runtime) applyRecursiveReadOnly(ctx context.Context, pod *v1.Pod, c *v1.Container, mounts []*runtimeapi.Mount) error {
	asked := false
	for _, vm := range c.VolumeMounts {
		if vm.RecursiveReadOnly != nil && *vm.RecursiveReadOnly != v1.RecursiveReadOnlyDisabled {
			asked = true
		}
	}
	if !asked {
		return nil
	}
	supported := r.handlerSupportsRRO(ctx, pod)
	for _, vm := range c.VolumeMounts {
		rro, err := podutil.ResolveRecursiveReadOnly(vm, supported)
		if err != nil {
			return fmt.Errorf("failed to resolve recursive read-only mode: %w", err)
		}
		if !rro {
			continue
		}
		for _, m := range mounts {
			if m.ContainerPath == vm.MountPath {
				m.RecursiveReadOnly = true
			}
		}
	}
	return nil
}

// handlerSupportsRRO reports whether the runtime handler pod runs with
// supports recursive read-only mounts (the kubelet's
// runtimeClassSupportsRecursiveReadOnlyMounts): an unknown RuntimeClass, a
// failing Status, a runtime that reports no handlers or a handler it does
// not report all mean no.
func (r *Runtime) handlerSupportsRRO(ctx context.Context, pod *v1.Pod) bool {
	handler, err := r.runtimeHandler(pod)
	if err != nil {
		return false
	}
	resp, err := r.rs.Status(ctx, false)
	if err != nil {
		return false
	}
	for _, h := range resp.GetRuntimeHandlers() {
		if h.GetName() == handler {
			return h.GetFeatures().GetRecursiveReadOnlyMounts()
		}
	}
	return false
}

// RecursiveReadOnlyMountsSupported reports whether the runtime handler pod
// runs with supports recursive read-only mounts, as the last CRI Status
// (the node status loop's) said: the kubelet's
// runtimeClassSupportsRecursiveReadOnlyMounts, which reads its cached
// runtime state rather than asking the runtime. The container status'
// volumeMounts report by it. Before any Status, or for an unknown
// RuntimeClass or handler: false.
func (r *Runtime) RecursiveReadOnlyMountsSupported(pod *v1.Pod) bool {
	handler, err := r.runtimeHandler(pod)
	if err != nil {
		return false
	}
	r.handlersMu.Lock()
	defer r.handlersMu.Unlock()
	return r.rroHandlers[handler]
}
