package pluginmanager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/crivk/crivk/internal/grpcready"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// The kubelet's timeouts of the registration calls
// (operationexecutor/operation_generator.go).
const (
	// dialTimeout is Config.DialTimeout's default.
	dialTimeout = 10 * time.Second
	// getInfoTimeout bounds GetInfo.
	getInfoTimeout = time.Second
	// notifyTimeout bounds NotifyRegistrationStatus.
	notifyTimeout = 5 * time.Second
)

// register registers the plugin of socket, of generation: the kubelet's
// GenerateRegisterPluginFunc (see the package documentation for the steps
// and the words). handlers is the handlers at the time the operation
// started.
func (m *Manager) register(ctx context.Context, socket string, generation uint64, handlers map[string]Handler) error {
	conn, err := dial(ctx, socket, m.cfg.DialTimeout)
	if err != nil {
		return fmt.Errorf("RegisterPlugin error -- dial failed at socket %s, err: %w", socket, err)
	}
	defer conn.Close()
	client := registerapi.NewRegistrationClient(conn)

	infoCtx, cancel := context.WithTimeout(ctx, getInfoTimeout)
	info, err := client.GetInfo(infoCtx, &registerapi.InfoRequest{})
	cancel()
	if err != nil {
		return fmt.Errorf("RegisterPlugin error -- failed to get plugin info using RPC GetInfo at socket %s, err: %w", socket, err)
	}

	handler, ok := handlers[info.Type]
	if !ok {
		msg := fmt.Sprintf("RegisterPlugin error -- no handler registered for plugin type: %s at socket %s", info.Type, socket)
		if err := notify(ctx, client, false, msg); err != nil {
			return fmt.Errorf("RegisterPlugin error -- failed to send error at socket %s, err: %w", socket, err)
		}
		return errors.New(msg)
	}

	endpoint := info.Endpoint
	if endpoint == "" {
		endpoint = socket
	}
	if err := handler.ValidatePlugin(ctx, info.Name, endpoint, info.SupportedVersions); err != nil {
		if err := notify(ctx, client, false, fmt.Sprintf("RegisterPlugin error -- plugin validation failed with err: %v", err)); err != nil {
			return fmt.Errorf("RegisterPlugin error -- failed to send error at socket %s, err: %w", socket, err)
		}
		return fmt.Errorf("RegisterPlugin error -- pluginHandler.ValidatePluginFunc failed")
	}
	// In the actual state before RegisterPlugin: a removal seen meanwhile
	// is planned as a deregistration, which waits for this operation.
	m.actual.add(registration{socket: socket, generation: generation, pluginType: info.Type, handler: handler, name: info.Name, endpoint: endpoint})
	if err := handler.RegisterPlugin(ctx, info.Name, endpoint, info.SupportedVersions); err != nil {
		m.actual.remove(socket)
		return notify(ctx, client, false, fmt.Sprintf("RegisterPlugin error -- plugin registration failed with err: %v", err))
	}
	// Notified after RegisterPlugin, so that RegisterPlugin always follows
	// ValidatePlugin even when the notification fails.
	if err := notify(ctx, client, true, ""); err != nil {
		m.actual.remove(socket)
		handler.DeRegisterPlugin(ctx, info.Name, endpoint)
		return fmt.Errorf("RegisterPlugin error -- failed to send registration status at socket %s, err: %w", socket, err)
	}
	log.G(ctx).WithField("type", info.Type).WithField("plugin", info.Name).WithField("endpoint", endpoint).WithField("socket", socket).Info("plugin registered")
	return nil
}

// deregister undoes r (the kubelet's GenerateUnregisterPluginFunc): out
// of the actual state first, so that a socket created meanwhile is
// planned for registration, then the handler's DeRegisterPlugin.
func (m *Manager) deregister(ctx context.Context, r registration) {
	m.actual.remove(r.socket)
	r.handler.DeRegisterPlugin(ctx, r.name, r.endpoint)
	log.G(ctx).WithField("type", r.pluginType).WithField("plugin", r.name).WithField("endpoint", r.endpoint).WithField("socket", r.socket).Info("plugin deregistered")
}

// notify sends the registration status to the plugin (5s). It returns
// errStr as an error when it is not empty, and the call's error prefixed
// with errStr when the call fails: the kubelet's notifyPlugin.
func notify(ctx context.Context, client registerapi.RegistrationClient, registered bool, errStr string) error {
	ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	if _, err := client.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: registered, Error: errStr}); err != nil {
		return fmt.Errorf("%s: %w", errStr, err)
	}
	if errStr != "" {
		return errors.New(errStr)
	}
	return nil
}

// dial connects to the registration socket, waiting up to timeout for the
// connection to be ready (the kubelet dials with WithBlock). The socket
// is dialled as a path, whatever it looks like; the authority is
// "localhost", as the kubelet's CSI client sends (a path is no valid one).
func dial(ctx context.Context, socket string, timeout time.Duration) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient("passthrough:///"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("localhost"),
		// The creation event comes at the socket's bind, maybe before its
		// listen: a refused first try is retried after 0.1s, not gRPC's
		// default 1s.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}}),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}))
	if err != nil {
		return nil, fmt.Errorf("failed to dial socket %s, err: %w", socket, err)
	}
	if err := grpcready.Wait(ctx, conn, timeout); err != nil {
		return nil, fmt.Errorf("failed to dial socket %s, err: %w", socket, err)
	}
	return conn, nil
}
