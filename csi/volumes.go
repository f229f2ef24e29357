package csi

import (
	"context"
	"fmt"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeClient returns the Node service of the registered driver name, on a
// connection made for the caller, and the function that closes it (the
// kubelet's csiDriverClient dials per operation too). The volume manager's
// CSI calls (lifecycle/volume) go through it.
func (d *Drivers) NodeClient(name string) (csipb.NodeClient, func(), error) {
	drv, ok := d.Get(name)
	if !ok {
		return nil, nil, fmt.Errorf("driver name %s not found in the list of registered CSI drivers", name)
	}
	conn, err := dialNode(drv.Endpoint)
	if err != nil {
		return nil, nil, fmt.Errorf("dialling CSI driver %s at %s: %w", name, drv.Endpoint, err)
	}
	return csipb.NewNodeClient(conn), func() { conn.Close() }, nil
}

// CSIDriver returns the cluster's CSIDriver object of name, nil when there
// is none (a driver may have none: its persistent volumes then get the
// defaults). It reads the API at each call; the kubelet reads an informer's
// cache, which a volume's set-up, once per pod, does not need.
func (d *Drivers) CSIDriver(ctx context.Context, name string) (*storagev1.CSIDriver, error) {
	if d.cfg.CSIDrivers == nil {
		return nil, fmt.Errorf("no CSIDriver client")
	}
	drv, err := d.cfg.CSIDrivers.CSIDrivers().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return drv, nil
}
