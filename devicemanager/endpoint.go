package devicemanager

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/crivk/crivk/internal/grpcready"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Constants of the kubelet's device manager.
const (
	// EndpointStopGracePeriod is how long a stopped plugin's resource keeps
	// its capacity before it is removed (the kubelet's
	// endpointStopGracePeriod).
	EndpointStopGracePeriod = 5 * time.Minute
	// dialTimeout is Config.DialTimeout's default (the kubelet's dial).
	dialTimeout = 10 * time.Second
	// preStartTimeout bounds PreStartContainer.
	preStartTimeout = pluginapi.KubeletPreStartContainerRPCTimeoutInSecs * time.Second
)

// endpoint is one registered plugin, serving one resource: its connection,
// its options and, once the plugin is gone, when it stopped.
//
//	listing ──ListAndWatch ends, or replaced, or Run ends──> stopped
//
// conn, api, opts and resource are set at creation and never change.
type endpoint struct {
	resource string
	socket   string
	conn     *grpc.ClientConn
	api      pluginapi.DevicePluginClient
	opts     *pluginapi.DevicePluginOptions

	mu       sync.Mutex
	stopTime time.Time // zero while listing; guarded by mu
}

// dial connects to the plugin's socket, waiting up to timeout for the
// connection to be ready (the kubelet dials with WithBlock).
func dial(ctx context.Context, socket string, timeout time.Duration) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("localhost"))
	if err != nil {
		return nil, fmt.Errorf("failed to dial device plugin: %v", err)
	}
	if err := grpcready.Wait(ctx, conn, timeout); err != nil {
		return nil, fmt.Errorf("failed to dial device plugin: %v", err)
	}
	return conn, nil
}

func (e *endpoint) String() string { return fmt.Sprintf("%s (%s)", e.resource, e.socket) }

// stopped reports whether the plugin is gone.
func (e *endpoint) stopped() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.stopTime.IsZero()
}

// stop records when the plugin went away (once) and closes the connection.
func (e *endpoint) stop(now time.Time) {
	e.mu.Lock()
	if e.stopTime.IsZero() {
		e.stopTime = now
	}
	e.mu.Unlock()
	if e.conn != nil {
		_ = e.conn.Close()
	}
}

// graceExpired reports whether the plugin stopped more than
// EndpointStopGracePeriod before now.
func (e *endpoint) graceExpired(now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.stopTime.IsZero() && now.Sub(e.stopTime) > EndpointStopGracePeriod
}

// errStopped is the kubelet's errEndpointStopped.
func (e *endpoint) errStopped() error { return fmt.Errorf("endpoint %v has been stopped", e) }

func (e *endpoint) allocate(ctx context.Context, devs []string) (*pluginapi.AllocateResponse, error) {
	if e.stopped() {
		return nil, e.errStopped()
	}
	return e.api.Allocate(ctx, &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: devs}},
	})
}

func (e *endpoint) preferredAllocation(ctx context.Context, available, mustInclude []string, size int) (*pluginapi.PreferredAllocationResponse, error) {
	if e.stopped() {
		return nil, e.errStopped()
	}
	return e.api.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
			AvailableDeviceIDs: available, MustIncludeDeviceIDs: mustInclude, AllocationSize: int32(size),
		}},
	})
}

func (e *endpoint) preStartContainer(ctx context.Context, devs []string) (*pluginapi.PreStartContainerResponse, error) {
	if e.stopped() {
		return nil, e.errStopped()
	}
	ctx, cancel := context.WithTimeout(ctx, preStartTimeout)
	defer cancel()
	return e.api.PreStartContainer(ctx, &pluginapi.PreStartContainerRequest{DevicesIds: devs})
}
