package volume

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// projectedPayload is the files of a projected volume: the union of its
// sources (the API server's kube-api-access-* volume is one: token, ca.crt
// from the kube-root-ca.crt ConfigMap, namespace).
func (m *Manager) projectedPayload(ctx context.Context, pod *v1.Pod, src *v1.ProjectedVolumeSource) (map[string]FileProjection, error) {
	out := map[string]FileProjection{}
	gid := fsGroup(pod)
	add := func(p map[string]FileProjection) {
		for k, v := range p {
			out[k] = v
		}
	}
	for i, s := range src.Sources {
		switch {
		case s.ConfigMap != nil:
			optional := s.ConfigMap.Optional != nil && *s.ConfigMap.Optional
			cm, err := m.cfg.Objects.GetConfigMap(ctx, pod.Namespace, s.ConfigMap.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && optional {
					continue
				}
				return nil, err
			}
			p, err := projectKeys("configmap", cm.Data, cm.BinaryData, s.ConfigMap.Items, src.DefaultMode, optional, gid)
			if err != nil {
				return nil, err
			}
			add(p)
		case s.Secret != nil:
			optional := s.Secret.Optional != nil && *s.Secret.Optional
			sec, err := m.cfg.Objects.GetSecret(ctx, pod.Namespace, s.Secret.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && optional {
					continue
				}
				return nil, err
			}
			p, err := projectKeys("secret", nil, sec.Data, s.Secret.Items, src.DefaultMode, optional, gid)
			if err != nil {
				return nil, err
			}
			add(p)
		case s.DownwardAPI != nil:
			p, err := m.downwardAPIFiles(pod, s.DownwardAPI.Items, src.DefaultMode)
			if err != nil {
				return nil, err
			}
			add(withFsGroupModes(p))
		case s.ServiceAccountToken != nil:
			tok, err := m.token(ctx, pod, s.ServiceAccountToken)
			if err != nil {
				return nil, err
			}
			mode := defaultMode
			if src.DefaultMode != nil {
				mode = *src.DefaultMode
			}
			f := FileProjection{Data: []byte(tok), Mode: mode}
			if gid != nil {
				// The kubelet: a token readable by the fsGroup only when
				// every container runs as one user; else 0600 owned by it.
				f.FsGroup = gid
				f.Mode |= 0o440
			}
			out[s.ServiceAccountToken.Path] = f
		case s.ClusterTrustBundle != nil:
			return nil, fmt.Errorf("projected source %d: clusterTrustBundle is not supported by crivk", i)
		case s.PodCertificate != nil:
			return nil, fmt.Errorf("projected source %d: podCertificate is not supported by crivk", i)
		default:
			return nil, fmt.Errorf("projected source %d: no known source type", i)
		}
	}
	return out, nil
}

// token returns the pod-bound token of a serviceAccountToken projection,
// from the cache while it is fresh.
func (m *Manager) token(ctx context.Context, pod *v1.Pod, src *v1.ServiceAccountTokenProjection) (string, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	exp := int64(3600)
	if src.ExpirationSeconds != nil {
		exp = *src.ExpirationSeconds
	}
	req := &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: &exp,
			BoundObjectRef: &authenticationv1.BoundObjectReference{
				APIVersion: "v1",
				Kind:       "Pod",
				Name:       pod.Name,
				UID:        pod.UID,
			},
		},
	}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	tr, err := m.tokens.get(ctx, pod.UID, pod.Namespace, sa, req)
	if err != nil {
		return "", fmt.Errorf("failed to fetch token: %w", err)
	}
	return tr.Status.Token, nil
}
