package pluginmanager

import (
	"maps"
	"sort"
	"sync"
)

// desired is the desired state of the world (the kubelet's
// desiredStateOfWorld): the registration sockets the watcher saw, each
// with the generation of its last creation. A socket created again gets a
// new generation, so a registration made for the old one is replaced
// (the kubelet's UUID).
type desired struct {
	mu sync.Mutex
	// sockets maps a socket path to its generation. Guarded by mu.
	sockets map[string]uint64
	// last is the last generation given. Guarded by mu.
	last uint64
}

func newDesired() *desired { return &desired{sockets: map[string]uint64{}} }

// add records that socket was created (again).
func (d *desired) add(socket string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.last++
	d.sockets[socket] = d.last
}

// remove records that socket was removed; a socket not seen is no error.
func (d *desired) remove(socket string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.sockets, socket)
}

func (d *desired) snapshot() map[string]uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.sockets)
}

// registration is one plugin as it was registered: the socket and its
// generation, the handler of its type, and the name and endpoint the
// handler was given (DeRegisterPlugin gets the same).
type registration struct {
	socket     string
	generation uint64
	pluginType string
	handler    Handler
	name       string
	endpoint   string
}

// actual is the actual state of the world (the kubelet's
// actualStateOfWorld): the plugins registered, by socket. A plugin enters
// it before its handler's RegisterPlugin and leaves it before
// DeRegisterPlugin, so that a removal seen during either is planned.
type actual struct {
	mu sync.Mutex
	// plugins maps a socket path to its registration. Guarded by mu.
	plugins map[string]registration
}

func newActual() *actual { return &actual{plugins: map[string]registration{}} }

func (a *actual) add(r registration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.plugins[r.socket] = r
}

func (a *actual) remove(socket string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.plugins, socket)
}

func (a *actual) snapshot() map[string]registration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.plugins)
}

// toRegister is a socket to register, of one generation.
type toRegister struct {
	socket     string
	generation uint64
}

// plan is the reconciler's decision (the kubelet's reconcile), a pure
// function of the two states: the registrations to undo, first (a socket
// no longer desired, or desired with another generation: created again),
// then the sockets to register (desired, and not registered with that
// generation). A socket created again is in both: its operation key keeps
// the registration from starting before the deregistration completed. Both
// are sorted by socket, for a stable order.
func plan(want map[string]uint64, have map[string]registration) (deregister []registration, register []toRegister) {
	for socket, r := range have {
		if g, ok := want[socket]; !ok || g != r.generation {
			deregister = append(deregister, r)
		}
	}
	for socket, g := range want {
		if r, ok := have[socket]; !ok || r.generation != g {
			register = append(register, toRegister{socket: socket, generation: g})
		}
	}
	sort.Slice(deregister, func(i, j int) bool { return deregister[i].socket < deregister[j].socket })
	sort.Slice(register, func(i, j int) bool { return register[i].socket < register[j].socket })
	return deregister, register
}
