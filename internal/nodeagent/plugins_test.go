package nodeagent

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/crivk/crivk/csi/csitest"
	"github.com/crivk/crivk/pluginmanager/registrartest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// TestStartPlugins: a socket left in the node's plugins_registry is not
// removed (the kubelet cleans device-plugins/, not this one), and a CSI driver's and a DRA driver's
// registrars registered through it reach their registries (the CSI one
// its CSINode too).
func TestStartPlugins(t *testing.T) {
	// Short: a unix socket path has at most 107 bytes.
	root, err := os.MkdirTemp("", "na")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	reg := filepath.Join(root, "plugins_registry")
	if err := os.Mkdir(reg, 0o750); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(reg, "gone.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()

	cs := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-1"}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := startPlugins(ctx, root, "n1", cs.CoreV1(), cs.StorageV1())
	if err != nil {
		t.Fatal(err)
	}

	node, err := csitest.Start(filepath.Join(root, "csi.sock"), &csipb.NodeGetInfoResponse{NodeId: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Stop()
	csiReg, err := registrartest.Start(filepath.Join(reg, "hostpath-reg.sock"), &registerapi.PluginInfo{
		Type: registerapi.CSIPlugin, Name: "hostpath.csi.k8s.io", Endpoint: node.Endpoint(), SupportedVersions: []string{"1.0.0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer csiReg.Stop()
	draReg, err := registrartest.Start(filepath.Join(reg, "gpu.example.com-reg.sock"), &registerapi.PluginInfo{
		Type: registerapi.DRAPlugin, Name: "gpu.example.com", Endpoint: filepath.Join(root, "dra.sock"), SupportedVersions: []string{"v1.DRAPlugin"}})
	if err != nil {
		t.Fatal(err)
	}
	defer draReg.Stop()

	err = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return csiReg.Last() != nil && draReg.Last() != nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for the registrations: %v", err)
	}
	for _, r := range []*registrartest.Registrar{csiReg, draReg} {
		if s := r.Last(); !s.PluginRegistered {
			t.Errorf("%s: %v", r.Socket(), s)
		}
	}
	if d, ok := p.csi.Get("hostpath.csi.k8s.io"); !ok || d.NodeID != "node-a" || d.Endpoint != node.Endpoint() {
		t.Errorf("CSI driver %+v (%v)", d, ok)
	}
	c, err := cs.StorageV1().CSINodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil || len(c.Spec.Drivers) != 1 || c.Spec.Drivers[0].NodeID != "node-a" {
		t.Errorf("CSINode %+v: %v", c, err)
	}
	if got, err := p.dra.Get("gpu.example.com"); err != nil || got.Endpoint != filepath.Join(root, "dra.sock") || got.Service != "v1.DRAPlugin" {
		t.Errorf("DRA plugin %+v: %v", got, err)
	}
	if _, err := os.Lstat(stale); err != nil {
		t.Errorf("the stale socket: %v, want it left", err)
	}
}
