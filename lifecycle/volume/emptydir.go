package volume

import (
	v1 "k8s.io/api/core/v1"
)

// setUpEmptyDir creates an emptyDir: a directory on the node's disk, or a
// tmpfs limited to sizeLimit for medium Memory. Files written by the
// containers survive container restarts and go with the pod.
func (m *Manager) setUpEmptyDir(dir string, src *v1.EmptyDirVolumeSource) error {
	switch src.Medium {
	case v1.StorageMediumDefault:
		return m.makeDir(dir, false, 0)
	case v1.StorageMediumMemory:
		var size int64
		if src.SizeLimit != nil && !src.SizeLimit.IsZero() {
			size = src.SizeLimit.Value()
		}
		return m.makeDir(dir, true, size)
	}
	return errUnsupportedMedium(src.Medium)
}

type errUnsupportedMedium v1.StorageMedium

func (e errUnsupportedMedium) Error() string {
	return "emptyDir medium " + string(e) + " is not supported by crivk (only \"\" and \"Memory\")"
}
