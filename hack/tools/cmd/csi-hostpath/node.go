package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// node is the CSI Node service. A volume's way onto a pod:
//
//	DIR/volumes/<id> --NodeStageVolume--> staging path --NodePublishVolume--> target path
//	DIR/ephemeral/<id> ----------------NodePublishVolume (ephemeral)-------> target path
//
// each arrow a bind mount, undone by NodeUnpublishVolume and
// NodeUnstageVolume in the reverse order.
type node struct {
	csi.UnimplementedNodeServer
	d *driver
}

func (n *node) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{
		NodeId:             n.d.nodeID,
		MaxVolumesPerNode:  n.d.maxVolumes,
		AccessibleTopology: n.d.topology()[0],
	}, nil
}

func (n *node) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	rpc := func(t csi.NodeServiceCapability_RPC_Type) *csi.NodeServiceCapability {
		return &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}}}
	}
	// Not VOLUME_MOUNT_GROUP: without it the kubelet applies fsGroup itself.
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{
		rpc(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME),
		rpc(csi.NodeServiceCapability_RPC_GET_VOLUME_STATS),
		rpc(csi.NodeServiceCapability_RPC_EXPAND_VOLUME),
	}}, nil
}

func (n *node) NodeStageVolume(_ context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	id, staging := req.GetVolumeId(), req.GetStagingTargetPath()
	if err := needID(id); err != nil {
		return nil, err
	}
	if staging == "" {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: staging_target_path missing", id)
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	n.d.mu.Lock()
	defer n.d.mu.Unlock()
	if _, ok := n.d.store.get(id); !ok {
		return nil, status.Errorf(codes.NotFound, "volume %s: no such volume", id)
	}
	mounted, _, err := mountState(staging)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: %v", id, err)
	}
	if mounted {
		return &csi.NodeStageVolumeResponse{}, nil
	}
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: staging path: %v", id, err)
	}
	if err := bindMount(filepath.Join(n.d.volumesDir, id), staging, false); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: %v", id, err)
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

// NodeUnstageVolume unmounts the staging path and leaves the directory: the
// kubelet made the directory's parent and removes it.
func (n *node) NodeUnstageVolume(_ context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	id, staging := req.GetVolumeId(), req.GetStagingTargetPath()
	if err := needID(id); err != nil {
		return nil, err
	}
	if staging == "" {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: staging_target_path missing", id)
	}
	n.d.mu.Lock()
	defer n.d.mu.Unlock()
	if err := unmountAll(staging); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: %v", id, err)
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

func (n *node) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	id, target, staging := req.GetVolumeId(), req.GetTargetPath(), req.GetStagingTargetPath()
	if err := needID(id); err != nil {
		return nil, err
	}
	if target == "" {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: target_path missing", id)
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	ephemeral := req.GetVolumeContext()[ephemeralKey] == "true"
	if !ephemeral && staging == "" {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: staging_target_path missing (STAGE_UNSTAGE_VOLUME is advertised)", id)
	}

	n.d.mu.Lock()
	defer n.d.mu.Unlock()
	mounted, readOnly, err := mountState(target)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: %v", id, err)
	}
	if mounted {
		if readOnly != req.GetReadonly() {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s: %s is published with readonly=%t", id, target, readOnly)
		}
		return &csi.NodePublishVolumeResponse{}, nil
	}

	var src string
	if ephemeral {
		src = filepath.Join(n.d.ephDir, id)
		if err := makeVolumeDir(src); err != nil {
			return nil, status.Errorf(codes.Internal, "ephemeral volume %s: %v", id, err)
		}
	} else {
		if _, ok := n.d.store.get(id); !ok {
			return nil, status.Errorf(codes.NotFound, "volume %s: no such volume", id)
		}
		staged, _, err := mountState(staging)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "volume %s: %v", id, err)
		}
		if !staged {
			return nil, status.Errorf(codes.FailedPrecondition, "volume %s: not staged at %s", id, staging)
		}
		src = staging
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: target path: %v", id, err)
	}
	if err := bindMount(src, target, req.GetReadonly()); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: %v", id, err)
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume unmounts and removes the target path, and an
// ephemeral volume's data with it.
func (n *node) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	id, target := req.GetVolumeId(), req.GetTargetPath()
	if err := needID(id); err != nil {
		return nil, err
	}
	if target == "" {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: target_path missing", id)
	}
	n.d.mu.Lock()
	defer n.d.mu.Unlock()
	if err := unmountAll(target); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: %v", id, err)
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "volume %s: %v", id, err)
	}
	if err := os.RemoveAll(filepath.Join(n.d.ephDir, id)); err != nil {
		return nil, status.Errorf(codes.Internal, "ephemeral volume %s: %v", id, err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeGetVolumeStats reports the file system under volume_path: every
// volume shares the state dir's, whatever capacity it was given.
func (n *node) NodeGetVolumeStats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	id, path := req.GetVolumeId(), req.GetVolumePath()
	if err := needID(id); err != nil {
		return nil, err
	}
	if path == "" {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: volume_path missing", id)
	}
	if _, ok := n.d.store.get(id); !ok {
		if _, err := os.Stat(filepath.Join(n.d.ephDir, id)); err != nil {
			return nil, status.Errorf(codes.NotFound, "volume %s: no such volume", id)
		}
	}
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, status.Errorf(codes.NotFound, "volume %s: %s: %v", id, path, err)
		}
		return nil, status.Errorf(codes.Internal, "volume %s: statfs %s: %v", id, path, err)
	}
	bsize := st.Bsize
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{
			Unit:      csi.VolumeUsage_BYTES,
			Total:     int64(st.Blocks) * bsize,
			Available: int64(st.Bavail) * bsize,
			Used:      int64(st.Blocks-st.Bfree) * bsize,
		},
		{
			Unit:      csi.VolumeUsage_INODES,
			Total:     int64(st.Files),
			Available: int64(st.Ffree),
			Used:      int64(st.Files - st.Ffree),
		},
	}}, nil
}

// NodeExpandVolume records the capacity asked for, as the controller does;
// nothing on the node changes size.
func (n *node) NodeExpandVolume(_ context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	id := req.GetVolumeId()
	if err := needID(id); err != nil {
		return nil, err
	}
	if req.GetVolumePath() == "" {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: volume_path missing", id)
	}
	n.d.mu.Lock()
	defer n.d.mu.Unlock()
	v, err := n.d.expand(id, req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: v.CapacityBytes}, nil
}
