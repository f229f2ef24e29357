// Package checkpoint reads and writes the device manager's checkpoint,
// device-plugins/kubelet_internal_checkpoint, in the kubelet's format
// (pkg/kubelet/cm/devicemanager/checkpoint, v2): the devices allocated to
// each container with the plugin's AllocateResponse, and the healthy
// devices of each registered resource, as JSON with the kubelet's checksum
// (FNV-32a of the data dumped for hashing). A checkpoint the kubelet wrote
// is read by crivk and the other way round: the package and type names
// below are part of the checksum and must not change.
package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"

	"github.com/crivk/crivk/internal/atomicfile"
	"k8s.io/apimachinery/pkg/util/dump"
)

// ErrCorrupt is returned by Read for a checkpoint whose checksum does not
// match its data.
var ErrCorrupt = errors.New("checkpoint is corrupted")

// DevicesPerNUMA are a container's device IDs of one resource by NUMA node
// (-1: devices without topology).
type DevicesPerNUMA map[int64][]string

// PodDevicesEntry is one container's devices of one resource.
type PodDevicesEntry struct {
	PodUID        string
	ContainerName string
	ResourceName  string
	DeviceIDs     DevicesPerNUMA
	// AllocResp is the plugin's ContainerAllocateResponse, protobuf.
	AllocResp []byte
}

// checkpointData is the checksummed part; its name is the kubelet's.
type checkpointData struct {
	PodDeviceEntries  []PodDevicesEntry
	RegisteredDevices map[string][]string
}

type data struct {
	Data     checkpointData
	Checksum uint64
}

func checksum(d checkpointData) uint64 {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(d))
	return uint64(h.Sum32())
}

// Marshal is the checkpoint of entries and registered (the healthy device
// IDs of each registered resource).
func Marshal(entries []PodDevicesEntry, registered map[string][]string) ([]byte, error) {
	d := checkpointData{PodDeviceEntries: entries, RegisteredDevices: registered}
	return json.Marshal(data{Data: d, Checksum: checksum(d)})
}

// Unmarshal reads a checkpoint, checking its checksum (ErrCorrupt).
func Unmarshal(b []byte) ([]PodDevicesEntry, map[string][]string, error) {
	var d data
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, nil, err
	}
	if sum := checksum(d.Data); sum != d.Checksum {
		return nil, nil, fmt.Errorf("%w: checksum %d, the data's %d", ErrCorrupt, d.Checksum, sum)
	}
	return d.Data.PodDeviceEntries, d.Data.RegisteredDevices, nil
}

// Write writes the checkpoint to path atomically (a temporary file
// renamed over it).
func Write(path string, entries []PodDevicesEntry, registered map[string][]string) error {
	b, err := Marshal(entries, registered)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, b)
}

// Read reads the checkpoint at path; a missing file is os.ErrNotExist.
func Read(path string) ([]PodDevicesEntry, map[string][]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return Unmarshal(b)
}
