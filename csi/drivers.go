package csi

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	"k8s.io/apimachinery/pkg/util/version"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	storagev1client "k8s.io/client-go/kubernetes/typed/storage/v1"
)

// The kubelet's constants (pkg/volume/csi/csi_plugin.go).
const (
	// pluginName prefixes the kubelet's CSI messages ("kubernetes.io/csi: ...").
	pluginName = "kubernetes.io/csi"
	// csiTimeout is Config.Timeout's default.
	csiTimeout = 2 * time.Minute
)

// Driver is a registered CSI driver.
type Driver struct {
	Name string
	// Endpoint is the driver's CSI socket, as its registrar gave it.
	Endpoint string
	// Version is the highest CSI version (1.x) the driver supports.
	Version *version.Version
	// NodeID, MaxVolumesPerNode (0: no limit) and Topology (the accessible
	// topology's segments) are the driver's NodeGetInfo answer; empty
	// while the registration waits for it.
	NodeID            string
	MaxVolumesPerNode int64
	Topology          map[string]string
}

// Config configures Drivers; New validates it and fills defaults.
type Config struct {
	// NodeName is the node's name: its Node and CSINode objects.
	NodeName string
	// Nodes reads and patches the Node (get; patch of nodes/status).
	Nodes corev1client.CoreV1Interface
	// CSINodes reads and writes the CSINode (get, create, update, delete).
	CSINodes storagev1client.CSINodesGetter
	// CSIDrivers reads the cluster's CSIDriver objects (get), for the
	// volume manager's CSI volumes (CSIDriver).
	CSIDrivers storagev1client.CSIDriversGetter
	// Timeout bounds NodeGetInfo (default 2 minutes, the kubelet's).
	Timeout time.Duration
}

// Drivers is the registry of the node's CSI drivers and their
// registration handler (see the package documentation).
type Drivers struct {
	cfg  Config
	info *nodeInfo

	mu sync.RWMutex
	// drivers maps a driver's name to it. Guarded by mu.
	drivers map[string]Driver
}

// New validates cfg and returns an empty registry.
func New(cfg Config) (*Drivers, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("csi: the node name is empty")
	}
	if cfg.Nodes == nil || cfg.CSINodes == nil {
		return nil, errors.New("csi: the Node and CSINode clients are required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = csiTimeout
	}
	return &Drivers{
		cfg:     cfg,
		info:    &nodeInfo{name: cfg.NodeName, nodes: cfg.Nodes, csiNodes: cfg.CSINodes},
		drivers: map[string]Driver{},
	}, nil
}

// Get returns the driver registered under name.
func (d *Drivers) Get(name string) (Driver, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	drv, ok := d.drivers[name]
	return drv, ok
}

// List returns the registered drivers, by name.
func (d *Drivers) List() []Driver {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]Driver, 0, len(d.drivers))
	for _, drv := range d.drivers {
		out = append(out, drv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (d *Drivers) set(drv Driver) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.drivers[drv.Name] = drv
}

// msg is the kubelet's CSI message format (its csi_util.go log).
func msg(format string, args ...any) string {
	return fmt.Sprintf(pluginName+": "+format, args...)
}

// ValidatePlugin is the plugin manager's first call for a CSI driver's
// registration socket (pluginmanager.Handler).
func (d *Drivers) ValidatePlugin(ctx context.Context, name, endpoint string, versions []string) error {
	log.G(ctx).Info(msg("Trying to validate a new CSI Driver with name: %s endpoint: %s versions: %s", name, endpoint, strings.Join(versions, ",")))
	if _, err := d.validateVersions("ValidatePlugin", name, versions); err != nil {
		return fmt.Errorf("validation failed for CSI Driver %s at endpoint %s: %w", name, endpoint, err)
	}
	return nil
}

// RegisterPlugin registers the driver: in the registry, then NodeGetInfo,
// then the Node and the CSINode (pluginmanager.Handler). A failure after
// the driver entered the registry undoes it as DeRegisterPlugin does.
func (d *Drivers) RegisterPlugin(ctx context.Context, name, endpoint string, versions []string) error {
	log.G(ctx).Info(msg("Register new plugin with name: %s at endpoint: %s", name, endpoint))
	highest, err := d.validateVersions("RegisterPlugin", name, versions)
	if err != nil {
		return err
	}
	// In the registry first: the driver's endpoint is how it is reached.
	drv := Driver{Name: name, Endpoint: endpoint, Version: highest}
	d.set(drv)

	callCtx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	drv.NodeID, drv.MaxVolumesPerNode, drv.Topology, err = nodeGetInfo(callCtx, endpoint)
	if err != nil {
		log.G(ctx).WithError(err).Info("Error calling CSI NodeGetInfo()")
		d.unregisterAfter(ctx, name)
		return err
	}
	if err := d.info.install(ctx, name, drv.NodeID, drv.MaxVolumesPerNode, drv.Topology); err != nil {
		d.unregisterAfter(ctx, name)
		return err
	}
	d.set(drv)
	return nil
}

// unregisterAfter undoes a registration that failed.
func (d *Drivers) unregisterAfter(ctx context.Context, name string) {
	if err := d.unregister(ctx, name); err != nil {
		log.G(ctx).Error(msg("registrationHandler.RegisterPlugin failed to unregister plugin due to previous error: %v", err))
	}
}

// DeRegisterPlugin forgets the driver: the registry, its CSINode entry
// and its node ID annotation entry (pluginmanager.Handler).
func (d *Drivers) DeRegisterPlugin(ctx context.Context, name, endpoint string) {
	log.G(ctx).Info(msg("registrationHandler.DeRegisterPlugin request for plugin %s, endpoint %s", name, endpoint))
	if err := d.unregister(ctx, name); err != nil {
		log.G(ctx).Error(msg("registrationHandler.DeRegisterPlugin failed: %v", err))
	}
}

// unregister is the kubelet's unregisterDriver: by name.
func (d *Drivers) unregister(ctx context.Context, name string) error {
	d.mu.Lock()
	delete(d.drivers, name)
	d.mu.Unlock()
	if err := d.info.uninstall(ctx, name); err != nil {
		return errors.New(msg("Error uninstalling CSI driver: %v", err))
	}
	return nil
}

// validateVersions returns the highest 1.x version of versions, or an
// error when there is none or a driver of the name is registered with
// that version or a higher one (the kubelet's validateVersions).
func (d *Drivers) validateVersions(caller, name string, versions []string) (*version.Version, error) {
	if len(versions) == 0 {
		return nil, errors.New(msg("%s for CSI driver %q failed. Plugin returned an empty list for supported versions", caller, name))
	}
	// CSI has versions 0.x (unsupported since Kubernetes 1.17) and 1.x;
	// a 2.x need not be compatible.
	highest, err := version.HighestSupportedVersion(versions)
	if err != nil {
		return nil, errors.New(msg("%s for CSI driver %q failed. None of the versions specified %q are supported. err=%v", caller, name, versions, err))
	}
	if existing, ok := d.Get(name); ok && existing.Version != nil && !existing.Version.LessThan(highest) {
		return nil, errors.New(msg("%s for CSI driver %q failed. Another driver with the same name is already registered with a higher supported version: %q", caller, name, existing.Version))
	}
	return highest, nil
}

// InitializeCSINode creates the node's CSINode, or adopts the one there
// (the migrated-plugins annotation set; one owned by another Node is
// deleted and made again), as the kubelet does at start whether or not a
// driver registers (its initializeCSINode): it waits for the API server
// (a GET of the CSINode answering, NotFound included, every second until
// ctx ends), then tries six times over about 140s. The error is the last
// try's, after which the kubelet exits; ctx's error when it ended.
func (d *Drivers) InitializeCSINode(ctx context.Context) error {
	return d.info.initialize(ctx)
}
