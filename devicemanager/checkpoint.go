package devicemanager

import (
	"context"
	"path/filepath"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/devicemanager/checkpoint"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// noTopology is the NUMA node of devices without topology in the
// checkpoint (the kubelet's nodeWithoutTopology); crivk records every
// device there.
const noTopology = -1

func (m *Manager) checkpointPath() string { return filepath.Join(m.cfg.Dir, CheckpointName) }

// writeCheckpoint writes the allocations and the healthy devices of each
// resource (the kubelet's writeCheckpoint); a failure is logged.
func (m *Manager) writeCheckpoint() {
	m.cpMu.Lock()
	defer m.cpMu.Unlock()
	var entries []checkpoint.PodDevicesEntry
	registered := map[string][]string{}
	m.mu.Lock()
	for uid, containers := range m.pods {
		for c, resources := range containers {
			for r, cd := range resources {
				resp, err := proto.Marshal(cd.resp)
				if err != nil {
					log.L.WithError(err).WithField("pod", uid).Warn("device checkpoint: the allocation response")
					continue
				}
				entries = append(entries, checkpoint.PodDevicesEntry{PodUID: string(uid), ContainerName: c, ResourceName: r,
					DeviceIDs: checkpoint.DevicesPerNUMA{noTopology: sets.List(cd.ids)}, AllocResp: resp})
			}
		}
	}
	for r, h := range m.healthy {
		registered[r] = sets.List(h)
	}
	m.mu.Unlock()
	if err := checkpoint.Write(m.checkpointPath(), entries, registered); err != nil {
		log.L.WithError(err).Error("writing the device manager checkpoint")
	}
}

// readCheckpoint restores the allocations, and each registered resource
// as a stopped endpoint with no device (capacity 0 until its plugin
// registers again, removed after the grace period otherwise), as the
// kubelet's readCheckpoint.
func (m *Manager) readCheckpoint() error {
	entries, registered, err := checkpoint.Read(m.checkpointPath())
	if err != nil {
		return err
	}
	now := m.cfg.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range entries {
		resp := &pluginapi.ContainerAllocateResponse{}
		if err := proto.Unmarshal(e.AllocResp, resp); err != nil {
			log.L.WithError(err).WithField("pod", e.PodUID).Warn("device checkpoint: an unreadable allocation response")
			continue
		}
		ids := sets.New[string]()
		for _, devs := range e.DeviceIDs {
			ids.Insert(devs...)
		}
		uid := types.UID(e.PodUID)
		if m.pods[uid] == nil {
			m.pods[uid] = map[string]map[string]*containerDevices{}
		}
		if m.pods[uid][e.ContainerName] == nil {
			m.pods[uid][e.ContainerName] = map[string]*containerDevices{}
		}
		m.pods[uid][e.ContainerName][e.ResourceName] = &containerDevices{ids: ids, resp: resp}
	}
	for r := range registered {
		m.healthy[r], m.unhealthy[r] = sets.New[string](), sets.New[string]()
		m.endpoints[r] = &endpoint{resource: r, stopTime: now}
	}
	return nil
}

// runningContainers are the running containers of rt by pod UID (none
// when rt is nil or cannot list).
func runningContainers(ctx context.Context, rt ContainerLister) map[types.UID]sets.Set[string] {
	out := map[types.UID]sets.Set[string]{}
	if rt == nil {
		return out
	}
	cs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		log.G(ctx).WithError(err).Warn("listing the running containers; none is taken as running")
		return out
	}
	for _, c := range cs {
		uid, name := types.UID(c.Labels[cri.LabelPodUID]), c.Labels[cri.LabelContainerName]
		if uid == "" || name == "" {
			continue
		}
		if out[uid] == nil {
			out[uid] = sets.New[string]()
		}
		out[uid].Insert(name)
	}
	return out
}
