package devicemanager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"
)

// SocketName is the Registration socket's name in Config.Dir (the
// kubelet's kubelet.sock).
const SocketName = "kubelet.sock"

// CheckpointName is the kubelet's checkpoint of allocations in the device
// plugin directory (package checkpoint), read by Start and rewritten at
// each change of the devices or the allocations.
const CheckpointName = "kubelet_internal_checkpoint"

// ContainerLister lists the runtime's containers (cri.RuntimeService).
type ContainerLister interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
}

// Config configures a Manager; New validates it and fills defaults.
type Config struct {
	// Dir is the device plugin directory, absolute:
	// <root-dir>/device-plugins. The Registration socket is
	// <Dir>/kubelet.sock; plugins put their own sockets beside it.
	Dir string
	// Clock times the stop grace period (default: the real clock).
	Clock clock.PassiveClock
	// DialTimeout bounds the connection to a registering plugin (default
	// 10s, the kubelet's).
	DialTimeout time.Duration
	// Runtime lists the containers running when Start runs: re-admitted
	// after a restart, they keep the devices the checkpoint gave them and
	// get none allocated (the kubelet's isContainerAlreadyRunning). nil:
	// none is taken as running.
	Runtime ContainerLister
}

// Manager is the device plugin manager of one node (see the package
// documentation for who calls what).
type Manager struct {
	pluginapi.UnsafeRegistrationServer

	cfg Config

	mu sync.Mutex
	// endpoints is the current endpoint of each resource, stopped ones
	// included until their grace period has expired. Guarded by mu.
	endpoints map[string]*endpoint
	// healthy and unhealthy are the device IDs of each resource, as the
	// plugin's last ListAndWatch response said (all unhealthy once the
	// plugin stopped). A resource is in healthy once a response came.
	// Guarded by mu.
	healthy   map[string]sets.Set[string]
	unhealthy map[string]sets.Set[string]
	// pods are the devices allocated to each container of each pod, with
	// the plugin's response. The devices in use are derived from them.
	// Guarded by mu.
	pods map[types.UID]map[string]map[string]*containerDevices
	// life bounds the ListAndWatch streams (Start's ctx); nil before
	// Start. closed is set once Start's ctx ended: no plugin registers
	// after. Guarded by mu.
	life   context.Context
	closed bool
	// streams counts the ListAndWatch goroutines.
	streams sync.WaitGroup

	// allocMu serialises allocations (Allocate and the re-allocation of
	// ContainerOptions): a device is chosen and recorded under it.
	allocMu sync.Mutex
	// cpMu serialises checkpoint writes, each of the state when it began.
	cpMu sync.Mutex
	// running are the containers (by pod UID) running when Start ran;
	// written by Start before anything is served, read-only after.
	running map[types.UID]sets.Set[string]

	done chan struct{}
}

// containerDevices are the devices of one resource allocated to one
// container, with what the plugin answered to Allocate.
type containerDevices struct {
	ids  sets.Set[string]
	resp *pluginapi.ContainerAllocateResponse
}

// New validates cfg and returns a Manager that serves nothing yet (Start).
func New(cfg Config) (*Manager, error) {
	if cfg.Dir == "" || !filepath.IsAbs(cfg.Dir) {
		return nil, fmt.Errorf("devicemanager: bad socketPath, must be an absolute path: %q", cfg.Dir)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = dialTimeout
	}
	return &Manager{
		cfg:       cfg,
		endpoints: map[string]*endpoint{},
		healthy:   map[string]sets.Set[string]{},
		unhealthy: map[string]sets.Set[string]{},
		pods:      map[types.UID]map[string]map[string]*containerDevices{},
		done:      make(chan struct{}),
	}, nil
}

// SocketPath is the Registration socket, <Dir>/kubelet.sock.
func (m *Manager) SocketPath() string { return filepath.Join(m.cfg.Dir, SocketName) }

// Start creates Dir, removes the sockets left in it (the kubelet's
// CleanupPluginDirectory), listens on the Registration socket and serves
// it until ctx ends; then every plugin is disconnected (its devices
// unhealthy) and Done is closed. An error means nothing is served.
func (m *Manager) Start(ctx context.Context) error {
	if err := os.MkdirAll(m.cfg.Dir, 0o750); err != nil {
		return fmt.Errorf("creating the device plugin directory: %w", err)
	}
	if err := m.readCheckpoint(); err != nil && !errors.Is(err, os.ErrNotExist) {
		// The kubelet's words: it goes on.
		log.G(ctx).WithError(err).Error("Continue after failing to read checkpoint file. Device allocation info may NOT be up-to-date")
	}
	m.running = runningContainers(ctx, m.cfg.Runtime)
	if err := cleanupSockets(m.cfg.Dir); err != nil {
		return fmt.Errorf("cleaning up the device plugin directory %s: %w", m.cfg.Dir, err)
	}
	ln, err := net.Listen("unix", m.SocketPath())
	if err != nil {
		return fmt.Errorf("listening on the device plugin registration socket: %w", err)
	}
	life, cancel := context.WithCancel(ctx)
	m.mu.Lock()
	m.life = life
	m.mu.Unlock()
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, m)
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(ln); err != nil {
			log.G(ctx).WithError(err).Error("device plugin registration server")
		}
	}()
	log.G(ctx).WithField("socket", m.SocketPath()).Info("device plugin registration server listening")
	go func() {
		defer close(m.done)
		<-ctx.Done()
		m.mu.Lock()
		m.closed = true
		m.mu.Unlock()
		srv.Stop()
		<-served
		cancel() // ends every ListAndWatch: the plugins are disconnected
		m.streams.Wait()
	}()
	return nil
}

// Done is closed once Start's context ended and every plugin was
// disconnected.
func (m *Manager) Done() <-chan struct{} { return m.done }

// cleanupSockets removes the sockets in dir, as the kubelet does on start:
// a plugin registered with an earlier agent must register again.
// Directories, other files and the checkpoint are kept.
func cleanupSockets(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, de := range entries {
		if de.Name() == CheckpointName {
			continue
		}
		path := filepath.Join(dir, de.Name())
		st, err := os.Stat(path)
		if err != nil || st.IsDir() || st.Mode()&os.ModeSocket == 0 {
			continue
		}
		if err := os.Remove(path); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Register is the Registration service: the kubelet's checks and messages,
// then the plugin is dialed and asked for its options before Register
// answers; its ListAndWatch runs from then on.
func (m *Manager) Register(ctx context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	logger := log.G(ctx).WithField("resource", r.ResourceName).WithField("endpoint", r.Endpoint)
	logger.Info("got registration request from device plugin")
	if !slices.Contains(pluginapi.SupportedVersions[:], r.Version) {
		err := fmt.Errorf("requested API version %q is not supported by kubelet. Supported version is %q", r.Version, pluginapi.SupportedVersions)
		logger.WithError(err).Warn("bad registration request from device plugin")
		return &pluginapi.Empty{}, err
	}
	if !isExtendedResourceName(r.ResourceName) {
		err := fmt.Errorf("the ResourceName %q is invalid", r.ResourceName)
		logger.WithError(err).Warn("bad registration request from device plugin")
		return &pluginapi.Empty{}, err
	}
	e, err := m.connect(ctx, r.ResourceName, filepath.Join(m.cfg.Dir, r.Endpoint))
	if err != nil {
		logger.WithError(err).Warn("connecting to device plugin")
		return &pluginapi.Empty{}, err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		e.stop(m.cfg.Clock.Now())
		return &pluginapi.Empty{}, errors.New("device plugin registration server is stopping")
	}
	old := m.endpoints[r.ResourceName]
	m.endpoints[r.ResourceName] = e
	life := m.life
	m.streams.Add(1)
	m.mu.Unlock()
	if old != nil {
		// A plugin registering again replaces its earlier endpoint; the old
		// stream ends and is ignored (stop closes its connection).
		old.stop(m.cfg.Clock.Now())
	}
	go m.listAndWatch(life, e)
	logger.Info("device plugin connected")
	return &pluginapi.Empty{}, nil
}

// connect dials the plugin and reads its options (the kubelet's Connect
// and PluginConnected).
func (m *Manager) connect(ctx context.Context, resourceName, socket string) (*endpoint, error) {
	conn, err := dial(ctx, socket, m.cfg.DialTimeout)
	if err != nil {
		return nil, err
	}
	api := pluginapi.NewDevicePluginClient(conn)
	opts, err := api.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("failed to get device plugin options: %v", err)
	}
	return &endpoint{resource: resourceName, socket: socket, conn: conn, api: api, opts: opts}, nil
}

// listAndWatch calls the plugin's ListAndWatch once and applies every
// response, until the stream ends; the endpoint is then stopped. It is
// never retried: the plugin registers again.
func (m *Manager) listAndWatch(ctx context.Context, e *endpoint) {
	defer m.streams.Done()
	logger := log.G(ctx).WithField("resource", e.resource)
	stream, err := e.api.ListAndWatch(ctx, &pluginapi.Empty{})
	for err == nil {
		var resp *pluginapi.ListAndWatchResponse
		if resp, err = stream.Recv(); err == nil {
			m.setDevices(e, resp.Devices)
		}
	}
	logger.WithError(err).Warn("ListAndWatch ended unexpectedly for device plugin")
	m.disconnected(e)
}

// setDevices replaces the devices of e's resource with devices, if e is
// still the resource's endpoint (the kubelet's
// genericDeviceUpdateCallback).
func (m *Manager) setDevices(e *endpoint, devices []*pluginapi.Device) {
	healthy, unhealthy := sets.New[string](), sets.New[string]()
	for _, d := range devices {
		if d.Health == pluginapi.Healthy {
			healthy.Insert(d.ID)
		} else {
			unhealthy.Insert(d.ID)
		}
	}
	m.mu.Lock()
	if m.endpoints[e.resource] != e {
		m.mu.Unlock()
		return
	}
	m.healthy[e.resource], m.unhealthy[e.resource] = healthy, unhealthy
	m.mu.Unlock()
	log.L.WithField("resource", e.resource).WithField("total", len(devices)).WithField("healthy", healthy.Len()).
		Debug("processed device updates for resource")
	m.writeCheckpoint()
}

// disconnected stops e; if it is still its resource's endpoint, every
// device of the resource becomes unhealthy (the kubelet's
// PluginDisconnected and markResourceUnhealthy).
func (m *Manager) disconnected(e *endpoint) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e.stop(m.cfg.Clock.Now())
	if m.endpoints[e.resource] != e {
		return
	}
	r := e.resource
	if m.unhealthy[r] == nil {
		m.unhealthy[r] = sets.New[string]()
	}
	if h, ok := m.healthy[r]; ok {
		m.unhealthy[r] = m.unhealthy[r].Union(h)
		m.healthy[r] = sets.New[string]()
	}
}

// Capacity is the kubelet's GetCapacity, which the node status loop calls:
// for each resource, capacity counts all its devices and allocatable the
// healthy ones (a resource whose plugin never listed has capacity only).
// Resources whose plugin stopped more than EndpointStopGracePeriod ago
// are forgotten here and returned, once, in removed: the node keeps them
// with capacity 0.
func (m *Manager) Capacity() (capacity, allocatable v1.ResourceList, removed []string) {
	capacity, allocatable = v1.ResourceList{}, v1.ResourceList{}
	now := m.cfg.Clock.Now()
	gone := sets.New[string]()
	m.mu.Lock()
	for r, devs := range m.healthy {
		if e, ok := m.endpoints[r]; !ok || e.graceExpired(now) {
			gone.Insert(r)
			continue
		}
		capacity[v1.ResourceName(r)] = *resource.NewQuantity(int64(devs.Len()), resource.DecimalSI)
		allocatable[v1.ResourceName(r)] = *resource.NewQuantity(int64(devs.Len()), resource.DecimalSI)
	}
	for r, devs := range m.unhealthy {
		if e, ok := m.endpoints[r]; !ok || e.graceExpired(now) {
			gone.Insert(r)
			continue
		}
		q := capacity[v1.ResourceName(r)]
		q.Add(*resource.NewQuantity(int64(devs.Len()), resource.DecimalSI))
		capacity[v1.ResourceName(r)] = q
	}
	for r := range gone {
		delete(m.endpoints, r)
		delete(m.healthy, r)
		delete(m.unhealthy, r)
	}
	m.mu.Unlock()
	if gone.Len() > 0 {
		m.writeCheckpoint()
	}
	return capacity, allocatable, sets.List(gone)
}

// isExtendedResourceName is the API's IsExtendedResourceName: a
// domain-prefixed name outside kubernetes.io, not requests.*, that is a
// qualified name once prefixed with "requests.".
func isExtendedResourceName(name string) bool {
	if !strings.Contains(name, "/") || strings.Contains(name, v1.ResourceDefaultNamespacePrefix) ||
		strings.HasPrefix(name, v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(v1.DefaultResourceRequestsPrefix+name)) == 0
}
