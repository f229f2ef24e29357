package volume

import (
	v1 "k8s.io/api/core/v1"
)

// setUpEmptyDir creates an emptyDir: a directory on the node's disk, or a
// tmpfs limited to sizeLimit for medium Memory. Files written by the
// containers survive container restarts and go with the pod.
//
// With the pod's fsGroup the directory belongs to that group and is
// set-group-ID, so that files the containers create there belong to it too
// (the kubelet's SetVolumeOwnership, ownership.go), once: a later sync
// leaves what the containers made of it.
func (m *Manager) setUpEmptyDir(dir string, src *v1.EmptyDirVolumeSource, gid *int64) error {
	var fresh bool
	var err error
	switch src.Medium {
	case v1.StorageMediumDefault:
		fresh, err = m.makeDir(dir, false, 0)
	case v1.StorageMediumMemory:
		var size int64
		if src.SizeLimit != nil && !src.SizeLimit.IsZero() {
			size = src.SizeLimit.Value()
		}
		fresh, err = m.makeDir(dir, true, size)
	default:
		return errUnsupportedMedium(src.Medium)
	}
	if err != nil || !fresh {
		return err
	}
	return setVolumeOwnership(dir, gid, false)
}

type errUnsupportedMedium v1.StorageMedium

func (e errUnsupportedMedium) Error() string {
	return "emptyDir medium " + string(e) + " is not supported by crivk (only \"\" and \"Memory\")"
}
