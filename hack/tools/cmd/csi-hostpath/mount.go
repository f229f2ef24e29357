package main

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
	mountutils "k8s.io/mount-utils"
)

// mountInfoFile is read for every mount check: a bind mount on the same
// file system has the device of its parent, so only the mount table tells
// whether a path is a mount point.
const mountInfoFile = "/proc/self/mountinfo"

// mountState says whether path is a mount point and whether its topmost
// mount is read-only. A path that does not exist is not mounted.
func mountState(path string) (mounted, readOnly bool, err error) {
	real, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("resolve %s: %w", path, err)
	}
	infos, err := mountutils.ParseMountInfo(mountInfoFile)
	if err != nil {
		return false, false, fmt.Errorf("read %s: %w", mountInfoFile, err)
	}
	for _, mi := range slices.Backward(infos) { // the last entry is on top
		if mi.MountPoint == real {
			return true, slices.Contains(mi.MountOptions, "ro"), nil
		}
	}
	return false, false, nil
}

// bindMount mounts src on dst, then, for readOnly, remounts that bind
// read-only (a bind mount takes MS_RDONLY only on a remount). A failed
// remount undoes the bind.
func bindMount(src, dst string, readOnly bool) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mount %s on %s: %w", src, dst, err)
	}
	if !readOnly {
		return nil
	}
	if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		_ = unix.Unmount(dst, 0)
		return fmt.Errorf("remount %s read-only: %w", dst, err)
	}
	return nil
}

// unmountAll unmounts path until it is no mount point (a path can be
// mounted over more than once); a path that is not mounted, or does not
// exist, is no error.
func unmountAll(path string) error {
	for range 16 {
		mounted, _, err := mountState(path)
		if err != nil || !mounted {
			return err
		}
		if err := unix.Unmount(path, 0); err != nil {
			return fmt.Errorf("unmount %s: %w", path, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted after 16 unmounts", path)
}
