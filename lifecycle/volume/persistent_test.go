package volume

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// addClaim adds claim ns/name bound to a local PV named pv at path.
func (f *fixture) addClaim(name, pv, path string) (*v1.PersistentVolumeClaim, *v1.PersistentVolume) {
	pvc := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("pvc-uid-" + name),
			Finalizers: []string{pvcProtectionFinalizer}},
		Spec:   v1.PersistentVolumeClaimSpec{VolumeName: pv},
		Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound},
	}
	vol := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pv},
		Spec: v1.PersistentVolumeSpec{
			ClaimRef:               &v1.ObjectReference{Namespace: "ns", Name: name, UID: pvc.UID},
			PersistentVolumeSource: v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: path}},
		},
	}
	f.objects.pvcs["ns/"+name] = pvc
	f.objects.pvs[pv] = vol
	return pvc, vol
}

func claimVolume(name, claim string, readOnly bool) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: readOnly}}}
}

func TestClaimResolutionErrors(t *testing.T) {
	const prefix = "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: "
	tests := []struct {
		name   string
		mutate func(*v1.PersistentVolumeClaim, *v1.PersistentVolume, *fixture)
		want   string
	}{
		{"claim missing", func(c *v1.PersistentVolumeClaim, _ *v1.PersistentVolume, f *fixture) {
			delete(f.objects.pvcs, "ns/claim")
		},
			`error processing PVC ns/claim: failed to fetch PVC from API server: persistentvolumeclaims "claim" not found`},
		{"claim being deleted unprotected", func(c *v1.PersistentVolumeClaim, _ *v1.PersistentVolume, _ *fixture) {
			c.DeletionTimestamp = &metav1.Time{}
			c.Finalizers = nil
		}, "error processing PVC ns/claim: PVC is being deleted"},
		{"claim pending", func(c *v1.PersistentVolumeClaim, _ *v1.PersistentVolume, _ *fixture) {
			c.Status.Phase = v1.ClaimPending
		},
			"error processing PVC ns/claim: PVC is not bound"},
		{"no volume name", func(c *v1.PersistentVolumeClaim, _ *v1.PersistentVolume, _ *fixture) { c.Spec.VolumeName = "" },
			"error processing PVC ns/claim: PVC has empty pvc.Spec.VolumeName"},
		{"volume missing", func(_ *v1.PersistentVolumeClaim, _ *v1.PersistentVolume, f *fixture) { delete(f.objects.pvs, "pv1") },
			`error processing PVC ns/claim: failed to fetch PV pv1 from API server: persistentvolumes "pv1" not found`},
		{"volume unbound", func(_ *v1.PersistentVolumeClaim, pv *v1.PersistentVolume, _ *fixture) { pv.Spec.ClaimRef = nil },
			"error processing PVC ns/claim: found PV object pv1 but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim"},
		{"volume of another claim", func(_ *v1.PersistentVolumeClaim, pv *v1.PersistentVolume, _ *fixture) { pv.Spec.ClaimRef.UID = "other" },
			"error processing PVC ns/claim: found PV object pv1 but its pv.Spec.ClaimRef.UID other does not point to claim.UID pvc-uid-claim"},
		{"block volume mounted", func(_ *v1.PersistentVolumeClaim, pv *v1.PersistentVolume, _ *fixture) {
			pv.Spec.VolumeMode = ptr(v1.PersistentVolumeBlock)
		}, "volume data has volumeMode Block, but is specified in volumeMounts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			pvc, pv := f.addClaim("claim", "pv1", t.TempDir())
			tt.mutate(pvc, pv, f)
			pod := testPod(claimVolume("data", "claim", false))
			pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
			err := f.m.MountPod(context.Background(), pod)
			if err == nil || err.Error() != prefix+tt.want {
				t.Fatalf("MountPod: %v\nwant: %s", err, prefix+tt.want)
			}
			if len(f.mounter.binds) != 0 {
				t.Errorf("mounted %v, want nothing", f.mounter.binds)
			}
			if _, err := f.m.Mounts(pod, &pod.Spec.Containers[0], nil, nil); err == nil {
				t.Error("Mounts of an unresolved claim: no error")
			}
		})
	}
}

func TestLocalVolume(t *testing.T) {
	f := newFixture(t)
	data := t.TempDir()
	f.addClaim("claim", "pv1", data)
	f.addClaim("ro-claim", "pv2", data)
	pod := testPod(claimVolume("data", "claim", false), claimVolume("ro", "ro-claim", true))
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "ro", MountPath: "/ro"}}
	ctx := context.Background()
	if err := f.m.MountPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	dir := f.m.volumeDir(pod.UID, pluginLocal, "pv1")
	roDir := f.m.volumeDir(pod.UID, pluginLocal, "pv2")
	if b := f.mounter.binds[dir]; b != (fakeBind{data, false}) {
		t.Errorf("bind of pv1: %+v, want %s read-write", b, data)
	}
	if b := f.mounter.binds[roDir]; b != (fakeBind{data, true}) {
		t.Errorf("bind of pv2: %+v, want %s read-only", b, data)
	}
	mounts, err := f.m.Mounts(pod, &pod.Spec.Containers[0], nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(mounts) != 2 || mounts[0].HostPath != dir || mounts[0].Readonly || !mounts[0].SelinuxRelabel ||
		mounts[1].HostPath != roDir || !mounts[1].Readonly || mounts[1].SelinuxRelabel {
		t.Errorf("mounts: %v", mounts)
	}
	if p, ok := f.m.VolumePath(pod, "data"); !ok || p != dir {
		t.Errorf("VolumePath: %q %v, want %q", p, ok, dir)
	}
	// A second sync neither reads the claims again nor mounts again.
	reads := f.objects.reads
	f.mounter.binds = nil
	if err := f.m.MountPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if f.objects.reads != reads || len(f.mounter.binds) != 0 {
		t.Errorf("second MountPod: %d more claim reads, binds %v; want none", f.objects.reads-reads, f.mounter.binds)
	}
	if err := f.m.UnmountPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if len(f.mounter.mounted) != 0 || fileExists(f.m.PodDir(pod.UID)) {
		t.Errorf("after UnmountPod: mounts %v, pod dir exists %v", f.mounter.mounted, fileExists(f.m.PodDir(pod.UID)))
	}
	if _, ok := f.m.claimOf(pod.UID, "data"); ok {
		t.Error("the claim is still remembered after UnmountPod")
	}
}

func TestLocalVolumeRefused(t *testing.T) {
	f := newFixture(t)
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f.addClaim("claim", "pv1", file)
	f.addClaim("gone", "pv2", filepath.Join(t.TempDir(), "missing"))
	pod := testPod(claimVolume("data", "claim", false), claimVolume("gone", "gone", false))
	err := f.m.MountPod(context.Background(), pod)
	for _, want := range []string{
		`MountVolume.SetUp failed for volume "pv1" : only directory and block device are supported`,
		`MountVolume.SetUp failed for volume "pv2" : local volume pv2: stat `,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("MountPod: %v, want %q", err, want)
		}
	}
	if len(f.mounter.binds) != 0 {
		t.Errorf("mounted %v", f.mounter.binds)
	}
}

func TestUnsupportedPersistentVolume(t *testing.T) {
	f := newFixture(t)
	_, pv := f.addClaim("claim", "nfs-pv", "")
	pv.Spec.Local = nil
	pv.Spec.NFS = &v1.NFSVolumeSource{Server: "s", Path: "/x"}
	pod := testPod(claimVolume("data", "claim", false))
	err := f.m.MountPod(context.Background(), pod)
	want := `MountVolume.SetUp failed for volume "nfs-pv" : persistent volume nfs-pv: volume type is not supported by crivk`
	if err == nil || err.Error() != want {
		t.Fatalf("MountPod: %v, want %s", err, want)
	}
}

func TestGenericEphemeralVolume(t *testing.T) {
	f := newFixture(t)
	pod := testPod(v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}})
	pvc, _ := f.addClaim("p-scratch", "pv1", t.TempDir())
	err := f.m.MountPod(context.Background(), pod)
	if err == nil || !strings.Contains(err.Error(), "PVC ns/p-scratch was not created for pod ns/p (pod is not owner)") {
		t.Fatalf("MountPod of a claim the pod does not own: %v", err)
	}
	pvc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: pod.UID, Controller: ptr(true)}}
	if err := f.m.MountPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.mounter.binds[f.m.volumeDir(pod.UID, pluginLocal, "pv1")]; !ok {
		t.Errorf("binds %v, want pv1's", f.mounter.binds)
	}
}

func TestOwnershipNeeded(t *testing.T) {
	gid := int64(os.Getgid())
	dir := t.TempDir()
	onRoot := ptr(v1.FSGroupChangeOnRootMismatch)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if !ownershipNeeded(dir, gid, nil) || !ownershipNeeded(dir, gid, ptr(v1.FSGroupChangeAlways)) {
		t.Error("Always (or no policy) must change ownership")
	}
	if !ownershipNeeded(dir, gid, onRoot) {
		t.Error("OnRootMismatch with mode 0755 and no setgid: must change")
	}
	if err := os.Chmod(dir, 0o770|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	if ownershipNeeded(dir, gid, onRoot) {
		t.Error("OnRootMismatch with the group, 0770 and setgid: must not change")
	}
	if !ownershipNeeded(dir, gid+1, onRoot) {
		t.Error("OnRootMismatch with another group: must change")
	}
}

func TestBlockVolumeRefused(t *testing.T) {
	f := newFixture(t)
	_, pv := f.addClaim("claim", "blk", "/dev/null")
	pv.Spec.VolumeMode = ptr(v1.PersistentVolumeBlock)
	pod := testPod(claimVolume("data", "claim", false))
	pod.Spec.Containers[0].VolumeDevices = []v1.VolumeDevice{{Name: "data", DevicePath: "/dev/xvda"}}
	err := f.m.MountPod(context.Background(), pod)
	want := `MountVolume.SetUp failed for volume "blk" : persistent volume blk has volumeMode Block: raw block volumes (volumeDevices) are not supported by crivk`
	if err == nil || err.Error() != want {
		t.Fatalf("MountPod: %v, want %s", err, want)
	}
	if len(f.mounter.binds) != 0 {
		t.Errorf("mounted %v", f.mounter.binds)
	}
}
