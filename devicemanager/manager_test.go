package devicemanager

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crivk/crivk/devicemanager/deviceplugintest"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	testingclock "k8s.io/utils/clock/testing"
)

const res = "example.com/dev"

// fixture is a started Manager in a temporary directory, with a fake
// clock for the stop grace period.
type fixture struct {
	m     *Manager
	dir   string
	clock *testingclock.FakeClock
	stop  func() // stops m (the test's end calls it too)
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	// Short: a unix socket path has at most 107 bytes.
	dir, err := os.MkdirTemp("", "dm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return startFixture(t, dir, nil)
}

// startFixture starts a Manager on dir (rt lists the running containers;
// may be nil).
func startFixture(t *testing.T, dir string, rt ContainerLister) *fixture {
	t.Helper()
	clk := testingclock.NewFakeClock(time.Unix(1_000_000, 0))
	m, err := New(Config{Dir: dir, Clock: clk, Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stop := func() {
		cancel()
		<-m.Done()
	}
	t.Cleanup(stop)
	return &fixture{m: m, dir: dir, clock: clk, stop: stop}
}

// plugin starts a test plugin of res with devices on the fixture's
// directory (not registered yet).
func (f *fixture) plugin(t *testing.T, name string, devices ...*pluginapi.Device) *deviceplugintest.Plugin {
	t.Helper()
	p := deviceplugintest.New(f.dir, name+".sock", res, devices...)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

func register(t *testing.T, p *deviceplugintest.Plugin) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Register(ctx); err != nil {
		t.Fatalf("Register: %v", err)
	}
}

// counts is a resource's capacity and allocatable, -1 when absent (as
// the node e2e suite's getNodeResourceValues).
type counts struct{ capacity, allocatable int64 }

func (f *fixture) counts() counts {
	c, a, _ := f.m.Capacity()
	out := counts{-1, -1}
	if q, ok := c[res]; ok {
		out.capacity = q.Value()
	}
	if q, ok := a[res]; ok {
		out.allocatable = q.Value()
	}
	return out
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

func (f *fixture) waitCounts(t *testing.T, want counts) {
	t.Helper()
	var got counts
	eventually(t, "the resource's counts", func() bool { got = f.counts(); return got == want })
}

func TestRegisterRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		version, resource string
		fail              func(string) error
		want              []string
		calls             []string
	}{
		"unsupported version": {version: "v1alpha", resource: res,
			want: []string{`requested API version "v1alpha" is not supported by kubelet. Supported version is ["v1beta1"]`}},
		"not an extended resource": {resource: "cpu", want: []string{`the ResourceName "cpu" is invalid`}},
		"kubernetes.io domain":     {resource: "kubernetes.io/dev", want: []string{`the ResourceName "kubernetes.io/dev" is invalid`}},
		"GetDevicePluginOptions fails": {resource: res,
			fail: func(m string) error {
				if m == "GetDevicePluginOptions" {
					return errors.New("GetDevicePluginOptions failed")
				}
				return nil
			},
			want:  []string{"failed to get device plugin options", "GetDevicePluginOptions failed"},
			calls: []string{"GetDevicePluginOptions"}},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			p := f.plugin(t, "p", deviceplugintest.Devices("d", 1)...)
			p.Version, p.Resource, p.Fail = tc.version, tc.resource, tc.fail
			err := p.Register(context.Background())
			if err == nil {
				t.Fatal("Register succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if got := p.Methods(); !slices.Equal(got, tc.calls) {
				t.Errorf("plugin calls %v, want %v", got, tc.calls)
			}
			if c, a, _ := f.m.Capacity(); len(c) != 0 || len(a) != 0 {
				t.Errorf("a refused plugin has capacity %v allocatable %v", c, a)
			}
		})
	}
}

func TestRegisterUnreachableEndpoint(t *testing.T) {
	f := newFixture(t)
	f.m.cfg.DialTimeout = 200 * time.Millisecond         // before any Register
	p := deviceplugintest.New(f.dir, "nobody.sock", res) // never started
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Register(ctx); err == nil || !strings.Contains(err.Error(), "failed to dial device plugin") {
		t.Errorf("Register of an endpoint nobody serves: %v", err)
	}
}

// TestHealth: the Device Plugin Failures specs' health transitions, at the
// manager: capacity counts every device, allocatable the healthy ones.
func TestHealth(t *testing.T) {
	f := newFixture(t)
	devs := deviceplugintest.Devices("d", 4)
	p := f.plugin(t, "p", devs...)
	register(t, p)
	f.waitCounts(t, counts{4, 4})
	steps := []struct {
		unhealthy []int
		want      counts
	}{
		{[]int{3}, counts{4, 3}},
		{nil, counts{4, 4}},
		{[]int{1, 3}, counts{4, 2}},
		{[]int{1}, counts{4, 3}},
		{[]int{0, 1, 2, 3}, counts{4, 0}},
		{nil, counts{4, 4}},
	}
	for _, s := range steps {
		next := deviceplugintest.Devices("d", 4)
		for _, i := range s.unhealthy {
			next[i].Health = pluginapi.Unhealthy
		}
		p.SetDevices(next)
		f.waitCounts(t, s.want)
	}
	if got := p.Methods(); !slices.Equal(got, []string{"GetDevicePluginOptions", "ListAndWatch"}) {
		t.Errorf("plugin calls %v", got)
	}
}

// TestListAndWatchFails: a stream that fails at once leaves the resource
// with capacity 0 and no allocatable; one that fails later makes every
// device unhealthy. ListAndWatch is never called again, and the resource
// goes once the grace period has passed.
func TestListAndWatchFails(t *testing.T) {
	failing := func(fail *bool) func(string) error {
		return func(m string) error {
			if m == "ListAndWatch" && *fail {
				return errors.New("ListAndWatch failed")
			}
			return nil
		}
	}
	t.Run("immediately", func(t *testing.T) {
		f := newFixture(t)
		fail := true
		p := f.plugin(t, "p", deviceplugintest.Devices("d", 1)...)
		p.Fail = failing(&fail)
		register(t, p)
		f.waitCounts(t, counts{0, -1})
		if got := p.Methods(); !slices.Equal(got, []string{"GetDevicePluginOptions", "ListAndWatch"}) {
			t.Errorf("plugin calls %v", got)
		}
	})
	t.Run("after provisioning", func(t *testing.T) {
		f := newFixture(t)
		fail := false
		devs := deviceplugintest.Devices("d", 2)
		p := f.plugin(t, "p", devs...)
		p.Fail = failing(&fail)
		register(t, p)
		f.waitCounts(t, counts{2, 2})
		fail = true
		p.SetDevices(devs) // wakes the stream, which fails
		f.waitCounts(t, counts{2, 0})
		if got := p.Methods(); !slices.Equal(got, []string{"GetDevicePluginOptions", "ListAndWatch"}) {
			t.Errorf("plugin calls %v", got)
		}
		f.clock.Step(EndpointStopGracePeriod)
		if got := f.counts(); got != (counts{2, 0}) {
			t.Errorf("at the end of the grace period: %v", got)
		}
		f.clock.Step(time.Second)
		if _, _, removed := f.m.Capacity(); !slices.Equal(removed, []string{res}) {
			t.Errorf("removed after the grace period: %v", removed)
		}
		if c, _, removed := f.m.Capacity(); len(c) != 0 || len(removed) != 0 {
			t.Errorf("the next Capacity: capacity %v removed %v", c, removed)
		}
	})
}

// TestPluginStopsAndRegistersAgain: a stopped plugin's devices turn
// unhealthy at once; a new registration within the grace period replaces
// it, and the resource is not removed.
func TestPluginStopsAndRegistersAgain(t *testing.T) {
	f := newFixture(t)
	p := f.plugin(t, "p", deviceplugintest.Devices("d", 2)...)
	register(t, p)
	f.waitCounts(t, counts{2, 2})
	p.Stop()
	f.waitCounts(t, counts{2, 0})
	f.clock.Step(time.Minute)
	p2 := f.plugin(t, "p2", deviceplugintest.Devices("d", 3)...)
	register(t, p2)
	f.waitCounts(t, counts{3, 3})
	f.clock.Step(2 * EndpointStopGracePeriod)
	if _, _, removed := f.m.Capacity(); len(removed) != 0 {
		t.Errorf("a registered resource was removed: %v", removed)
	}
	if got := f.counts(); got != (counts{3, 3}) {
		t.Errorf("after the re-registration: %v", got)
	}
}

// TestStartRemovesStaleSockets: the sockets left in the directory go, the
// checkpoint, other files and directories stay.
func TestStartRemovesStaleSockets(t *testing.T) {
	dir, err := os.MkdirTemp("", "dm")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	stale := filepath.Join(dir, "old.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	for _, name := range []string{CheckpointName, "notes"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o750); err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); <-m.Done() }()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale socket: %v", err)
	}
	for _, name := range []string{CheckpointName, "notes", "sub", SocketName} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestNewRejectsRelativeDir(t *testing.T) {
	if _, err := New(Config{Dir: "device-plugins"}); err == nil {
		t.Error("a relative directory was accepted")
	}
}

func devicePod(uid, name string, init, app []int64) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(uid)}}
	limit := func(n int64) v1.ResourceRequirements {
		rl := v1.ResourceList{res: *resource.NewQuantity(n, resource.DecimalSI)}
		return v1.ResourceRequirements{Limits: rl, Requests: rl}
	}
	for i, n := range init {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: "init" + string(rune('0'+i)), Resources: limit(n)})
	}
	for i, n := range app {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "c" + string(rune('0'+i)), Resources: limit(n)})
	}
	return p
}

// TestAllocate: admission takes free healthy devices and calls the
// plugin's Allocate per container; the plugin's answer is the container's
// CRI options; a pod asking for more than is free is refused with the
// kubelet's error; a pod no longer active frees its devices.
func TestAllocate(t *testing.T) {
	f := newFixture(t)
	p := f.plugin(t, "p", deviceplugintest.Devices("d", 2)...)
	register(t, p)
	f.waitCounts(t, counts{2, 2})

	first := devicePod("u1", "first", nil, []int64{1})
	if err := f.m.Allocate(context.Background(), first, nil); err != nil {
		t.Fatalf("Allocate: %v", err)
	}
	got := f.m.Devices("u1", "c0")[res]
	if len(got) != 1 {
		t.Fatalf("devices of the first pod: %v", got)
	}
	opts, err := f.m.ContainerOptions(context.Background(), first, &first.Spec.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	wantEnv := []*runtimeapi.KeyValue{{Key: deviceplugintest.EnvDevices, Value: []byte(got[0])}}
	if len(opts.Envs) != 1 || opts.Envs[0].Key != wantEnv[0].Key || !bytes.Equal(opts.Envs[0].Value, wantEnv[0].Value) {
		t.Errorf("envs %v, want %v", opts.Envs, wantEnv)
	}
	if opts.Annotations["deviceplugintest/devices"] != got[0] {
		t.Errorf("annotations %v", opts.Annotations)
	}
	if n := len(p.Calls()); n != 3 { // options, ListAndWatch, Allocate
		t.Errorf("plugin calls %v", p.Methods())
	}

	second := devicePod("u2", "second", nil, []int64{2})
	err = f.m.Allocate(context.Background(), second, []*v1.Pod{first})
	if want := "requested number of devices unavailable for example.com/dev. Requested: 2, Available: 1"; err == nil || err.Error() != want {
		t.Errorf("Allocate of 2 with 1 free: %v, want %q", err, want)
	}
	if err := f.m.Allocate(context.Background(), second, nil); err != nil { // first is gone
		t.Errorf("Allocate once the first pod is gone: %v", err)
	}
	if d := f.m.Devices("u2", "c0")[res]; len(d) != 2 {
		t.Errorf("devices of the second pod: %v", d)
	}
	if d := f.m.Devices("u1", "c0"); len(d) != 0 {
		t.Errorf("the first pod kept %v", d)
	}
	if in := f.m.InUse(second); in.Name(res, resource.DecimalSI).Value() != 2 {
		t.Errorf("InUse: %v", in)
	}
	if in := f.m.InUse(first); in != nil {
		t.Errorf("InUse of a pod without devices: %v", in)
	}
}

func TestAllocateRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		devices func() []*pluginapi.Device
		pod     *v1.Pod
		want    string
	}{
		"all unhealthy": {
			devices: func() []*pluginapi.Device {
				d := deviceplugintest.Devices("d", 1)
				d[0].Health = pluginapi.Unhealthy
				return d
			},
			pod:  devicePod("u", "p", nil, []int64{1}),
			want: "no healthy devices present; cannot allocate unhealthy devices example.com/dev",
		},
		"more than the devices": {
			devices: func() []*pluginapi.Device { return deviceplugintest.Devices("d", 1) },
			pod:     devicePod("u", "p", nil, []int64{2}),
			want:    "requested number of devices unavailable for example.com/dev. Requested: 2, Available: 1",
		},
		"two containers, one device": {
			devices: func() []*pluginapi.Device { return deviceplugintest.Devices("d", 1) },
			pod:     devicePod("u", "p", nil, []int64{1, 1}),
			want:    "requested number of devices unavailable for example.com/dev. Requested: 1, Available: 0",
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			p := f.plugin(t, "p", tc.devices()...)
			register(t, p)
			eventually(t, "the devices listed", func() bool { return f.counts().capacity == 1 })
			if err := f.m.Allocate(context.Background(), tc.pod, nil); err == nil || err.Error() != tc.want {
				t.Errorf("Allocate: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestAllocateInitContainerDevicesReused: an init container's devices are
// given to the app container after it.
func TestAllocateInitContainerDevicesReused(t *testing.T) {
	f := newFixture(t)
	p := f.plugin(t, "p", deviceplugintest.Devices("d", 1)...)
	register(t, p)
	f.waitCounts(t, counts{1, 1})
	pod := devicePod("u", "p", []int64{1}, []int64{1})
	if err := f.m.Allocate(context.Background(), pod, nil); err != nil {
		t.Fatalf("Allocate: %v", err)
	}
	if a, b := f.m.Devices("u", "init0")[res], f.m.Devices("u", "c0")[res]; !slices.Equal(a, []string{"d0"}) || !slices.Equal(b, []string{"d0"}) {
		t.Errorf("init container %v, app container %v", a, b)
	}
}

// TestPreferredAllocationAndPreStart: a plugin advertising
// GetPreferredAllocation gets its choice; one asking for PreStartContainer
// is called before the container is created, with its devices.
func TestPreferredAllocationAndPreStart(t *testing.T) {
	f := newFixture(t)
	p := f.plugin(t, "p", deviceplugintest.Devices("d", 4)...)
	p.Options = &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true, PreStartRequired: true}
	register(t, p)
	f.waitCounts(t, counts{4, 4})
	pod := devicePod("u", "p", nil, []int64{2})
	if err := f.m.Allocate(context.Background(), pod, nil); err != nil {
		t.Fatalf("Allocate: %v", err)
	}
	if got := f.m.Devices("u", "c0")[res]; !slices.Equal(got, []string{"d2", "d3"}) {
		t.Errorf("devices %v, want the plugin's preferred d2, d3", got)
	}
	if _, err := f.m.ContainerOptions(context.Background(), pod, &pod.Spec.Containers[0]); err != nil {
		t.Fatal(err)
	}
	calls := p.Calls()
	last := calls[len(calls)-1]
	if last.Method != "PreStartContainer" || !slices.Equal(last.DeviceIDs, []string{"d2", "d3"}) {
		t.Errorf("last call %+v, want PreStartContainer of d2, d3; calls %v", last, p.Methods())
	}
}

// TestContainerOptionsMerge: the plugin's envs, mounts, devices,
// annotations and CDI devices all reach the CRI options.
func TestContainerOptionsMerge(t *testing.T) {
	f := newFixture(t)
	p := f.plugin(t, "p", deviceplugintest.Devices("d", 1)...)
	p.Respond = func(ids []string) *pluginapi.ContainerAllocateResponse {
		return &pluginapi.ContainerAllocateResponse{
			Envs:        map[string]string{"B": "2", "A": "1"},
			Mounts:      []*pluginapi.Mount{{ContainerPath: "/dev-data", HostPath: "/var/dev-data", ReadOnly: true}},
			Devices:     []*pluginapi.DeviceSpec{{ContainerPath: "/dev/x0", HostPath: "/dev/null", Permissions: "rw"}},
			Annotations: map[string]string{"a": "b"},
			CdiDevices:  []*pluginapi.CDIDevice{{Name: "example.com/dev=" + ids[0]}},
		}
	}
	register(t, p)
	f.waitCounts(t, counts{1, 1})
	pod := devicePod("u", "p", nil, []int64{1})
	if err := f.m.Allocate(context.Background(), pod, nil); err != nil {
		t.Fatal(err)
	}
	o, err := f.m.ContainerOptions(context.Background(), pod, &pod.Spec.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Envs) != 2 || o.Envs[0].Key != "A" || o.Envs[1].Key != "B" {
		t.Errorf("envs %v", o.Envs)
	}
	if len(o.Mounts) != 1 || o.Mounts[0].ContainerPath != "/dev-data" || o.Mounts[0].HostPath != "/var/dev-data" || !o.Mounts[0].Readonly {
		t.Errorf("mounts %v", o.Mounts)
	}
	if len(o.Devices) != 1 || o.Devices[0].ContainerPath != "/dev/x0" || o.Devices[0].HostPath != "/dev/null" || o.Devices[0].Permissions != "rw" {
		t.Errorf("devices %v", o.Devices)
	}
	if o.Annotations["a"] != "b" || len(o.CDIDevices) != 1 || o.CDIDevices[0].Name != "example.com/dev=d0" {
		t.Errorf("annotations %v CDI devices %v", o.Annotations, o.CDIDevices)
	}
	other := v1.Container{Name: "none"}
	if o, err := f.m.ContainerOptions(context.Background(), pod, &other); o != nil || err != nil {
		t.Errorf("a container without devices: %v, %v", o, err)
	}
}

// TestStopMarksUnhealthy: when the manager stops, every plugin is
// disconnected.
func TestStopMarksUnhealthy(t *testing.T) {
	f := newFixture(t)
	p := f.plugin(t, "p", deviceplugintest.Devices("d", 2)...)
	register(t, p)
	f.waitCounts(t, counts{2, 2})
	// The fixture's clean-up stops the manager; check it from here.
	ctx, cancel := context.WithCancel(context.Background())
	m, err := New(Config{Dir: filepath.Join(f.dir, "other")})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	q := deviceplugintest.New(filepath.Join(f.dir, "other"), "q.sock", res, deviceplugintest.Devices("d", 2)...)
	if err := q.Start(); err != nil {
		t.Fatal(err)
	}
	defer q.Stop()
	register(t, q)
	eventually(t, "the devices listed", func() bool { _, a, _ := m.Capacity(); return a.Name(res, resource.DecimalSI).Value() == 2 })
	cancel()
	<-m.Done()
	if c, a, _ := m.Capacity(); c.Name(res, resource.DecimalSI).Value() != 2 || a.Name(res, resource.DecimalSI).Value() != 0 {
		t.Errorf("after the stop: capacity %v allocatable %v", c, a)
	}
}

// runningLister lists the given containers as running.
type runningLister []*runtimeapi.Container

func (l runningLister) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return l, nil
}

// TestRestartRestoresAllocations: the checkpoint written before a restart
// gives the new Manager the allocations (a re-admitted running container
// keeps its devices, even before its plugin registers again) and the
// resource, at 0 until its plugin registers, and gone after the grace
// period if it does not.
func TestRestartRestoresAllocations(t *testing.T) {
	f := newFixture(t)
	p := f.plugin(t, "p", deviceplugintest.Devices("d", 2)...)
	register(t, p)
	f.waitCounts(t, counts{2, 2})
	one := devicePod("u1", "one", nil, []int64{1})
	if err := f.m.Allocate(context.Background(), one, nil); err != nil {
		t.Fatal(err)
	}
	held := f.m.Devices("u1", "c0")[res]
	p.Stop()

	// crivk restarts.
	f.stop()
	dir := f.dir
	rt := runningLister{{Labels: map[string]string{"io.kubernetes.pod.uid": "u1", "io.kubernetes.container.name": "c0"}}}
	f = startFixture(t, dir, rt)
	if got := f.counts(); got != (counts{0, 0}) {
		t.Errorf("the restored resource before its plugin registers: %v, want 0 and 0", got)
	}
	if err := f.m.Allocate(context.Background(), one, nil); err != nil {
		t.Errorf("re-admission of the running pod: %v", err)
	}
	if got := f.m.Devices("u1", "c0")[res]; !slices.Equal(got, held) {
		t.Errorf("the running pod's devices %v, want %v", got, held)
	}
	o, err := f.m.ContainerOptions(context.Background(), one, &one.Spec.Containers[0])
	if err != nil || len(o.Envs) != 1 || string(o.Envs[0].Value) != held[0] {
		t.Errorf("restored options %v, %v", o, err)
	}
	p2 := f.plugin(t, "p2", deviceplugintest.Devices("d", 2)...)
	register(t, p2)
	f.waitCounts(t, counts{2, 2})
	two := devicePod("u2", "two", nil, []int64{2})
	if err := f.m.Allocate(context.Background(), two, []*v1.Pod{one}); err == nil || !strings.Contains(err.Error(), "Available: 1") {
		t.Errorf("the restored device was given again: %v", err)
	}

	// Again, and no plugin registers within the grace period.
	p2.Stop()
	f.stop()
	f = startFixture(t, dir, nil)
	f.clock.Step(EndpointStopGracePeriod + time.Second)
	if _, _, removed := f.m.Capacity(); !slices.Equal(removed, []string{res}) {
		t.Errorf("removed after the grace period: %v", removed)
	}
}
