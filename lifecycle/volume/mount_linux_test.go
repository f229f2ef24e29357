package volume

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestHostMounter mounts a real tmpfs (root only): the mount is seen below
// its parent, including a path with a space (escaped in mountinfo), and
// unmounting it twice is fine.
func TestHostMounter(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	var m hostMounter
	base := t.TempDir()
	dir := filepath.Join(base, "with space", "vol")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// As root a mount must work: a failure is the mounter's (or a host
	// without CAP_SYS_ADMIN, which cannot run crivk either), not a skip.
	if err := m.MountTmpfs(dir, 1<<20); err != nil {
		t.Fatalf("mount tmpfs as root: %v", err)
	}
	t.Cleanup(func() { _ = m.Unmount(dir) })
	mps, err := m.MountPoints(base)
	if err != nil {
		t.Fatal(err)
	}
	if len(mps) != 1 || mps[0] != dir {
		t.Fatalf("mount points below %s: %q, want [%s]", base, mps, dir)
	}
	if ok, err := m.IsMountPoint(dir); err != nil || !ok {
		t.Fatalf("IsMountPoint = %v, %v", ok, err)
	}
	if ok, _ := m.IsMountPoint(base); ok {
		t.Fatal("the parent is taken for a mount point")
	}
	if err := m.Unmount(dir); err != nil {
		t.Fatal(err)
	}
	if err := m.Unmount(dir); err != nil {
		t.Fatalf("second unmount: %v", err)
	}
	if mps, _ := m.MountPoints(base); len(mps) != 0 {
		t.Fatalf("still mounted: %q", mps)
	}
}

// TestManagerWithHostMounts sets up and tears down a pod's tmpfs-backed
// volumes with real mounts (root only): nothing is left afterwards.
func TestManagerWithHostMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	f := newFixture(t)
	f.m.cfg.Mounter = hostMounter{}
	f.objects.secrets["ns/s"] = &v1.Secret{Data: map[string][]byte{"k": []byte("v")}}
	pod := testPod(
		v1.Volume{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}},
		v1.Volume{Name: "m", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
	)
	ctx := context.Background()
	if err := f.m.MountPod(ctx, pod); err != nil {
		t.Fatalf("mount the pod's volumes as root: %v", err)
	}
	t.Cleanup(func() { _ = f.m.UnmountPod(ctx, pod) })
	if mps, _ := (hostMounter{}).MountPoints(f.m.PodDir(pod.UID)); len(mps) != 2 {
		t.Fatalf("mounts %q, want the secret and the memory emptyDir", mps)
	}
	// Idempotent: a second MountPod mounts nothing more.
	if err := f.m.MountPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if mps, _ := (hostMounter{}).MountPoints(f.m.PodDir(pod.UID)); len(mps) != 2 {
		t.Fatalf("mounts after a second MountPod %q", mps)
	}
	if err := f.m.UnmountPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if mps, _ := (hostMounter{}).MountPoints(f.root); len(mps) != 0 {
		t.Fatalf("mounts left: %q", mps)
	}
	if _, err := os.Stat(f.m.PodDir(pod.UID)); !os.IsNotExist(err) {
		t.Fatalf("pod directory left: %v", err)
	}
}
