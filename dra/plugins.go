package dra

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
)

// services are the DRAPlugin gRPC services the kubelet v1.37 speaks, most
// recent first (its servicesSupportedByKubelet).
var services = []string{drapbv1.DRAPluginService, drapbv1beta1.DRAPluginService}

// healthServices are the DRAResourceHealth services it speaks, most
// recent first (its healthServicesSupportedByKubelet).
var healthServices = []string{drahealthv1.DRAResourceHealthService, drahealthv1alpha1.DRAResourceHealthService}

// ErrNotRegistered is Get's error for a driver without a plugin.
var ErrNotRegistered = errors.New("not registered")

// Plugin is a registered kubelet plugin of a DRA driver.
type Plugin struct {
	DriverName string
	// Endpoint is the plugin's gRPC socket.
	Endpoint string
	// Service is the DRAPlugin service to call ("v1.DRAPlugin" or
	// "v1beta1.DRAPlugin").
	Service string
	// HealthService is the DRAResourceHealth service to watch, "" when
	// the plugin serves none.
	HealthService string
}

// Plugins is the registry of the node's DRA plugins and their
// registration handler (see the package documentation). The zero value
// is not usable: New.
type Plugins struct {
	mu sync.RWMutex
	// plugins maps a driver name to its plugins, oldest first. Guarded by
	// mu.
	plugins map[string][]Plugin
}

// New returns an empty registry.
func New() *Plugins { return &Plugins{plugins: map[string][]Plugin{}} }

// Get returns the driver's most recently registered plugin, or an error
// (the kubelet's GetPlugin words): ErrNotRegistered when it has none.
func (p *Plugins) Get(driverName string) (Plugin, error) {
	if driverName == "" {
		return Plugin{}, errors.New("DRA driver name is empty")
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	list := p.plugins[driverName]
	if len(list) == 0 {
		return Plugin{}, fmt.Errorf("DRA driver %s is %w", driverName, ErrNotRegistered)
	}
	return list[len(list)-1], nil
}

// ValidatePlugin checks the plugin's services (pluginmanager.Handler).
func (p *Plugins) ValidatePlugin(_ context.Context, driverName, endpoint string, supported []string) error {
	if _, err := chooseService(supported); err != nil {
		return fmt.Errorf("invalid supported gRPC versions of DRA driver plugin %s at endpoint %s: %w", driverName, endpoint, err)
	}
	return nil
}

// RegisterPlugin adds the plugin to its driver's (pluginmanager.Handler).
func (p *Plugins) RegisterPlugin(ctx context.Context, driverName, endpoint string, supported []string) error {
	service, err := chooseService(supported)
	if err != nil {
		return fmt.Errorf("invalid supported gRPC versions of DRA driver plugin %s at endpoint %s: %w", driverName, endpoint, err)
	}
	plugin := Plugin{DriverName: driverName, Endpoint: endpoint, Service: service, HealthService: chooseHealthService(supported)}
	p.mu.Lock()
	defer p.mu.Unlock()
	if slices.ContainsFunc(p.plugins[driverName], func(old Plugin) bool { return old.Endpoint == endpoint }) {
		// One plugin cannot take over another's endpoint.
		return fmt.Errorf("endpoint %s already registered for DRA driver plugin %s", endpoint, driverName)
	}
	p.plugins[driverName] = append(p.plugins[driverName], plugin)
	log.G(ctx).WithField("driverName", driverName).WithField("endpoint", endpoint).WithField("chosenService", service).
		WithField("numPlugins", len(p.plugins[driverName])).Info("Registered DRA plugin")
	return nil
}

// DeRegisterPlugin forgets the driver's plugin of endpoint
// (pluginmanager.Handler).
func (p *Plugins) DeRegisterPlugin(ctx context.Context, driverName, endpoint string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.plugins[driverName]
	i := slices.IndexFunc(list, func(old Plugin) bool { return old.Endpoint == endpoint })
	if i < 0 {
		return
	}
	if len(list) == 1 {
		delete(p.plugins, driverName)
	} else {
		p.plugins[driverName] = slices.Delete(list, i, i+1)
	}
	log.G(ctx).WithField("driverName", driverName).WithField("endpoint", endpoint).
		WithField("numPlugins", len(p.plugins[driverName])).Info("Unregistered DRA plugin")
}

// chooseService is the first of the plugin's services the kubelet speaks
// (its validateSupportedServices).
func chooseService(supported []string) (string, error) {
	if len(supported) == 0 {
		return "", errors.New("empty list of supported gRPC services (aka supported versions)")
	}
	for _, s := range supported {
		if slices.Contains(services, s) {
			return s, nil
		}
	}
	return "", fmt.Errorf("none of services supported by the plugin (%q) are supported by the kubelet (%q)", supported, services)
}

// chooseHealthService is the kubelet's most recent health service the
// plugin lists, "" for none (its pickHealthService).
func chooseHealthService(supported []string) string {
	for _, s := range healthServices {
		if slices.Contains(supported, s) {
			return s
		}
	}
	return ""
}
