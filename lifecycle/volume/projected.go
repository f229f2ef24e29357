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
			// The kubelet's: with an fsGroup, or when every container runs
			// as the same user, the token is 0600 whatever defaultMode
			// says, owned by that user; the fsGroup's ownership change
			// makes it 0640.
			uid := fsUser(pod)
			if uid != nil || gid != nil {
				mode = 0o600
			}
			f := FileProjection{Data: []byte(tok), Mode: mode, FsUser: uid}
			if gid != nil {
				f.FsGroup = gid
				f.Mode |= int32(ownershipRO)
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

// fsUser is the user every container of pod runs as (its runAsUser, else
// the pod's), nil when one sets none or two differ: the kubelet's
// FsUserFrom, the owner of a projected service account token.
func fsUser(pod *v1.Pod) *int64 {
	var uid *int64
	psc := pod.Spec.SecurityContext
	same := func(csc *v1.SecurityContext) bool {
		var u *int64
		if csc != nil && csc.RunAsUser != nil {
			u = csc.RunAsUser
		} else if psc != nil {
			u = psc.RunAsUser
		}
		if u == nil || (uid != nil && *uid != *u) {
			return false
		}
		uid = u
		return true
	}
	for i := range pod.Spec.InitContainers {
		if !same(pod.Spec.InitContainers[i].SecurityContext) {
			return nil
		}
	}
	for i := range pod.Spec.Containers {
		if !same(pod.Spec.Containers[i].SecurityContext) {
			return nil
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if !same(pod.Spec.EphemeralContainers[i].SecurityContext) {
			return nil
		}
	}
	return uid
}
