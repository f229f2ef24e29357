// Package csitest is a CSI driver's Node service for tests: NodeGetInfo
// on a unix socket, answering what it is given and counting the calls.
// Tests only.
package csitest

import (
	"context"
	"net"
	"os"
	"sync"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Node serves a CSI Node service with NodeGetInfo only.
type Node struct {
	csipb.UnimplementedNodeServer

	socket string
	srv    *grpc.Server

	mu sync.Mutex
	// info and err are NodeGetInfo's answer; calls counts the calls.
	// Guarded by mu.
	info  *csipb.NodeGetInfoResponse
	err   error
	calls int
}

// Start serves info on socket (created; its directory must exist).
func Start(socket string, info *csipb.NodeGetInfoResponse) (*Node, error) {
	l, err := net.Listen("unix", socket)
	if err != nil {
		return nil, err
	}
	n := &Node{socket: socket, srv: grpc.NewServer(), info: info}
	csipb.RegisterNodeServer(n.srv, n)
	go func() { _ = n.srv.Serve(l) }()
	return n, nil
}

// Stop stops serving and removes the socket.
func (n *Node) Stop() {
	n.srv.Stop()
	_ = os.Remove(n.socket)
}

// Endpoint is the socket's path, the driver's CSI endpoint.
func (n *Node) Endpoint() string { return n.socket }

// Set changes NodeGetInfo's answer: err non-nil fails the calls.
func (n *Node) Set(info *csipb.NodeGetInfoResponse, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.info, n.err = info, err
}

// Calls is how many times NodeGetInfo was called.
func (n *Node) Calls() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.calls
}

// NodeGetInfo implements csipb.NodeServer.
func (n *Node) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls++
	if n.err != nil {
		return nil, n.err
	}
	return proto.Clone(n.info).(*csipb.NodeGetInfoResponse), nil
}
