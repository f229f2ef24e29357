package volume

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Volume ownership: the pod's fsGroup, as the kubelet's
// VolumeOwnership.ChangePermissions (pkg/volume/volume_linux.go) applies
// it. Every file and directory of the volume, its root included, is given
// the group (lchown, so a symlink itself and never its target), and, but
// for symlinks (a chmod would reach the target), the mode bits:
//
//	writable volume (emptyDir)           files |= 0660, directories |= 0770 + setgid
//	read-only volume (configMap, secret,  files |= 0440, directories |= 0550 + setgid
//	  downwardAPI, projected)
//
// The kubelet's emptyDir does it once, when it sets the directory up; its
// configMap, secret, downwardAPI and projected volumes at each new version
// of their content, before the version becomes visible (the atomic
// writer's setPerms step). hostPath volumes are never changed.
//
// spec.securityContext.fsGroupChangePolicy plays no part here: those five
// plugins pass no policy (nil) to NewVolumeOwnership, so OnRootMismatch
// changes them as Always does. The policy is read only by the plugins of
// persistent volumes (CSI, local, iSCSI, FC, FlexVolume, Portworx), all of
// which crivk refuses. The same holds of seLinuxChangePolicy: none of these
// plugins supports SELinux context mounts, and on a host without SELinux
// the kubelet computes no mount label at all.

// Mode bits the kubelet adds (rwMask, roMask, execMask).
const (
	ownershipRW   os.FileMode = 0o660
	ownershipRO   os.FileMode = 0o440
	ownershipExec os.FileMode = 0o110
)

// setVolumeOwnership gives everything under dir the group gid and the
// kubelet's mode bits for a volume that is readOnly or not; nil gid: no
// fsGroup, nothing to do. A file that cannot be changed does not stop the
// others; the error names every one (the kubelet logs them and goes on,
// crivk, which runs as root, fails the set-up instead).
func setVolumeOwnership(dir string, gid *int64, readOnly bool) error {
	if gid == nil {
		return nil
	}
	var errs []error
	walkErr := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(path, -1, int(*gid)); err != nil {
			errs = append(errs, err)
		}
		if info.Mode()&os.ModeSymlink != 0 {
			return nil
		}
		mask := ownershipRW
		if readOnly {
			mask = ownershipRO
		}
		if info.IsDir() {
			mask |= os.ModeSetgid | ownershipExec
		}
		if err := os.Chmod(path, info.Mode()|mask); err != nil {
			errs = append(errs, err)
		}
		return nil
	})
	if walkErr != nil {
		errs = append(errs, walkErr)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("setting the fsGroup %d on %s: %w", *gid, dir, err)
	}
	return nil
}
