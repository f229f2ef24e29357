// Package grpcready waits for a gRPC client connection to a node-local
// plugin socket to be ready, as the kubelet's dials with WithBlock do
// (device plugins, plugin registration). A leaf: it imports nothing of
// crivk.
package grpcready

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
)

// Wait connects conn and waits up to timeout (or ctx's end) for it to be
// Ready. On failure it closes conn and returns the context's error; the
// caller words it.
func Wait(ctx context.Context, conn *grpc.ClientConn, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn.Connect()
	for {
		s := conn.GetState()
		if s == connectivity.Ready {
			return nil
		}
		if !conn.WaitForStateChange(ctx, s) {
			_ = conn.Close()
			return ctx.Err()
		}
	}
}
