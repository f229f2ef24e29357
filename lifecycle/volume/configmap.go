package volume

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// defaultMode is the mode of projected files when none is given (0644).
const defaultMode int32 = 0o644

// configMapPayload is the files of a configMap volume.
func (m *Manager) configMapPayload(ctx context.Context, pod *v1.Pod, src *v1.ConfigMapVolumeSource) (map[string]FileProjection, error) {
	optional := src.Optional != nil && *src.Optional
	cm, err := m.cfg.Objects.GetConfigMap(ctx, pod.Namespace, src.Name)
	if err != nil {
		if apierrors.IsNotFound(err) && optional {
			return map[string]FileProjection{}, nil
		}
		return nil, err
	}
	return projectKeys("configmap", cm.Data, cm.BinaryData, src.Items, src.DefaultMode, optional, fsGroup(pod))
}

// projectKeys turns the keys of a ConfigMap or Secret into files: every key
// when items is empty, else the listed keys at their paths. A listed key
// that is missing is an error unless the source is optional.
func projectKeys(kind string, data map[string]string, binary map[string][]byte, items []v1.KeyToPath, mode *int32, optional bool, gid *int64) (map[string]FileProjection, error) {
	dm := defaultMode
	if mode != nil {
		dm = *mode
	}
	value := func(k string) ([]byte, bool) {
		if v, ok := data[k]; ok {
			return []byte(v), true
		}
		v, ok := binary[k]
		return v, ok
	}
	out := map[string]FileProjection{}
	if len(items) == 0 {
		for k, v := range data {
			out[k] = FileProjection{Data: []byte(v), Mode: dm, FsGroup: gid}
		}
		for k, v := range binary {
			out[k] = FileProjection{Data: v, Mode: dm, FsGroup: gid}
		}
		return withFsGroupModes(out), nil
	}
	for _, it := range items {
		v, ok := value(it.Key)
		if !ok {
			if optional {
				continue
			}
			if kind == "secret" {
				return nil, fmt.Errorf("references non-existent secret key: %s", it.Key)
			}
			return nil, fmt.Errorf("configmap references non-existent config key: %s", it.Key)
		}
		md := dm
		if it.Mode != nil {
			md = *it.Mode
		}
		out[it.Path] = FileProjection{Data: v, Mode: md, FsGroup: gid}
	}
	return withFsGroupModes(out), nil
}

// withFsGroupModes gives the pod's fsGroup read access to files owned by
// it, as the kubelet's SetVolumeOwnership does for read-only volumes.
func withFsGroupModes(p map[string]FileProjection) map[string]FileProjection {
	for k, f := range p {
		if f.FsGroup != nil {
			f.Mode |= 0o440
			p[k] = f
		}
	}
	return p
}

func fsGroup(pod *v1.Pod) *int64 {
	if sc := pod.Spec.SecurityContext; sc != nil {
		return sc.FSGroup
	}
	return nil
}
