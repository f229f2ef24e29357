// Package deviceplugintest is a device plugin for tests, as net/http's
// httptest is a server for tests: it serves the device plugin API
// (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1) on a unix socket, registers
// on a node agent's kubelet.sock, advertises devices whose health the test
// changes, records every call, and fails the calls the test names (as the
// node e2e suite's testdeviceplugin). The unit tests of package
// devicemanager and the e2e tier's test plugin (test/e2e/deviceplugin) use
// it; crivk itself never does.
package deviceplugintest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// EnvDevices is the environment variable the default Allocate response
// sets: the allocated device IDs, sorted, comma-separated.
const EnvDevices = "DEVICEPLUGINTEST_DEVICES"

// Plugin is one device plugin. Set its fields before Start; afterwards use
// its methods only.
type Plugin struct {
	pluginapi.UnsafeDevicePluginServer

	// Dir is the device plugin directory (the agent's
	// <root-dir>/device-plugins); Endpoint the plugin's socket name in it.
	Dir, Endpoint string
	// Resource is the extended resource name registered.
	Resource string
	// Version is the API version registered (default v1beta1).
	Version string
	// Options are GetDevicePluginOptions' answer (nil: none set).
	Options *pluginapi.DevicePluginOptions
	// Fail, when set, is asked at each call (and at each update of a
	// ListAndWatch stream) with the method's name: an error fails it.
	Fail func(method string) error
	// Respond is Allocate's answer for one container's devices (default:
	// EnvDevices and the annotation "deviceplugintest/devices").
	Respond func(ids []string) *pluginapi.ContainerAllocateResponse

	mu      sync.Mutex
	devices []*pluginapi.Device // guarded by mu
	calls   []Call              // guarded by mu
	// changed is closed (and replaced) at each SetDevices; guarded by mu.
	changed chan struct{}
	srv     *grpc.Server
}

// Call is one call the plugin received, with the device IDs it named.
type Call struct {
	Method    string
	DeviceIDs []string
}

// New returns a plugin of resource on dir/endpoint with devices.
func New(dir, endpoint, resource string, devices ...*pluginapi.Device) *Plugin {
	return &Plugin{Dir: dir, Endpoint: endpoint, Resource: resource, devices: devices, changed: make(chan struct{})}
}

// Devices returns n healthy devices named prefix0 ... prefix<n-1>.
func Devices(prefix string, n int) []*pluginapi.Device {
	out := make([]*pluginapi.Device, n)
	for i := range out {
		out[i] = &pluginapi.Device{ID: fmt.Sprintf("%s%d", prefix, i), Health: pluginapi.Healthy}
	}
	return out
}

// Start serves the plugin's socket (an old socket of that name is
// removed first).
func (p *Plugin) Start() error {
	sock := filepath.Join(p.Dir, p.Endpoint)
	_ = os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	p.srv = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(p.srv, p)
	go func() { _ = p.srv.Serve(ln) }()
	return nil
}

// Register registers the plugin on <Dir>/kubelet.sock; the agent's error
// is returned as is.
func (p *Plugin) Register(ctx context.Context) error {
	conn, err := grpc.NewClient("unix://"+filepath.Join(p.Dir, "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	v := p.Version
	if v == "" {
		v = pluginapi.Version
	}
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: v, Endpoint: p.Endpoint, ResourceName: p.Resource, Options: p.Options,
	})
	return err
}

// Stop stops serving: every stream ends, the socket is removed.
func (p *Plugin) Stop() {
	if p.srv != nil {
		p.srv.Stop()
	}
}

// SetDevices replaces the devices; every ListAndWatch stream sends them.
func (p *Plugin) SetDevices(devices []*pluginapi.Device) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.devices = devices
	close(p.changed)
	p.changed = make(chan struct{})
}

// Calls are the calls received so far, in order.
func (p *Plugin) Calls() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

// Methods are the names of the calls received so far, in order.
func (p *Plugin) Methods() []string {
	var out []string
	for _, c := range p.Calls() {
		out = append(out, c.Method)
	}
	return out
}

func (p *Plugin) record(method string, ids []string) error {
	p.mu.Lock()
	p.calls = append(p.calls, Call{Method: method, DeviceIDs: ids})
	p.mu.Unlock()
	if p.Fail != nil {
		return p.Fail(method)
	}
	return nil
}

// GetDevicePluginOptions answers Options.
func (p *Plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	if err := p.record("GetDevicePluginOptions", nil); err != nil {
		return nil, err
	}
	if p.Options == nil {
		return &pluginapi.DevicePluginOptions{}, nil
	}
	return proto.Clone(p.Options).(*pluginapi.DevicePluginOptions), nil
}

// ListAndWatch sends the devices, then again at each SetDevices, until the
// stream or the plugin ends or Fail fails it.
func (p *Plugin) ListAndWatch(_ *pluginapi.Empty, stream pluginapi.DevicePlugin_ListAndWatchServer) error {
	if err := p.record("ListAndWatch", nil); err != nil {
		return err
	}
	for {
		p.mu.Lock()
		resp := &pluginapi.ListAndWatchResponse{}
		for _, d := range p.devices {
			resp.Devices = append(resp.Devices, &pluginapi.Device{ID: d.ID, Health: d.Health, Topology: d.Topology})
		}
		changed := p.changed
		p.mu.Unlock()
		if err := stream.Send(resp); err != nil {
			return err
		}
		select {
		case <-stream.Context().Done():
			return stream.Context().Err()
		case <-changed:
		}
		if p.Fail != nil {
			if err := p.Fail("ListAndWatch"); err != nil {
				return err
			}
		}
	}
}

// Allocate answers Respond for each container request.
func (p *Plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	var ids []string
	for _, c := range req.ContainerRequests {
		ids = append(ids, c.DevicesIds...)
	}
	if err := p.record("Allocate", ids); err != nil {
		return nil, err
	}
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		ids := slices.Clone(c.DevicesIds)
		sort.Strings(ids)
		if p.Respond != nil {
			resp.ContainerResponses = append(resp.ContainerResponses, p.Respond(ids))
			continue
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs:        map[string]string{EnvDevices: strings.Join(ids, ",")},
			Annotations: map[string]string{"deviceplugintest/devices": strings.Join(ids, ",")},
		})
	}
	return resp, nil
}

// GetPreferredAllocation prefers the must-include devices, then the
// available ones from the highest ID down.
func (p *Plugin) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	if err := p.record("GetPreferredAllocation", nil); err != nil {
		return nil, err
	}
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, c := range req.ContainerRequests {
		pick := slices.Clone(c.MustIncludeDeviceIDs)
		avail := slices.Clone(c.AvailableDeviceIDs)
		sort.Sort(sort.Reverse(sort.StringSlice(avail)))
		for _, id := range avail {
			if len(pick) >= int(c.AllocationSize) {
				break
			}
			if !slices.Contains(pick, id) {
				pick = append(pick, id)
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: pick})
	}
	return resp, nil
}

// PreStartContainer records the call.
func (p *Plugin) PreStartContainer(_ context.Context, req *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	ids := slices.Clone(req.DevicesIds)
	sort.Strings(ids)
	if err := p.record("PreStartContainer", ids); err != nil {
		return nil, err
	}
	return &pluginapi.PreStartContainerResponse{}, nil
}
