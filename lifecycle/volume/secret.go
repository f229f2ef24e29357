package volume

import (
	"context"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// secretPayload is the files of a secret volume.
func (m *Manager) secretPayload(ctx context.Context, pod *v1.Pod, src *v1.SecretVolumeSource) (map[string]FileProjection, error) {
	optional := src.Optional != nil && *src.Optional
	s, err := m.cfg.Objects.GetSecret(ctx, pod.Namespace, src.SecretName)
	if err != nil {
		if apierrors.IsNotFound(err) && optional {
			return map[string]FileProjection{}, nil
		}
		return nil, err
	}
	return projectKeys("secret", nil, s.Data, src.Items, src.DefaultMode, optional, fsGroup(pod))
}
