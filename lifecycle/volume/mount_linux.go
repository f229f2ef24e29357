package volume

import (
	"fmt"
	"github.com/moby/sys/mountinfo"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// hostMounter is the host's mount(2) and /proc/self/mountinfo.
type hostMounter struct{}

func (hostMounter) MountTmpfs(dir string, sizeBytes int64) error {
	opts := "mode=0777"
	if sizeBytes > 0 {
		opts += ",size=" + strconv.FormatInt(sizeBytes, 10)
	}
	return unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts)
}

func (hostMounter) Unmount(dir string) error {
	err := unix.Unmount(dir, 0)
	if err == unix.EBUSY {
		// A container still holds it: detach it now, it goes away with the
		// last user.
		err = unix.Unmount(dir, unix.MNT_DETACH)
	}
	if err == unix.EINVAL || err == unix.ENOENT {
		return nil // not a mount point (any more)
	}
	return err
}

func (hostMounter) MountPoints(dir string) ([]string, error) {
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(filepath.Clean(dir)))
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(mounts))
	for _, m := range mounts {
		out = append(out, m.Mountpoint)
	}
	return out, nil
}

func (h hostMounter) IsMountPoint(dir string) (bool, error) {
	mps, err := h.MountPoints(dir)
	if err != nil {
		return false, err
	}
	for _, mp := range mps {
		if mp == filepath.Clean(dir) {
			return true, nil
		}
	}
	return false, nil
}

func (hostMounter) Bind(src, dir string, readOnly bool) error {
	if err := unix.Mount(src, dir, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	if !readOnly {
		return nil
	}
	// A bind mount takes MS_RDONLY only through a remount.
	if err := unix.Mount("", dir, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		unix.Unmount(dir, 0)
		return fmt.Errorf("making the bind mount read-only: %w", err)
	}
	return nil
}
