package pluginmanager

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	"k8s.io/utils/clock"
)

// DirName is the registration directory's name under the root directory
// (the kubelet's DefaultKubeletPluginsRegistrationDirName).
const DirName = "plugins_registry"

// loopPeriod is Config.Period's default (the kubelet's loopSleepDuration).
const loopPeriod = time.Second

// Handler is what a consumer of one plugin type implements (the kubelet's
// cache.PluginHandler). For one socket the calls are sequential:
// ValidatePlugin, then RegisterPlugin if it passed, then DeRegisterPlugin
// once the socket is removed or created again, each with the name and
// endpoint the plugin gave (the endpoint is the socket when it gave none)
// and the versions it supports. The kubelet's pluginClientTimeout
// argument, which it always passes nil, is left out: the handler uses its
// own.
type Handler interface {
	// ValidatePlugin returns an error when the plugin cannot be
	// registered (an unsupported version, a name taken); the error is sent
	// to the plugin.
	ValidatePlugin(ctx context.Context, name, endpoint string, versions []string) error
	// RegisterPlugin makes the plugin usable; an error is sent to the
	// plugin and the registration is tried again after the back-off.
	RegisterPlugin(ctx context.Context, name, endpoint string, versions []string) error
	// DeRegisterPlugin forgets a plugin RegisterPlugin accepted.
	DeRegisterPlugin(ctx context.Context, name, endpoint string)
}

// Config configures a Manager; New validates it and fills defaults.
type Config struct {
	// Dir is the registration directory, absolute:
	// <root-dir>/plugins_registry (DirName).
	Dir string
	// Clock times the reconciler's period and the back-offs (default: the
	// real clock).
	Clock clock.WithTicker
	// Period is the reconciler's period (default 1s, the kubelet's); it
	// also runs at each change of the desired state and after each
	// operation.
	Period time.Duration
	// DialTimeout bounds the connection to a registration socket (default
	// 10s, the kubelet's).
	DialTimeout time.Duration
}

// Plugin is a registered plugin, as Registered reports it.
type Plugin struct {
	// Socket is the registration socket, under Dir.
	Socket string
	// Type is the GetInfo answer's type ("CSIPlugin", "DRAPlugin").
	Type string
	// Name and Endpoint are what the handler was given.
	Name, Endpoint string
}

// Manager is the plugin manager of one node (see the package
// documentation).
type Manager struct {
	cfg     Config
	desired *desired
	actual  *actual
	ops     *operations
	// kick wakes the reconciler (one slot: changes coalesce).
	kick chan struct{}

	mu sync.Mutex
	// handlers maps a plugin type to its handler. Guarded by mu.
	handlers map[string]Handler
	// started is set by Start. Guarded by mu.
	started bool
	// watcher is set by Start, before its goroutines.
	watcher *watcher

	done chan struct{}
}

// New validates cfg and returns a Manager that watches nothing yet
// (Start).
func New(cfg Config) (*Manager, error) {
	if cfg.Dir == "" || !filepath.IsAbs(cfg.Dir) {
		return nil, fmt.Errorf("pluginmanager: the registration directory must be an absolute path: %q", cfg.Dir)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Period <= 0 {
		cfg.Period = loopPeriod
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = dialTimeout
	}
	m := &Manager{
		cfg:      cfg,
		desired:  newDesired(),
		actual:   newActual(),
		kick:     make(chan struct{}, 1),
		handlers: map[string]Handler{},
		done:     make(chan struct{}),
	}
	m.ops = newOperations(cfg.Clock, m.wake)
	return m, nil
}

// AddHandler sets the handler of the plugins of pluginType (the GetInfo
// answer's type: registerapi.CSIPlugin, registerapi.DRAPlugin). A
// registration of a type without a handler is refused (the plugin is told
// so) and tried again after its back-off.
func (m *Manager) AddHandler(pluginType string, h Handler) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.handlers[pluginType] = h
}

func (m *Manager) handlerSnapshot() map[string]Handler {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.handlers)
}

// Start creates Dir (0750), watches it and the directories under it, and
// runs the reconciler until ctx ends; then Done is closed once the
// operations running have returned. The sockets already in Dir are
// desired when Start returns. An error (Dir cannot be made or watched, or
// Start was called before): nothing runs and Done stays open.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		return errors.New("pluginmanager: already started")
	}
	m.started = true
	m.mu.Unlock()

	w := &watcher{dir: m.cfg.Dir, desired: m.desired, changed: m.wake}
	m.watcher = w
	watched := make(chan struct{})
	if err := w.start(ctx, watched); err != nil {
		return err
	}
	log.G(ctx).WithField("path", m.cfg.Dir).Info("Starting Kubelet Plugin Manager")
	go func() {
		defer close(m.done)
		m.run(ctx)
		<-watched
		m.ops.wait()
		log.G(ctx).Info("Shutting down Kubelet Plugin Manager")
	}()
	return nil
}

// Done is closed once the loops started by Start have stopped.
func (m *Manager) Done() <-chan struct{} { return m.done }

// Registered returns the plugins registered, by socket.
func (m *Manager) Registered() []Plugin {
	have := m.actual.snapshot()
	out := make([]Plugin, 0, len(have))
	for _, r := range have {
		out = append(out, Plugin{Socket: r.socket, Type: r.pluginType, Name: r.name, Endpoint: r.endpoint})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Socket < out[j].Socket })
	return out
}

func (m *Manager) wake() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// run reconciles at once, then at each Period and each wake, until ctx
// ends.
func (m *Manager) run(ctx context.Context) {
	t := m.cfg.Clock.NewTicker(m.cfg.Period)
	defer t.Stop()
	for {
		m.reconcile(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-m.kick:
		}
	}
}

// reconcile starts the operations of the plan: the deregistrations first,
// then the registrations (the kubelet's reconciler.reconcile). An
// operation that cannot start now (one is running for its socket, or the
// socket's back-off has not expired) is left for a later round; the
// operations log their own failures.
func (m *Manager) reconcile(ctx context.Context) {
	deregister, register := plan(m.desired.snapshot(), m.actual.snapshot())
	for _, r := range deregister {
		_ = m.ops.run(ctx, r.socket, func() error {
			m.deregister(ctx, r)
			return nil
		})
	}
	if len(register) == 0 {
		return
	}
	handlers := m.handlerSnapshot()
	for _, p := range register {
		_ = m.ops.run(ctx, p.socket, func() error {
			return m.register(ctx, p.socket, p.generation, handlers)
		})
	}
}
