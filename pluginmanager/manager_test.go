package pluginmanager

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
	"testing"
	"time"

	"github.com/crivk/crivk/pluginmanager/registrartest"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/wait"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	testingclock "k8s.io/utils/clock/testing"
)

// handler is a Handler of functions that records its calls as
// "validate|register|deregister name endpoint [versions]".
type handler struct {
	validate func(name string) error // nil: accept
	register func(name string) error // nil: accept

	mu    sync.Mutex
	calls []string
}

var _ Handler = (*handler)(nil)

func (h *handler) record(call string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, call)
}

func (h *handler) Calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls...)
}

func (h *handler) ValidatePlugin(_ context.Context, name, endpoint string, versions []string) error {
	h.record(fmt.Sprintf("validate %s %s %v", name, endpoint, versions))
	h.mu.Lock()
	f := h.validate
	h.mu.Unlock()
	if f != nil {
		return f(name)
	}
	return nil
}

func (h *handler) RegisterPlugin(_ context.Context, name, endpoint string, versions []string) error {
	h.record(fmt.Sprintf("register %s %s %v", name, endpoint, versions))
	h.mu.Lock()
	f := h.register
	h.mu.Unlock()
	if f != nil {
		return f(name)
	}
	return nil
}

func (h *handler) DeRegisterPlugin(_ context.Context, name, endpoint string) {
	h.record(fmt.Sprintf("deregister %s %s", name, endpoint))
}

// fixture is a Manager on a temporary directory with a fake clock (the
// reconciler runs at each change; the period and the back-offs pass
// only when the test steps the clock) and one handler for "CSIPlugin".
type fixture struct {
	m     *Manager
	dir   string
	clock *testingclock.FakeClock
	h     *handler
	stop  func()
}

const testPeriod = 100 * time.Millisecond

// newFixture makes the directory, calls before (may be nil) on it, then
// starts the manager.
func newFixture(t *testing.T, before func(dir string)) *fixture {
	t.Helper()
	// Short: a unix socket path has at most 107 bytes.
	dir, err := os.MkdirTemp("", "pm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	root := filepath.Join(dir, DirName)
	if before != nil {
		if err := os.Mkdir(root, 0o750); err != nil {
			t.Fatal(err)
		}
		before(root)
	}
	clk := testingclock.NewFakeClock(time.Unix(1_000_000, 0))
	m, err := New(Config{Dir: root, Clock: clk, Period: testPeriod, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h := &handler{}
	m.AddHandler(registerapi.CSIPlugin, h)
	ctx, cancel := context.WithCancel(context.Background())
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stop := func() {
		cancel()
		<-m.Done()
	}
	t.Cleanup(stop)
	return &fixture{m: m, dir: root, clock: clk, h: h, stop: stop}
}

// registrar starts a registrar on path (relative to the directory) with
// info, stopped at the test's end.
func (f *fixture) registrar(t *testing.T, path string, info *registerapi.PluginInfo) *registrartest.Registrar {
	t.Helper()
	r, err := registrartest.Start(filepath.Join(f.dir, path), info)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

func csiInfo(name string) *registerapi.PluginInfo {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: name, Endpoint: "/var/lib/kubelet/plugins/" + name + "/csi.sock", SupportedVersions: []string{"1.0.0"}}
}

// eventually waits (10s at most) for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// waitStatus waits for r's n-th status and returns it.
func waitStatus(t *testing.T, r *registrartest.Registrar, n int) *registerapi.RegistrationStatus {
	t.Helper()
	eventually(t, fmt.Sprintf("status %d of %s", n, r.Socket()), func() bool { return len(r.Statuses()) >= n })
	return r.Statuses()[n-1]
}

// waitIdle waits until no operation runs for socket (a failure's back-off
// has then begun at the fake clock's time).
func (f *fixture) waitIdle(t *testing.T, socket string) {
	t.Helper()
	eventually(t, "the operation's end", func() bool {
		f.m.ops.mu.Lock()
		defer f.m.ops.mu.Unlock()
		op, ok := f.m.ops.ops[socket]
		return !ok || !op.pending
	})
}

func (f *fixture) registered() []Plugin { return f.m.Registered() }

func TestRegistration(t *testing.T) {
	f := newFixture(t, nil)
	r := f.registrar(t, "hostpath.sock", csiInfo("hostpath.csi.k8s.io"))

	if s := waitStatus(t, r, 1); !s.PluginRegistered || s.Error != "" {
		t.Fatalf("status %v, want registered", s)
	}
	endpoint := "/var/lib/kubelet/plugins/hostpath.csi.k8s.io/csi.sock"
	want := []string{
		"validate hostpath.csi.k8s.io " + endpoint + " [1.0.0]",
		"register hostpath.csi.k8s.io " + endpoint + " [1.0.0]",
	}
	if diff := cmp.Diff(want, f.h.Calls()); diff != "" {
		t.Errorf("handler calls (-want +got):\n%s", diff)
	}
	wantPlugins := []Plugin{{Socket: r.Socket(), Type: registerapi.CSIPlugin, Name: "hostpath.csi.k8s.io", Endpoint: endpoint}}
	if diff := cmp.Diff(wantPlugins, f.registered()); diff != "" {
		t.Errorf("Registered (-want +got):\n%s", diff)
	}
	fi, err := os.Stat(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o750 {
		t.Errorf("the directory's mode: %v, want 0750", fi.Mode().Perm())
	}
}

// TestEndpointDefault: a plugin that gives no endpoint is registered with
// its registration socket as the endpoint.
func TestEndpointDefault(t *testing.T) {
	f := newFixture(t, nil)
	info := csiInfo("a")
	info.Endpoint = ""
	r := f.registrar(t, "a.sock", info)
	if s := waitStatus(t, r, 1); !s.PluginRegistered {
		t.Fatalf("status %v", s)
	}
	if got := f.registered(); len(got) != 1 || got[0].Endpoint != r.Socket() {
		t.Errorf("Registered %+v, want the endpoint %s", got, r.Socket())
	}
}

// TestValidationFailure: the plugin is told why, its handler's
// RegisterPlugin is not called, and it is tried again after the back-off.
func TestValidationFailure(t *testing.T) {
	f := newFixture(t, nil)
	f.h.validate = func(string) error { return errors.New("unsupported version") }
	r := f.registrar(t, "a.sock", csiInfo("a"))

	s := waitStatus(t, r, 1)
	want := "RegisterPlugin error -- plugin validation failed with err: unsupported version"
	if s.PluginRegistered || s.Error != want {
		t.Errorf("status %v, want not registered with %q", s, want)
	}
	if got := f.h.Calls(); len(got) != 1 || !strings.HasPrefix(got[0], "validate ") {
		t.Errorf("handler calls %q, want one validation", got)
	}
	if got := f.registered(); len(got) != 0 {
		t.Errorf("Registered %+v, want none", got)
	}

	f.waitIdle(t, r.Socket())
	f.h.mu.Lock()
	f.h.validate = nil
	f.h.mu.Unlock()
	f.clock.Step(initialDurationBeforeRetry - time.Millisecond)
	f.clock.Step(2 * time.Millisecond)
	if s := waitStatus(t, r, 2); !s.PluginRegistered {
		t.Errorf("after the back-off: status %v, want registered", s)
	}
	if got := f.h.Calls(); len(got) != 3 || !strings.HasPrefix(got[2], "register ") {
		t.Errorf("handler calls %q, want validate, validate, register", got)
	}
}

// TestRegisterFailure: the plugin is told why and is not registered.
func TestRegisterFailure(t *testing.T) {
	f := newFixture(t, nil)
	f.h.register = func(string) error { return errors.New("NodeGetInfo failed") }
	r := f.registrar(t, "a.sock", csiInfo("a"))
	s := waitStatus(t, r, 1)
	want := "RegisterPlugin error -- plugin registration failed with err: NodeGetInfo failed"
	if s.PluginRegistered || s.Error != want {
		t.Errorf("status %v, want not registered with %q", s, want)
	}
	f.waitIdle(t, r.Socket())
	if got := f.registered(); len(got) != 0 {
		t.Errorf("Registered %+v, want none", got)
	}
}

// TestNotifyFailure: a registration whose status cannot be sent is
// undone: the handler's DeRegisterPlugin follows its RegisterPlugin.
func TestNotifyFailure(t *testing.T) {
	f := newFixture(t, nil)
	info := csiInfo("a")
	r, err := registrartest.Start(filepath.Join(f.dir, "a.sock"), info)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	r.FailNotify(errors.New("registrar busy"))
	waitStatus(t, r, 1)
	f.waitIdle(t, r.Socket())
	var got []string
	for _, c := range f.h.Calls() {
		got = append(got, strings.Fields(c)[0])
	}
	if diff := cmp.Diff([]string{"validate", "register", "deregister"}, got); diff != "" {
		t.Errorf("handler calls (-want +got):\n%s", diff)
	}
	if got := f.registered(); len(got) != 0 {
		t.Errorf("Registered %+v, want none", got)
	}
	f.m.ops.mu.Lock()
	opErr := f.m.ops.ops[r.Socket()].lastErr
	f.m.ops.mu.Unlock()
	if want := "RegisterPlugin error -- failed to send registration status at socket " + r.Socket(); opErr == nil || !strings.HasPrefix(opErr.Error(), want) {
		t.Errorf("the operation's error %v, want %q...", opErr, want)
	}
}

// TestNoHandler: a plugin of a type without a handler is told so.
func TestNoHandler(t *testing.T) {
	f := newFixture(t, nil)
	info := csiInfo("a")
	info.Type = registerapi.DevicePlugin
	r := f.registrar(t, "a.sock", info)
	s := waitStatus(t, r, 1)
	want := "RegisterPlugin error -- no handler registered for plugin type: DevicePlugin at socket " + r.Socket()
	if s.PluginRegistered || s.Error != want {
		t.Errorf("status %v, want not registered with %q", s, want)
	}
	if got := f.h.Calls(); len(got) != 0 {
		t.Errorf("handler calls %q, want none", got)
	}
}

// TestDeregistrationAndReregistration: the socket's removal deregisters
// the plugin with its name and endpoint; the socket created again
// registers it again.
func TestDeregistrationAndReregistration(t *testing.T) {
	f := newFixture(t, nil)
	r := f.registrar(t, "a.sock", csiInfo("a"))
	waitStatus(t, r, 1)
	// The registration ends once the status's answer is read: a registrar
	// stopped before has failed it (its plugin is deregistered and retried
	// after the back-off, which this fake clock never reaches).
	f.waitIdle(t, r.Socket())
	r.Stop()
	endpoint := "/var/lib/kubelet/plugins/a/csi.sock"
	eventually(t, "the deregistration", func() bool { return len(f.h.Calls()) == 3 })
	if got := f.h.Calls()[2]; got != "deregister a "+endpoint {
		t.Errorf("third call %q, want the deregistration", got)
	}
	if got := f.registered(); len(got) != 0 {
		t.Errorf("Registered %+v, want none", got)
	}

	r2 := f.registrar(t, "a.sock", csiInfo("a"))
	if s := waitStatus(t, r2, 1); !s.PluginRegistered {
		t.Errorf("again: status %v", s)
	}
	want := []string{"validate", "register", "deregister", "validate", "register"}
	var got []string
	for _, c := range f.h.Calls() {
		got = append(got, strings.Fields(c)[0])
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("handler calls (-want +got):\n%s", diff)
	}
	if got := f.registered(); len(got) != 1 {
		t.Errorf("Registered %+v, want one", got)
	}
}

// TestSocketReplaced: a socket replaced by another (renamed over it: a
// creation without a removal) is deregistered before it is registered
// again: its generation changed.
func TestSocketReplaced(t *testing.T) {
	f := newFixture(t, nil)
	r := f.registrar(t, "a.sock", csiInfo("a"))
	waitStatus(t, r, 1)
	// Dot-named: ignored until renamed.
	r2 := f.registrar(t, ".a.sock.new", csiInfo("a"))
	if err := os.Rename(r2.Socket(), r.Socket()); err != nil {
		t.Fatal(err)
	}
	if s := waitStatus(t, r2, 1); !s.PluginRegistered {
		t.Fatalf("status %v", s)
	}
	eventually(t, "five calls", func() bool { return len(f.h.Calls()) == 5 })
	var got []string
	for _, c := range f.h.Calls() {
		got = append(got, strings.Fields(c)[0])
	}
	if diff := cmp.Diff([]string{"validate", "register", "deregister", "validate", "register"}, got); diff != "" {
		t.Errorf("handler calls (-want +got):\n%s", diff)
	}
	if n := len(r.Statuses()); n != 1 {
		t.Errorf("the replaced registrar got %d statuses, want 1", n)
	}
}

// TestDirectories: sockets there at start, in subdirectories at any
// depth, and in a directory created later are registered; dot-named ones
// created later and other files are not.
func TestDirectories(t *testing.T) {
	var early []*registrartest.Registrar
	f := newFixture(t, func(root string) {
		for _, p := range []string{"top.sock", "sub/mid.sock", "sub/deeper/low.sock"} {
			path := filepath.Join(root, p)
			if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
				t.Fatal(err)
			}
			r, err := registrartest.Start(path, csiInfo(strings.TrimSuffix(filepath.Base(p), ".sock")))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(r.Stop)
			early = append(early, r)
		}
		if err := os.WriteFile(filepath.Join(root, "sub", "notes.txt"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	for _, r := range early {
		if s := waitStatus(t, r, 1); !s.PluginRegistered {
			t.Errorf("%s: status %v", r.Socket(), s)
		}
	}

	// Created later: a dot-named socket and directory (ignored), then a
	// directory with a socket.
	hidden := f.registrar(t, ".hidden.sock", csiInfo("hidden"))
	if err := os.Mkdir(filepath.Join(f.dir, ".dot"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "file.sock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(f.dir, "new", "nested"), 0o750); err != nil {
		t.Fatal(err)
	}
	// The watch of new/ is added when its creation is handled: wait for
	// it before the socket in it, as a registrar would not wait.
	eventually(t, "the watch of new/nested", func() bool {
		for _, p := range f.m.watchList() {
			if p == filepath.Join(f.dir, "new", "nested") {
				return true
			}
		}
		return false
	})
	late := f.registrar(t, "new/nested/late.sock", csiInfo("late"))
	if s := waitStatus(t, late, 1); !s.PluginRegistered {
		t.Errorf("late: status %v", s)
	}
	// The events are handled in order: the dot-named ones were before.
	for socket := range f.m.desired.snapshot() {
		if strings.Contains(socket, "/.") || strings.HasSuffix(socket, "file.sock") {
			t.Errorf("%s is desired", socket)
		}
	}
	if n := hidden.InfoCalls(); n != 0 {
		t.Errorf("the dot-named socket was asked GetInfo %d times", n)
	}
	var names []string
	for _, p := range f.registered() {
		names = append(names, p.Name)
	}
	if diff := cmp.Diff([]string{"late", "low", "mid", "top"}, slices.Sorted(slices.Values(names))); diff != "" {
		t.Errorf("registered (-want +got):\n%s", diff)
	}

	// A socket in a subdirectory removed: deregistered.
	f.waitIdle(t, early[2].Socket())
	early[2].Stop()
	eventually(t, "low's deregistration", func() bool {
		for _, c := range f.h.Calls() {
			if strings.HasPrefix(c, "deregister low ") {
				return true
			}
		}
		return false
	})
}

// TestStaleSocket: a socket nobody serves (a plugin gone while the agent
// was down) is not registered, and its dial is retried after the
// back-off.
func TestStaleSocket(t *testing.T) {
	var socket string
	f := newFixture(t, func(root string) {
		socket = filepath.Join(root, "gone.sock")
		l, err := net.Listen("unix", socket)
		if err != nil {
			t.Fatal(err)
		}
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		l.Close()
	})
	eventually(t, "the failed dial", func() bool {
		f.m.ops.mu.Lock()
		defer f.m.ops.mu.Unlock()
		op, ok := f.m.ops.ops[socket]
		return ok && !op.pending && op.lastErr != nil
	})
	f.m.ops.mu.Lock()
	err := f.m.ops.ops[socket].lastErr
	f.m.ops.mu.Unlock()
	if want := "RegisterPlugin error -- dial failed at socket " + socket; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want %q...", err, want)
	}
	if got := f.h.Calls(); len(got) != 0 {
		t.Errorf("handler calls %q, want none", got)
	}
}

// watchList is what the watcher watches.
func (m *Manager) watchList() []string { return m.watcher.fs.WatchList() }
