package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const (
	vendorVersion = "0.1.0-crivk-test"
	// topologyKey is the one topology segment key: a volume is reachable on
	// the node whose driver made it.
	topologyKey = "topology.hostpath.csi.crivk.io/node"
	// ephemeralKey is the volume_context key the kubelet sets for a CSI
	// inline ephemeral volume.
	ephemeralKey = "csi.storage.k8s.io/ephemeral"
)

// driverConfig is the driver subcommand's command line.
type driverConfig struct {
	Endpoint          string // unix:///path/csi.sock
	NodeID            string
	StateDir          string
	DriverName        string
	MaxVolumesPerNode int64
	CallLog           string // a file, or "" for none
}

// validate fills the defaults and rejects what cannot work.
func (c *driverConfig) validate() error {
	if c.DriverName == "" {
		c.DriverName = "hostpath.csi.crivk.io"
	}
	switch {
	case c.NodeID == "":
		return errors.New("--nodeid is required")
	case c.StateDir == "":
		return errors.New("--state-dir is required")
	case c.MaxVolumesPerNode < 0:
		return fmt.Errorf("--max-volumes-per-node %d: must not be negative", c.MaxVolumesPerNode)
	}
	_, err := socketPath(c.Endpoint)
	return err
}

// driver is what the three CSI services share.
type driver struct {
	name       string
	nodeID     string
	maxVolumes int64
	volumesDir string // DIR/volumes
	ephDir     string // DIR/ephemeral
	store      *store

	// mu serializes every call that changes the store, a directory or a
	// mount, so that each one's check-then-act (is it there? is it
	// mounted?) holds until it has acted.
	mu sync.Mutex
}

func newDriver(cfg driverConfig) (*driver, error) {
	d := &driver{
		name:       cfg.DriverName,
		nodeID:     cfg.NodeID,
		maxVolumes: cfg.MaxVolumesPerNode,
		volumesDir: filepath.Join(cfg.StateDir, "volumes"),
		ephDir:     filepath.Join(cfg.StateDir, "ephemeral"),
	}
	for _, dir := range []string{d.volumesDir, d.ephDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("state dir: %w", err)
		}
	}
	s, err := loadStore(filepath.Join(cfg.StateDir, "state.json"))
	if err != nil {
		return nil, err
	}
	d.store = s
	return d, nil
}

func (d *driver) topology() []*csi.Topology {
	return []*csi.Topology{{Segments: map[string]string{topologyKey: d.nodeID}}}
}

// register puts the driver's three services on srv.
func (d *driver) register(srv *grpc.Server) {
	csi.RegisterIdentityServer(srv, &identity{d: d})
	csi.RegisterControllerServer(srv, &controller{d: d})
	csi.RegisterNodeServer(srv, &node{d: d})
}

// runDriver serves the driver on cfg.Endpoint until ctx is done, then stops
// and removes the socket.
func runDriver(ctx context.Context, cfg driverConfig, stderr io.Writer) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	d, err := newDriver(cfg)
	if err != nil {
		return err
	}
	log := &callLog{stderr: stderr, now: time.Now}
	if cfg.CallLog != "" {
		f, err := os.OpenFile(cfg.CallLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("call log: %w", err)
		}
		defer f.Close()
		log.file = f
	}
	sock, _ := socketPath(cfg.Endpoint) // validated
	srv := grpc.NewServer(grpc.UnaryInterceptor(log.interceptor))
	d.register(srv)
	fmt.Fprintf(stderr, "csi-hostpath: driver %s %s on node %s serving %s\n", d.name, vendorVersion, d.nodeID, sock)
	return serveUnix(ctx, srv, sock)
}

// serveUnix serves srv on a unix socket at path (a stale socket file there
// is removed first) until ctx is done or serving fails, and removes the
// socket either way.
func serveUnix(ctx context.Context, srv *grpc.Server, path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("socket dir: %w", err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	select {
	case <-ctx.Done():
		// Let calls under way answer (a registrar's NotifyRegistrationStatus
		// among them), but not for long.
		stopped := make(chan struct{})
		go func() { srv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(5 * time.Second):
			srv.Stop()
		}
		<-served
		err = nil
	case err = <-served:
		err = fmt.Errorf("serve %s: %w", path, err)
	}
	if rmErr := os.Remove(path); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
		err = errors.Join(err, fmt.Errorf("remove socket: %w", rmErr))
	}
	return err
}

// socketPath is the file of a unix endpoint: unix:///path, or an absolute
// path alone (node-driver-registrar's --csi-address form).
func socketPath(endpoint string) (string, error) {
	p := strings.TrimPrefix(endpoint, "unix://")
	if p == "" || !filepath.IsAbs(p) {
		return "", fmt.Errorf("endpoint %q: want unix:///absolute/path or /absolute/path", endpoint)
	}
	return p, nil
}

// identity is the CSI Identity service.
type identity struct {
	csi.UnimplementedIdentityServer
	d *driver
}

func (i *identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: i.d.name, VendorVersion: vendorVersion}, nil
}

func (i *identity) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	service := func(t csi.PluginCapability_Service_Type) *csi.PluginCapability {
		return &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}}
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{
		service(csi.PluginCapability_Service_CONTROLLER_SERVICE),
		service(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS),
		{Type: &csi.PluginCapability_VolumeExpansion_{VolumeExpansion: &csi.PluginCapability_VolumeExpansion{
			Type: csi.PluginCapability_VolumeExpansion_ONLINE}}},
	}}, nil
}

func (i *identity) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

// validID says whether id can name a directory under the state dir: the
// driver's own ids are hex, the kubelet's ephemeral ones "csi-<hex>".
func validID(id string) bool {
	return id != "" && id != "." && id != ".." && len(id) <= 128 && !strings.ContainsAny(id, "/\x00")
}

// needID checks the volume id every call carries.
func needID(id string) error {
	if id == "" {
		return status.Error(codes.InvalidArgument, "volume_id missing")
	}
	if !validID(id) {
		return status.Errorf(codes.InvalidArgument, "volume_id %q: malformed", id)
	}
	return nil
}

// checkCapability accepts what the driver implements: a mount volume on
// one node, without volume_mount_group.
func checkCapability(c *csi.VolumeCapability) error {
	if c == nil {
		return status.Error(codes.InvalidArgument, "volume_capability missing")
	}
	if c.GetBlock() != nil {
		return status.Error(codes.InvalidArgument, "block volumes are not implemented: filesystem (mount) only")
	}
	if c.GetMount() == nil {
		return status.Error(codes.InvalidArgument, "volume_capability: access_type missing")
	}
	if g := c.GetMount().GetVolumeMountGroup(); g != "" {
		return status.Errorf(codes.InvalidArgument, "volume_mount_group %q: VOLUME_MOUNT_GROUP is not advertised", g)
	}
	switch m := c.GetAccessMode().GetMode(); m {
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER:
		return nil
	default:
		return status.Errorf(codes.InvalidArgument, "access mode %v: single-node modes only", m)
	}
}
