package nodeagent

import (
	"context"
	"path/filepath"

	"github.com/crivk/crivk/csi"
	"github.com/crivk/crivk/dra"
	"github.com/crivk/crivk/pluginmanager"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	storagev1client "k8s.io/client-go/kubernetes/typed/storage/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// nodePlugins are the registries the plugin manager fills: the node's CSI
// drivers (the volume manager's CSI volumes reach them) and DRA plugins
// (for the claims' preparation, #48; nothing reads those yet).
type nodePlugins struct {
	csi *csi.Drivers
	dra *dra.Plugins
}

// startPlugins starts the plugin manager on <rootDir>/plugins_registry
// with the kubelet's handlers: CSI drivers (csi, writing the node's
// CSINode and Node through nodes and csiNodes) and DRA plugins (dra),
// until ctx ends. A watch that cannot start is logged and the node runs
// without plugins, as the kubelet does; the registries are then empty.
// The CSINode is not made at start (csi.Drivers.InitializeCSINode): only
// a registering CSI driver writes it.
func startPlugins(ctx context.Context, rootDir, nodeName string, nodes corev1client.CoreV1Interface, storage storagev1client.StorageV1Interface) (*nodePlugins, error) {
	drivers, err := csi.New(csi.Config{NodeName: nodeName, Nodes: nodes, CSINodes: storage, CSIDrivers: storage})
	if err != nil {
		return nil, err
	}
	p := &nodePlugins{csi: drivers, dra: dra.New()}
	m, err := pluginmanager.New(pluginmanager.Config{Dir: filepath.Join(rootDir, pluginmanager.DirName)})
	if err != nil {
		return nil, err
	}
	m.AddHandler(registerapi.CSIPlugin, p.csi)
	m.AddHandler(registerapi.DRAPlugin, p.dra)
	if err := m.Start(ctx); err != nil {
		log.G(ctx).WithError(err).Error("The desired_state_of_world populator (plugin watcher) starts failed!")
	}
	return p, nil
}
