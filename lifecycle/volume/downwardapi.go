package volume

import (
	"fmt"
	"sort"
	"strings"

	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
)

// downwardAPIPayload is the files of a downwardAPI volume.
func (m *Manager) downwardAPIPayload(pod *v1.Pod, src *v1.DownwardAPIVolumeSource) (map[string]FileProjection, error) {
	out, err := m.downwardAPIFiles(pod, src.Items, src.DefaultMode)
	if err != nil {
		return nil, err
	}
	return withFsGroupModes(out), nil
}

func (m *Manager) downwardAPIFiles(pod *v1.Pod, items []v1.DownwardAPIVolumeFile, mode *int32) (map[string]FileProjection, error) {
	dm := defaultMode
	if mode != nil {
		dm = *mode
	}
	gid := fsGroup(pod)
	out := map[string]FileProjection{}
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = PodFieldValue(pod, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			v, err = podutil.ContainerResourceValue(it.ResourceFieldRef, pod, nil, m.cfg.NodeAllocatable())
		default:
			err = fmt.Errorf("downward API item %q has neither fieldRef nor resourceFieldRef", it.Path)
		}
		if err != nil {
			return nil, fmt.Errorf("downward API item %q: %w", it.Path, err)
		}
		md := dm
		if it.Mode != nil {
			md = *it.Mode
		}
		out[it.Path] = FileProjection{Data: []byte(v), Mode: md, FsGroup: gid}
	}
	return out, nil
}

// PodFieldValue is the downward API's value of a pod field path, for
// volumes and environment variables alike (the kubelet's
// fieldpath.ExtractFieldPathAsString): metadata fields with label and
// annotation subscripts, and the plain spec and status fields. The
// environment resolves status.podIP(s)/hostIP(s) itself (they are known
// before the API status has them).
func PodFieldValue(pod *v1.Pod, path string) (string, error) {
	if k, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[k], nil
	}
	if k, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[k], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "spec.restartPolicy":
		return string(pod.Spec.RestartPolicy), nil
	case "spec.schedulerName":
		return pod.Spec.SchedulerName, nil
	case "status.phase":
		return string(pod.Status.Phase), nil
	case "status.hostIP":
		return pod.Status.HostIP, nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	}
	return "", fmt.Errorf("unsupported fieldPath: %v", path)
}

// subscript parses `prefix['key']`.
func subscript(path, prefix string) (string, bool) {
	if !strings.HasPrefix(path, prefix+"['") || !strings.HasSuffix(path, "']") {
		return "", false
	}
	return path[len(prefix)+2 : len(path)-2], true
}

// formatMap is the kubelet's rendering of labels and annotations: one
// key="value" line per key, sorted, value quoted as a Go string.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q\n", k, m[k])
	}
	return strings.TrimSuffix(b.String(), "\n")
}
