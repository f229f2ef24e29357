package volume

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// fakeCSI is one registered driver whose Node service "mounts" into the
// fixture's fake mounter and records its calls.
type fakeCSI struct {
	mounter    *fakeMounter
	registered bool
	stage      bool
	driver     *storagev1.CSIDriver
	publishErr error

	mu    sync.Mutex
	calls []string
	// publishes are the publish requests, in order.
	publishes []*csipb.NodePublishVolumeRequest
}

func (f *fakeCSI) NodeClient(name string) (csipb.NodeClient, func(), error) {
	if !f.registered || name != "fake.csi" {
		return nil, nil, fmt.Errorf("driver name %s not found in the list of registered CSI drivers", name)
	}
	return &fakeNode{f: f}, func() {}, nil
}

func (f *fakeCSI) CSIDriver(_ context.Context, name string) (*storagev1.CSIDriver, error) {
	if f.driver == nil || f.driver.Name != name {
		return nil, nil
	}
	return f.driver, nil
}

func (f *fakeCSI) record(call string) {
	f.mu.Lock()
	f.calls = append(f.calls, call)
	f.mu.Unlock()
}

func (f *fakeCSI) takeCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

type fakeNode struct {
	csipb.NodeClient // nil: the calls not overridden panic
	f                *fakeCSI
}

func (n *fakeNode) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest, ...grpc.CallOption) (*csipb.NodeGetCapabilitiesResponse, error) {
	res := &csipb.NodeGetCapabilitiesResponse{}
	if n.f.stage {
		res.Capabilities = append(res.Capabilities, &csipb.NodeServiceCapability{Type: &csipb.NodeServiceCapability_Rpc{
			Rpc: &csipb.NodeServiceCapability_RPC{Type: csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME}}})
	}
	return res, nil
}

func (n *fakeNode) NodeStageVolume(_ context.Context, r *csipb.NodeStageVolumeRequest, _ ...grpc.CallOption) (*csipb.NodeStageVolumeResponse, error) {
	n.f.record("stage " + r.VolumeId)
	n.f.mounter.MountTmpfs(r.StagingTargetPath, 0)
	return &csipb.NodeStageVolumeResponse{}, nil
}

func (n *fakeNode) NodeUnstageVolume(_ context.Context, r *csipb.NodeUnstageVolumeRequest, _ ...grpc.CallOption) (*csipb.NodeUnstageVolumeResponse, error) {
	n.f.record("unstage " + r.VolumeId)
	n.f.mounter.Unmount(r.StagingTargetPath)
	return &csipb.NodeUnstageVolumeResponse{}, nil
}

func (n *fakeNode) NodePublishVolume(_ context.Context, r *csipb.NodePublishVolumeRequest, _ ...grpc.CallOption) (*csipb.NodePublishVolumeResponse, error) {
	n.f.record("publish " + r.VolumeId)
	n.f.mu.Lock()
	n.f.publishes = append(n.f.publishes, r)
	n.f.mu.Unlock()
	if n.f.publishErr != nil {
		return nil, n.f.publishErr
	}
	if err := os.MkdirAll(r.TargetPath, 0o755); err != nil {
		return nil, err
	}
	n.f.mounter.MountTmpfs(r.TargetPath, 0)
	return &csipb.NodePublishVolumeResponse{}, nil
}

func (n *fakeNode) NodeUnpublishVolume(_ context.Context, r *csipb.NodeUnpublishVolumeRequest, _ ...grpc.CallOption) (*csipb.NodeUnpublishVolumeResponse, error) {
	n.f.record("unpublish " + r.VolumeId)
	n.f.mounter.Unmount(r.TargetPath)
	os.Remove(r.TargetPath)
	return &csipb.NodeUnpublishVolumeResponse{}, nil
}

// newCSIFixture is a fixture with a registered fake driver "fake.csi"
// that stages, whose CSIDriver has attachRequired false.
func newCSIFixture(t *testing.T) (*fixture, *fakeCSI) {
	f := newFixture(t)
	c := &fakeCSI{mounter: f.mounter, registered: true, stage: true, driver: &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: "fake.csi"},
		Spec:       storagev1.CSIDriverSpec{AttachRequired: ptr(false)},
	}}
	f.m.cfg.CSI = c
	f.m.cfg.NodeName = "node1"
	return f, c
}

// addCSIClaim adds claim ns/name bound to a CSI PV pv of fake.csi.
func (f *fixture) addCSIClaim(name, pv, handle string) {
	_, vol := f.addClaim(name, pv, "")
	vol.Spec.Local = nil
	vol.Spec.CSI = &v1.CSIPersistentVolumeSource{Driver: "fake.csi", VolumeHandle: handle, FSType: "ext4"}
	vol.Spec.AccessModes = []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}
}

func csiPod(uid types.UID, vols ...v1.Volume) *v1.Pod {
	p := testPod(vols...)
	p.UID = uid
	for _, v := range vols {
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, v1.VolumeMount{Name: v.Name, MountPath: "/" + v.Name})
	}
	return p
}

func TestCSIPersistentVolume(t *testing.T) {
	f, c := newCSIFixture(t)
	ctx := context.Background()
	f.addCSIClaim("claim", "pv1", "vol-1")
	a := csiPod("uid-a", claimVolume("data", "claim", false))
	b := csiPod("uid-b", claimVolume("data", "claim", true))
	if err := f.m.MountPod(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.takeCalls(), ","); got != "stage vol-1,publish vol-1" {
		t.Errorf("calls of the first pod: %s", got)
	}
	staging := filepath.Join(f.root, "plugins/kubernetes.io/csi/fake.csi", fmt.Sprintf("%x", sha256.Sum256([]byte("vol-1"))), "globalmount")
	target := filepath.Join(f.root, "pods/uid-a/volumes/kubernetes.io~csi/pv1/mount")
	req := c.publishes[0]
	if req.StagingTargetPath != staging || req.TargetPath != target || req.Readonly ||
		req.VolumeCapability.GetAccessMode().GetMode() != csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER ||
		req.VolumeCapability.GetMount().GetFsType() != "ext4" {
		t.Errorf("publish request %v; want staging %s, target %s, read-write, single node writer, ext4", req, staging, target)
	}
	if d, err := readVolData(filepath.Dir(target)); err != nil || d.DriverName != "fake.csi" || d.VolumeHandle != "vol-1" || d.SpecVolID != "pv1" || d.VolumeLifecycleMode != "Persistent" || d.NodeName != "node1" {
		t.Errorf("vol_data.json of the target: %+v %v", d, err)
	}
	mounts, err := f.m.Mounts(a, &a.Spec.Containers[0], nil, nil)
	if err != nil || len(mounts) != 1 || mounts[0].HostPath != target || mounts[0].Readonly {
		t.Errorf("Mounts: %v %v, want %s read-write", mounts, err, target)
	}
	// Set up already: nothing called again.
	if err := f.m.MountPod(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got := c.takeCalls(); len(got) != 0 {
		t.Errorf("calls of a second MountPod: %v, want none", got)
	}
	// A second pod of the volume: staged already, published read-only.
	if err := f.m.MountPod(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.takeCalls(), ","); got != "publish vol-1" || !c.publishes[1].Readonly {
		t.Errorf("calls of the second pod: %s (read-only %v), want a read-only publish", got, c.publishes[1].Readonly)
	}
	// The first pod goes: unpublished, still staged for the second.
	if err := f.m.UnmountPod(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.takeCalls(), ","); got != "unpublish vol-1" {
		t.Errorf("calls of the first pod's tear-down: %s", got)
	}
	if fileExists(f.m.PodDir("uid-a")) {
		t.Error("the first pod's directory is left")
	}
	// A new manager (crivk restarted) tears the second pod down from the
	// disk alone: unpublished, then unstaged.
	m2, err := New(f.m.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.CleanupOrphans(ctx, func(types.UID) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.takeCalls(), ","); got != "unpublish vol-1,unstage vol-1" {
		t.Errorf("calls of the orphan's tear-down: %s", got)
	}
	if fileExists(filepath.Dir(staging)) || fileExists(f.m.PodDir("uid-b")) || len(f.mounter.mounted) != 0 {
		t.Errorf("left: staging dir %v, pod dir %v, mounts %v", fileExists(filepath.Dir(staging)), fileExists(f.m.PodDir("uid-b")), f.mounter.mounted)
	}
}

func TestCSITearDownWaitsForTheDriver(t *testing.T) {
	f, c := newCSIFixture(t)
	ctx := context.Background()
	f.addCSIClaim("claim", "pv1", "vol-1")
	p := csiPod("uid-a", claimVolume("data", "claim", false))
	if err := f.m.MountPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	c.registered = false
	err := f.m.UnmountPod(ctx, p)
	if err == nil || !strings.Contains(err.Error(), "driver name fake.csi not found in the list of registered CSI drivers") {
		t.Fatalf("UnmountPod without the driver: %v", err)
	}
	target := filepath.Join(f.root, "pods/uid-a/volumes/kubernetes.io~csi/pv1/mount")
	if ok, _ := f.mounter.IsMountPoint(target); !ok {
		t.Fatal("the target was unmounted behind the driver's back")
	}
	c.registered = true
	if err := f.m.UnmountPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.takeCalls(), ","); got != "stage vol-1,publish vol-1,unpublish vol-1,unstage vol-1" {
		t.Errorf("calls: %s", got)
	}
}

func TestCSIInlineVolume(t *testing.T) {
	f, c := newCSIFixture(t)
	ctx := context.Background()
	inline := v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{
		Driver: "fake.csi", VolumeAttributes: map[string]string{"size": "1Mi"}}}}
	p := csiPod("uid-a", inline)
	err := f.m.MountPod(ctx, p)
	want := `volume mode "Ephemeral" not supported by driver fake.csi (only supports [])`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("MountPod with a driver without the Ephemeral mode: %v, want %q", err, want)
	}
	c.driver.Spec.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral}
	c.driver.Spec.PodInfoOnMount = ptr(true)
	if err := f.m.MountPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	handle := csiInlineHandle("uid-a", "scratch")
	if got := strings.Join(c.takeCalls(), ","); got != "publish "+handle {
		t.Errorf("calls: %s, want one publish (no staging)", got)
	}
	attrs := c.publishes[0].VolumeContext
	for k, v := range map[string]string{"size": "1Mi", "csi.storage.k8s.io/ephemeral": "true", "csi.storage.k8s.io/pod.name": "p",
		"csi.storage.k8s.io/pod.namespace": "ns", "csi.storage.k8s.io/pod.uid": "uid-a", "csi.storage.k8s.io/serviceAccount.name": "sa"} {
		if attrs[k] != v {
			t.Errorf("volume context %s = %q, want %q", k, attrs[k], v)
		}
	}
	if err := f.m.UnmountPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.takeCalls(), ","); got != "unpublish "+handle {
		t.Errorf("calls of the tear-down: %s", got)
	}
}

func TestCSIRefusals(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*fakeCSI, *fixture)
		want   string
	}{
		{"not registered", func(c *fakeCSI, _ *fixture) { c.registered = false },
			"kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: driver name fake.csi not found in the list of registered CSI drivers"},
		{"no CSI at all", func(_ *fakeCSI, f *fixture) { f.m.cfg.CSI = nil },
			"kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: driver name fake.csi not found in the list of registered CSI drivers"},
		{"attach required", func(c *fakeCSI, _ *fixture) { c.driver.Spec.AttachRequired = nil },
			"driver fake.csi requires attachment"},
		{"no CSIDriver: attach required", func(c *fakeCSI, _ *fixture) { c.driver = nil },
			"driver fake.csi requires attachment"},
		{"token requests", func(c *fakeCSI, _ *fixture) {
			c.driver.Spec.TokenRequests = []storagev1.TokenRequest{{Audience: "x"}}
		}, "asks for service account tokens"},
		{"final publish error", func(c *fakeCSI, _ *fixture) { c.publishErr = status.Error(codes.InvalidArgument, "bad") },
			"rpc error: code = InvalidArgument desc = bad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, c := newCSIFixture(t)
			f.addCSIClaim("claim", "pv1", "vol-1")
			tt.mutate(c, f)
			p := csiPod("uid-a", claimVolume("data", "claim", false))
			err := f.m.MountPod(context.Background(), p)
			if err == nil || !strings.Contains(err.Error(), `MountVolume.SetUp failed for volume "pv1" : `) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("MountPod: %v, want %q", err, tt.want)
			}
			if fileExists(filepath.Join(f.root, "pods/uid-a/volumes/kubernetes.io~csi/pv1")) && c.publishErr != nil {
				t.Error("a final publish error left the volume's directory")
			}
		})
	}
}

func TestSupportsFSGroup(t *testing.T) {
	gid := ptr(int64(5))
	policy := func(p storagev1.FSGroupPolicy) *storagev1.CSIDriver {
		return &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{FSGroupPolicy: &p}}
	}
	rwo := []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}
	rwx := []v1.PersistentVolumeAccessMode{v1.ReadWriteMany}
	tests := []struct {
		name string
		drv  *storagev1.CSIDriver
		src  csiSource
		gid  *int64
		want bool
	}{
		{"no fsGroup", nil, csiSource{fsType: "ext4", accessModes: rwo, mode: lifecyclePersist}, nil, false},
		{"default policy, fsType, RWO", nil, csiSource{fsType: "ext4", accessModes: rwo, mode: lifecyclePersist}, gid, true},
		{"default policy, no fsType", nil, csiSource{accessModes: rwo, mode: lifecyclePersist}, gid, false},
		{"default policy, RWX", nil, csiSource{fsType: "ext4", accessModes: rwx, mode: lifecyclePersist}, gid, false},
		{"default policy, inline with fsType", nil, csiSource{fsType: "ext4", mode: lifecycleInline}, gid, true},
		{"File, RWX, no fsType", policy(storagev1.FileFSGroupPolicy), csiSource{accessModes: rwx, mode: lifecyclePersist}, gid, true},
		{"File, read-only", policy(storagev1.FileFSGroupPolicy), csiSource{readOnly: true, mode: lifecyclePersist}, gid, false},
		{"None", policy(storagev1.NoneFSGroupPolicy), csiSource{fsType: "ext4", accessModes: rwo, mode: lifecyclePersist}, gid, false},
	}
	for _, tt := range tests {
		if got := supportsFSGroup(tt.drv, &tt.src, tt.gid); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// stageFails is a fake driver whose NodeStageVolume fails.
type stageFails struct{ fakeNode }

func (n *stageFails) NodeStageVolume(context.Context, *csipb.NodeStageVolumeRequest, ...grpc.CallOption) (*csipb.NodeStageVolumeResponse, error) {
	return nil, status.Error(codes.Internal, "disk on fire")
}

type stageFailsCSI struct{ *fakeCSI }

func (f stageFailsCSI) NodeClient(name string) (csipb.NodeClient, func(), error) {
	return &stageFails{fakeNode{f: f.fakeCSI}}, func() {}, nil
}

func TestCSIStageError(t *testing.T) {
	f, c := newCSIFixture(t)
	f.m.cfg.CSI = stageFailsCSI{c}
	f.addCSIClaim("claim", "pv1", "vol-1")
	err := f.m.MountPod(context.Background(), csiPod("uid-a", claimVolume("data", "claim", false)))
	want := `MountVolume.MountDevice failed for volume "pv1" : rpc error: code = Internal desc = disk on fire`
	if err == nil || err.Error() != want {
		t.Fatalf("MountPod: %v, want %s", err, want)
	}
	staging := filepath.Join(f.root, "plugins/kubernetes.io/csi/fake.csi", fmt.Sprintf("%x", sha256.Sum256([]byte("vol-1"))))
	if fileExists(staging) {
		t.Error("a final stage error left the staging directory")
	}
}
