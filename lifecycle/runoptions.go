package lifecycle

import (
	"context"
	"fmt"

	"github.com/crivk/crivk/cri"
	v1 "k8s.io/api/core/v1"
)

var _ cri.RuntimeHelper = (*syncer)(nil)

// RuntimeHelper is what the runtime manager asks right before it creates
// a container (the kubelet's RuntimeHelper): the syncer's environment,
// mounts and pull secrets.
func (e *Engine) RuntimeHelper() cri.RuntimeHelper { return e.sync }

// GenerateRunContainerOptions is the kubelet's RuntimeHelper: the runtime
// manager calls it right before creating a container, once the sandbox (and
// so the pod IP) exists and the images of the image volumes the container
// mounts are on the node (imageVolumes). It resolves the container's
// environment (envvars.go), its volume mounts (the Volumes manager) and the
// mounts the node manages itself (node_mounts.go).
func (s *syncer) GenerateRunContainerOptions(ctx context.Context, pod *v1.Pod, c *v1.Container, podIPs []string, imageVolumes cri.ImageVolumes) (*cri.RunContainerOptions, error) {
	envs, err := s.makeEnvironment(ctx, pod, c, podIPs)
	if err != nil {
		return nil, err
	}
	opts := &cri.RunContainerOptions{}
	if s.devices != nil {
		// The device plugins' options come first, as the kubelet's
		// GetResources: their envs before the container's own.
		d, err := s.devices.ContainerOptions(ctx, pod, c)
		if err != nil {
			return nil, err
		}
		if d != nil {
			opts.Envs, opts.Mounts = d.Envs, d.Mounts
			opts.Devices, opts.Annotations, opts.CDIDevices = d.Devices, d.Annotations, d.CDIDevices
		}
	}
	opts.Envs = append(opts.Envs, envs...)
	if s.volumes != nil {
		vars := make(map[string]string, len(envs))
		for _, kv := range envs {
			vars[kv.Key] = string(kv.Value)
		}
		m, err := s.volumes.Mounts(pod, c, vars, imageVolumes)
		if err != nil {
			return nil, fmt.Errorf("mounts of container %q of pod %s/%s: %w", c.Name, pod.Namespace, pod.Name, err)
		}
		opts.Mounts = append(opts.Mounts, m...)
	}
	nm, err := s.nodeMounts(pod, c, podIPs)
	if err != nil {
		return nil, err
	}
	opts.Mounts = append(opts.Mounts, nm...)
	return opts, nil
}
