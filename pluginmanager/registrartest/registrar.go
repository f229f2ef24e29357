// Package registrartest is a plugin's side of the registration protocol
// for tests: a Registration server on a unix socket, as the CSI
// node-driver-registrar and the DRA kubeletplugin helper serve it. It
// answers GetInfo with the info it is given and records every
// NotifyRegistrationStatus. Tests only.
package registrartest

import (
	"context"
	"net"
	"os"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Registrar serves one registration socket.
type Registrar struct {
	registerapi.UnimplementedRegistrationServer

	socket string
	info   *registerapi.PluginInfo
	srv    *grpc.Server

	mu sync.Mutex
	// infoCalls counts GetInfo calls; statuses are the statuses received,
	// in order; notifyErr fails NotifyRegistrationStatus. Guarded by mu.
	infoCalls int
	statuses  []*registerapi.RegistrationStatus
	notifyErr error
}

// Start serves info on socket (created; its directory must exist).
func Start(socket string, info *registerapi.PluginInfo) (*Registrar, error) {
	l, err := net.Listen("unix", socket)
	if err != nil {
		return nil, err
	}
	r := &Registrar{socket: socket, info: info, srv: grpc.NewServer()}
	registerapi.RegisterRegistrationServer(r.srv, r)
	go func() { _ = r.srv.Serve(l) }()
	return r, nil
}

// Stop stops serving and removes the socket, as a registrar that exits.
func (r *Registrar) Stop() {
	r.srv.Stop()
	_ = os.Remove(r.socket)
}

// Socket is the registration socket's path.
func (r *Registrar) Socket() string { return r.socket }

// GetInfo implements registerapi.RegistrationServer.
func (r *Registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.infoCalls++
	return proto.Clone(r.info).(*registerapi.PluginInfo), nil
}

// NotifyRegistrationStatus implements registerapi.RegistrationServer.
func (r *Registrar) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.statuses = append(r.statuses, proto.Clone(s).(*registerapi.RegistrationStatus))
	if r.notifyErr != nil {
		return nil, r.notifyErr
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// FailNotify makes NotifyRegistrationStatus record the status and answer
// err (nil: answer again).
func (r *Registrar) FailNotify(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notifyErr = err
}

// InfoCalls is how many times GetInfo was called.
func (r *Registrar) InfoCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.infoCalls
}

// Statuses are the statuses received, in order.
func (r *Registrar) Statuses() []*registerapi.RegistrationStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*registerapi.RegistrationStatus(nil), r.statuses...)
}

// Last is the last status received, nil before the first.
func (r *Registrar) Last() *registerapi.RegistrationStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.statuses) == 0 {
		return nil
	}
	return r.statuses[len(r.statuses)-1]
}
