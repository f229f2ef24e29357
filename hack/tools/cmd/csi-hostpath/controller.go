package main

import (
	"context"
	"os"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// controller is the CSI Controller service: volumes are directories under
// DIR/volumes, recorded in the store.
type controller struct {
	csi.UnimplementedControllerServer
	d *driver
}

func (c *controller) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	rpc := func(t csi.ControllerServiceCapability_RPC_Type) *csi.ControllerServiceCapability {
		return &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}}
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{
		rpc(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME),
		rpc(csi.ControllerServiceCapability_RPC_EXPAND_VOLUME),
	}}, nil
}

// CreateVolume is idempotent by name: the id is volumeID(name), and a
// second call for a volume that exists answers it again when its capacity
// fits the range asked for (AlreadyExists otherwise, as the spec says).
func (c *controller) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (_ *csi.CreateVolumeResponse, retErr error) {
	name := req.GetName()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "name missing")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: volume_capabilities missing", name)
	}
	for _, vc := range req.GetVolumeCapabilities() {
		if err := checkCapability(vc); err != nil {
			return nil, err
		}
	}
	if req.GetVolumeContentSource() != nil {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: volume_content_source: snapshots and clones are not implemented", name)
	}
	if !c.reachable(req.GetAccessibilityRequirements()) {
		return nil, status.Errorf(codes.ResourceExhausted, "volume %s: requisite topology does not include %s=%s", name, topologyKey, c.d.nodeID)
	}
	required, limit := req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes()
	if required < 0 || limit < 0 || (limit > 0 && required > limit) {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: capacity_range required %d, limit %d", name, required, limit)
	}

	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	id := volumeID(name)
	dir := filepath.Join(c.d.volumesDir, id)
	if v, ok := c.d.store.get(id); ok {
		if v.CapacityBytes < required || (limit > 0 && v.CapacityBytes > limit) {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s (id %s) exists with capacity %d", name, id, v.CapacityBytes)
		}
		if err := makeVolumeDir(dir); err != nil {
			return nil, status.Errorf(codes.Internal, "volume %s (id %s): %v", name, id, err)
		}
		return c.response(v), nil
	}

	if err := makeVolumeDir(dir); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s (id %s): %v", name, id, err)
	}
	defer func() {
		if retErr != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	v := volume{Name: name, ID: id, CapacityBytes: required}
	if err := c.d.store.put(v); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s (id %s): %v", name, id, err)
	}
	return c.response(v), nil
}

func (c *controller) response(v volume) *csi.CreateVolumeResponse {
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId:           v.ID,
		CapacityBytes:      v.CapacityBytes,
		AccessibleTopology: c.d.topology(),
	}}
}

// reachable says whether the requisite topology, when there is one, holds
// this node's segment.
func (c *controller) reachable(req *csi.TopologyRequirement) bool {
	if len(req.GetRequisite()) == 0 {
		return true
	}
	for _, t := range req.GetRequisite() {
		if t.GetSegments()[topologyKey] == c.d.nodeID {
			return true
		}
	}
	return false
}

// DeleteVolume removes the volume's directory and record; a volume that is
// not there is deleted already.
func (c *controller) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	id := req.GetVolumeId()
	if err := needID(id); err != nil {
		return nil, err
	}
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	if err := os.RemoveAll(filepath.Join(c.d.volumesDir, id)); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: %v", id, err)
	}
	if err := c.d.store.remove(id); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: %v", id, err)
	}
	return &csi.DeleteVolumeResponse{}, nil
}

// ControllerExpandVolume records the larger capacity (it never shrinks) and
// leaves the rest to NodeExpandVolume.
func (c *controller) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	id := req.GetVolumeId()
	if err := needID(id); err != nil {
		return nil, err
	}
	if req.GetCapacityRange() == nil {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: capacity_range missing", id)
	}
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	v, err := c.d.expand(id, req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: v.CapacityBytes, NodeExpansionRequired: true}, nil
}

// expand raises the recorded capacity of volume id to the range's required
// bytes. The caller holds d.mu.
func (d *driver) expand(id string, r *csi.CapacityRange) (volume, error) {
	v, ok := d.store.get(id)
	if !ok {
		return volume{}, status.Errorf(codes.NotFound, "volume %s: no such volume", id)
	}
	if limit := r.GetLimitBytes(); limit > 0 && r.GetRequiredBytes() > limit {
		return volume{}, status.Errorf(codes.InvalidArgument, "volume %s: capacity_range required %d, limit %d", id, r.GetRequiredBytes(), limit)
	}
	if r.GetRequiredBytes() <= v.CapacityBytes {
		return v, nil
	}
	v.CapacityBytes = r.GetRequiredBytes()
	if err := d.store.put(v); err != nil {
		return volume{}, status.Errorf(codes.Internal, "volume %s: %v", id, err)
	}
	return v, nil
}

func (c *controller) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	id := req.GetVolumeId()
	if err := needID(id); err != nil {
		return nil, err
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: volume_capabilities missing", id)
	}
	if _, ok := c.d.store.get(id); !ok {
		return nil, status.Errorf(codes.NotFound, "volume %s: no such volume", id)
	}
	for _, vc := range req.GetVolumeCapabilities() {
		if err := checkCapability(vc); err != nil {
			return &csi.ValidateVolumeCapabilitiesResponse{Message: status.Convert(err).Message()}, nil
		}
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}}, nil
}

// makeVolumeDir makes a volume's directory writable by every user, as
// csi-driver-host-path does: the pod's user is not known here, and the
// kubelet applies fsGroup itself.
func makeVolumeDir(dir string) error {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	return os.Chmod(dir, 0o777)
}
