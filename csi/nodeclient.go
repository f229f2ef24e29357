package csi

import (
	"context"
	"net"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// dialNode connects to a driver's CSI endpoint as the kubelet's
// newGrpcConn: the endpoint is a unix socket's path, dialled as it is,
// with the authority "localhost"; the connection is made at the first
// call.
func dialNode(endpoint string) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///"+endpoint,
		grpc.WithAuthority("localhost"),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}))
}

// nodeGetInfo calls the driver's NodeGetInfo (the kubelet's
// csiDriverClient.NodeGetInfo).
func nodeGetInfo(ctx context.Context, endpoint string) (nodeID string, maxVolumesPerNode int64, topology map[string]string, err error) {
	conn, err := dialNode(endpoint)
	if err != nil {
		return "", 0, nil, err
	}
	defer conn.Close()
	res, err := csipb.NewNodeClient(conn).NodeGetInfo(ctx, &csipb.NodeGetInfoRequest{})
	if err != nil {
		return "", 0, nil, err
	}
	if t := res.GetAccessibleTopology(); t != nil {
		topology = t.Segments
	}
	return res.GetNodeId(), res.GetMaxVolumesPerNode(), topology, nil
}
