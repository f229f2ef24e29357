package csi

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/crivk/crivk/csi/csitest"
	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

const (
	nodeName = "n1"
	nodeUID  = "uid-1"
	hostpath = "hostpath.csi.k8s.io"
	topoKey  = "topology.hostpath.csi/node"
	allMigr  = "kubernetes.io/aws-ebs,kubernetes.io/azure-disk,kubernetes.io/azure-file,kubernetes.io/cinder,kubernetes.io/gce-pd,kubernetes.io/portworx-volume,kubernetes.io/vsphere-volume"
)

// fixture is a Drivers of node n1 (UID uid-1, one label) on a fake
// clientset, and a directory for the drivers' sockets.
type fixture struct {
	d   *Drivers
	cs  *fake.Clientset
	dir string
}

func newFixture(t *testing.T, objects ...any) *fixture {
	t.Helper()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, UID: nodeUID, Labels: map[string]string{"kubernetes.io/hostname": nodeName}}}
	cs := fake.NewClientset(node)
	for _, o := range objects {
		if c, ok := o.(*storagev1.CSINode); ok {
			if _, err := cs.StorageV1().CSINodes().Create(context.Background(), c, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	d, err := New(Config{NodeName: nodeName, Nodes: cs.CoreV1(), CSINodes: cs.StorageV1()})
	if err != nil {
		t.Fatal(err)
	}
	// Short: a unix socket path has at most 107 bytes.
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return &fixture{d: d, cs: cs, dir: dir}
}

// driver starts a driver's Node service answering info.
func (f *fixture) driver(t *testing.T, name string, info *csipb.NodeGetInfoResponse) *csitest.Node {
	t.Helper()
	n, err := csitest.Start(filepath.Join(f.dir, name+".sock"), info)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	return n
}

func (f *fixture) csiNode(t *testing.T) *storagev1.CSINode {
	t.Helper()
	c, err := f.cs.StorageV1().CSINodes().Get(context.Background(), nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("CSINode: %v", err)
	}
	// What the fake API server adds.
	c.TypeMeta, c.ManagedFields = metav1.TypeMeta{}, nil
	return c
}

func (f *fixture) node(t *testing.T) *v1.Node {
	t.Helper()
	n, err := f.cs.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (f *fixture) register(t *testing.T, name, endpoint string) error {
	t.Helper()
	ctx := context.Background()
	if err := f.d.ValidatePlugin(ctx, name, endpoint, []string{"1.0.0"}); err != nil {
		return err
	}
	return f.d.RegisterPlugin(ctx, name, endpoint, []string{"1.0.0"})
}

func hostpathInfo() *csipb.NodeGetInfoResponse {
	return &csipb.NodeGetInfoResponse{NodeId: "node-a", MaxVolumesPerNode: 16,
		AccessibleTopology: &csipb.Topology{Segments: map[string]string{topoKey: nodeName}}}
}

var ownerRef = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: nodeName, UID: nodeUID}}

// TestRegisterAndDeregister: the registry, the CSINode and the Node
// through two drivers' registrations and deregistrations.
func TestRegisterAndDeregister(t *testing.T) {
	f := newFixture(t)
	hp := f.driver(t, "hp", hostpathInfo())
	if err := f.register(t, hostpath, hp.Endpoint()); err != nil {
		t.Fatal(err)
	}

	drv, ok := f.d.Get(hostpath)
	if !ok {
		t.Fatal("hostpath is not in the registry")
	}
	if drv.Endpoint != hp.Endpoint() || drv.Version.String() != "1.0.0" || drv.NodeID != "node-a" || drv.MaxVolumesPerNode != 16 ||
		!cmp.Equal(drv.Topology, map[string]string{topoKey: nodeName}) {
		t.Errorf("registry: %+v", drv)
	}
	want := &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, OwnerReferences: ownerRef,
			Annotations: map[string]string{v1.MigratedPluginsAnnotationKey: allMigr}},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
			{Name: hostpath, NodeID: "node-a", TopologyKeys: []string{topoKey}, Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To[int32](16)}},
		}},
	}
	if diff := cmp.Diff(want, f.csiNode(t)); diff != "" {
		t.Errorf("CSINode (-want +got):\n%s", diff)
	}
	n := f.node(t)
	if got := n.Annotations[AnnotationNodeID]; got != `{"hostpath.csi.k8s.io":"node-a"}` {
		t.Errorf("node annotation %q", got)
	}
	if got := n.Labels[topoKey]; got != nodeName {
		t.Errorf("topology label %q, want %q", got, nodeName)
	}

	// A second driver, without topology or limit.
	other := f.driver(t, "other", &csipb.NodeGetInfoResponse{NodeId: "other-id"})
	if err := f.register(t, "other.example.com", other.Endpoint()); err != nil {
		t.Fatal(err)
	}
	drivers := f.csiNode(t).Spec.Drivers
	if len(drivers) != 2 || drivers[1].Name != "other.example.com" || drivers[1].Allocatable != nil || len(drivers[1].TopologyKeys) != 0 {
		t.Errorf("CSINode drivers: %+v", drivers)
	}
	if got := f.node(t).Annotations[AnnotationNodeID]; got != `{"hostpath.csi.k8s.io":"node-a","other.example.com":"other-id"}` {
		t.Errorf("node annotation %q", got)
	}
	if got := f.d.List(); len(got) != 2 || got[0].Name != hostpath || got[1].Name != "other.example.com" {
		t.Errorf("List: %+v", got)
	}

	f.d.DeRegisterPlugin(context.Background(), hostpath, hp.Endpoint())
	if _, ok := f.d.Get(hostpath); ok {
		t.Error("hostpath is still in the registry")
	}
	if drivers := f.csiNode(t).Spec.Drivers; len(drivers) != 1 || drivers[0].Name != "other.example.com" {
		t.Errorf("CSINode drivers after the deregistration: %+v", drivers)
	}
	n = f.node(t)
	if got := n.Annotations[AnnotationNodeID]; got != `{"other.example.com":"other-id"}` {
		t.Errorf("node annotation after the deregistration %q", got)
	}
	// The kubelet leaves the topology labels.
	if got := n.Labels[topoKey]; got != nodeName {
		t.Errorf("topology label after the deregistration %q, want it kept", got)
	}

	f.d.DeRegisterPlugin(context.Background(), "other.example.com", other.Endpoint())
	if _, ok := f.node(t).Annotations[AnnotationNodeID]; ok {
		t.Error("the node annotation is left without drivers")
	}
	c := f.csiNode(t)
	if len(c.Spec.Drivers) != 0 || c.Annotations[v1.MigratedPluginsAnnotationKey] != allMigr {
		t.Errorf("CSINode without drivers: %+v", c)
	}

	// Registered again with another node ID: the entry is the new one.
	hp.Set(&csipb.NodeGetInfoResponse{NodeId: "node-b", MaxVolumesPerNode: math.MaxInt64}, nil)
	if err := f.register(t, hostpath, hp.Endpoint()); err != nil {
		t.Fatal(err)
	}
	want.Spec.Drivers = []storagev1.CSINodeDriver{{Name: hostpath, NodeID: "node-b", TopologyKeys: []string{}, Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To[int32](math.MaxInt32)}}}
	if diff := cmp.Diff(want, f.csiNode(t)); diff != "" {
		t.Errorf("CSINode registered again (-want +got):\n%s", diff)
	}
}

func TestValidateVersions(t *testing.T) {
	for name, tc := range map[string]struct {
		versions []string
		wantErr  string // a part of the error; "" none
		want     string
	}{
		"1.0.0":           {versions: []string{"1.0.0"}, want: "1.0.0"},
		"the highest 1.x": {versions: []string{"0.3.0", "1.2.0", "1.10.0"}, want: "1.10.0"},
		"2.x is ignored":  {versions: []string{"1.0.0", "2.0.0"}, want: "1.0.0"},
		"empty":           {wantErr: `kubernetes.io/csi: ValidatePlugin for CSI driver "d" failed. Plugin returned an empty list for supported versions`},
		"0.x only": {versions: []string{"0.3.0"},
			wantErr: `kubernetes.io/csi: ValidatePlugin for CSI driver "d" failed. None of the versions specified ["0.3.0"] are supported. err=highest supported version reported is 0.3.0, must be v1.x`},
		"2.x only":      {versions: []string{"2.0.0"}, wantErr: "None of the versions specified"},
		"not a version": {versions: []string{"v"}, wantErr: "None of the versions specified"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			err := f.d.ValidatePlugin(context.Background(), "d", "/e.sock", tc.versions)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				v, _ := f.d.validateVersions("RegisterPlugin", "d", tc.versions)
				if v.String() != tc.want {
					t.Errorf("version %v, want %s", v, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(err.Error(), "validation failed for CSI Driver d at endpoint /e.sock: ") {
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestSameNameRegistered: a driver of a registered name validates only
// with a higher version.
func TestSameNameRegistered(t *testing.T) {
	f := newFixture(t)
	hp := f.driver(t, "hp", hostpathInfo())
	if err := f.register(t, hostpath, hp.Endpoint()); err != nil {
		t.Fatal(err)
	}
	err := f.d.ValidatePlugin(context.Background(), hostpath, "/other.sock", []string{"1.0.0"})
	if err == nil || !strings.Contains(err.Error(), `Another driver with the same name is already registered with a higher supported version: "1.0.0"`) {
		t.Errorf("same version: %v", err)
	}
	if err := f.d.ValidatePlugin(context.Background(), hostpath, "/other.sock", []string{"1.1.0"}); err != nil {
		t.Errorf("higher version: %v", err)
	}
}

// TestRegisterFailures: a failed registration leaves nothing in the
// registry, the CSINode or the Node.
func TestRegisterFailures(t *testing.T) {
	for name, tc := range map[string]struct {
		info      *csipb.NodeGetInfoResponse
		infoErr   error
		nodeLabel string // the topology label's value already on the node
		wantErr   string
	}{
		"NodeGetInfo fails": {infoErr: errors.New("driver not ready"), wantErr: "driver not ready"},
		"no node ID":        {info: &csipb.NodeGetInfoResponse{}, wantErr: "error adding CSI driver node info: driverNodeID must not be empty"},
		"topology collision": {info: hostpathInfo(), nodeLabel: "elsewhere",
			wantErr: `error updating Node object with CSI driver node info: error updating node: `},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			if tc.nodeLabel != "" {
				n := f.node(t)
				n.Labels[topoKey] = tc.nodeLabel
				if _, err := f.cs.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			hp := f.driver(t, "hp", tc.info)
			hp.Set(tc.info, tc.infoErr)
			err := f.register(t, hostpath, hp.Endpoint())
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			if tc.nodeLabel != "" && !strings.Contains(err.Error(), `detected topology value collision: driver reported "topology.hostpath.csi/node":"n1" but existing label is "topology.hostpath.csi/node":"elsewhere"`) {
				t.Errorf("error %v, want the collision", err)
			}
			if _, ok := f.d.Get(hostpath); ok {
				t.Error("the driver is in the registry")
			}
			if c, err := f.cs.StorageV1().CSINodes().Get(context.Background(), nodeName, metav1.GetOptions{}); err == nil && len(c.Spec.Drivers) != 0 {
				t.Errorf("CSINode drivers %+v", c.Spec.Drivers)
			}
			n := f.node(t)
			if _, ok := n.Annotations[AnnotationNodeID]; ok {
				t.Errorf("node annotation %q", n.Annotations[AnnotationNodeID])
			}
			if tc.nodeLabel != "" && n.Labels[topoKey] != tc.nodeLabel {
				t.Errorf("the node's label changed to %q", n.Labels[topoKey])
			}
		})
	}
}

// TestCSINodeOfAnotherNode: a CSINode owned by another Node (a node of
// the name deleted and made again) is deleted and made again, then the
// driver is in it.
func TestCSINodeOfAnotherNode(t *testing.T) {
	old := &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: nodeName, UID: "old-uid"}}},
		Spec:       storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "stale", NodeID: "x"}}},
	}
	f := newFixture(t, old)
	hp := f.driver(t, "hp", hostpathInfo())
	if err := f.register(t, hostpath, hp.Endpoint()); err != nil {
		t.Fatal(err)
	}
	c := f.csiNode(t)
	if !cmp.Equal(c.OwnerReferences, ownerRef) {
		t.Errorf("owner %+v, want %+v", c.OwnerReferences, ownerRef)
	}
	if len(c.Spec.Drivers) != 1 || c.Spec.Drivers[0].Name != hostpath {
		t.Errorf("drivers %+v, want hostpath alone", c.Spec.Drivers)
	}
}

func TestInitializeCSINode(t *testing.T) {
	for name, tc := range map[string]struct {
		existing    *storagev1.CSINode
		wantDrivers []storagev1.CSINodeDriver
	}{
		"created": {wantDrivers: []storagev1.CSINodeDriver{}},
		"adopted, annotation added, drivers kept": {
			existing: &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: nodeName, OwnerReferences: ownerRef},
				Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: hostpath, NodeID: "node-a"}}}},
			wantDrivers: []storagev1.CSINodeDriver{{Name: hostpath, NodeID: "node-a"}},
		},
		"another node's, made again": {
			existing: &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: nodeName},
				Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: hostpath, NodeID: "node-a"}}}},
			wantDrivers: []storagev1.CSINodeDriver{},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var objs []any
			if tc.existing != nil {
				objs = append(objs, tc.existing)
			}
			f := newFixture(t, objs...)
			if err := f.d.InitializeCSINode(context.Background()); err != nil {
				t.Fatal(err)
			}
			want := &storagev1.CSINode{
				ObjectMeta: metav1.ObjectMeta{Name: nodeName, OwnerReferences: ownerRef,
					Annotations: map[string]string{v1.MigratedPluginsAnnotationKey: allMigr}},
				Spec: storagev1.CSINodeSpec{Drivers: tc.wantDrivers},
			}
			if diff := cmp.Diff(want, f.csiNode(t)); diff != "" {
				t.Errorf("CSINode (-want +got):\n%s", diff)
			}
		})
	}
}

// TestInitializeCSINodeWithoutNode: no Node, no CSINode: the tries fail
// with the Node's NotFound (ctx ends the wait here).
func TestInitializeCSINodeWithoutNode(t *testing.T) {
	cs := fake.NewClientset()
	d, err := New(Config{NodeName: nodeName, Nodes: cs.CoreV1(), CSINodes: cs.StorageV1()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.InitializeCSINode(ctx); err == nil {
		t.Fatal("no error")
	}
	if _, err := cs.StorageV1().CSINodes().Get(context.Background(), nodeName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("CSINode: %v, want NotFound", err)
	}
}
