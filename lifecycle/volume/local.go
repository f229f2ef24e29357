package volume

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
)

// Local persistent volumes: the kubelet's local plugin (pkg/volume/local)
// for a PersistentVolume with spec.local whose path is a directory.
//
//	<RootDir>/pods/<uid>/volumes/kubernetes.io~local-volume/<pv name>
//
// is a bind mount of the path (read-only when the claim's volume source
// says readOnly), made once: a set-up that finds it mounted does nothing
// (a crivk restarted finds its mounts in place). After a fresh mount of a
// writable volume the pod's fsGroup is applied by
// spec.securityContext.fsGroupChangePolicy (OnRootMismatch: only when the
// root directory's group or mode bits do not match, the kubelet's
// skipPermissionChange). The mount goes with the pod's directory
// (UnmountPod unmounts every mount below it); the data stays in the path.
//
// A path that is a block device (a local volume the kubelet formats and
// mounts) is refused: crivk mounts no file system of its own. The PV's
// mountOptions are not applied to the bind mount.

// setUpLocal mounts the local volume of t on dir. ready reports that it
// was mounted before.
func (m *Manager) setUpLocal(ctx context.Context, pod *v1.Pod, t target, dir string) (ready bool, err error) {
	path := t.claim.pv.Spec.Local.Path
	if path == "" {
		return false, fmt.Errorf("LocalVolume volume %q path is empty", t.name)
	}
	for _, part := range strings.Split(path, "/") {
		if part == ".." {
			return false, fmt.Errorf("invalid path: %s must not contain '..'", path)
		}
	}
	mounted, err := m.cfg.Mounter.IsMountPoint(dir)
	if err != nil {
		return false, err
	}
	if mounted {
		return true, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return false, fmt.Errorf("local volume %s: %w", t.name, err)
	}
	switch {
	case fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0:
		return false, fmt.Errorf("local volume %s: %s is a block device: crivk mounts only local volumes that are directories", t.name, path)
	case !fi.IsDir():
		return false, fmt.Errorf("only directory and block device are supported")
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return false, err
	}
	if err := m.cfg.Mounter.Bind(path, dir, t.claim.readOnly); err != nil {
		// The kubelet's clean-up of a failed mount: nothing mounted, no
		// directory left.
		if uerr := m.cfg.Mounter.Unmount(dir); uerr == nil {
			os.Remove(dir)
		}
		return false, fmt.Errorf("mounting %s on %s: %w", path, dir, err)
	}
	log.G(ctx).WithField("pod", pod.Namespace+"/"+pod.Name).WithField("uid", pod.UID).
		WithField("volume", t.name).WithField("path", path).Info("local volume mounted")
	if t.claim.readOnly {
		return false, nil
	}
	gid := fsGroup(pod)
	if gid == nil || !ownershipNeeded(dir, *gid, pod.Spec.SecurityContext.FSGroupChangePolicy) {
		return false, nil
	}
	return false, setVolumeOwnership(dir, gid, false)
}

// ownershipNeeded reports whether the fsGroup gid must be applied to the
// writable volume at dir under policy: always but for OnRootMismatch,
// which skips it when the root directory already has the group, the
// writable mode bits and setgid (the kubelet's requiresPermissionChange).
func ownershipNeeded(dir string, gid int64, policy *v1.PodFSGroupChangePolicy) bool {
	if policy == nil || *policy != v1.FSGroupChangeOnRootMismatch {
		return true
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return true
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int64(st.Gid) != gid || !fi.IsDir() {
		return true
	}
	want := ownershipRW | ownershipExec
	return fi.Mode().Perm()&want != want || fi.Mode()&os.ModeSetgid == 0
}
