package allocation

import (
	"encoding/json"
	"fmt"
	"hash/fnv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/dump"
)

// The checkpoint file is the kubelet's own (pkg/kubelet/allocation/state):
// {"data": "<JSON of podResourceCheckpointInfo>", "checksum": N}, where N
// is the kubelet's checkpoint checksum of the data string (FNV-32a of its
// dump.ForHash rendering). A kubelet can read what crivk writes and crivk
// what a kubelet wrote, so a root directory handed from one agent to the
// other (the node e2e suite runs both under /var/lib/kubelet) keeps its
// allocations. The field names below are part of the format.

// podResourceCheckpointInfo is the kubelet's PodResourceCheckpointInfo.
type podResourceCheckpointInfo struct {
	Entries map[types.UID]podResourceInfo `json:"entries,omitempty"`
}

// podResourceInfo is the kubelet's PodResourceInfo (no JSON tags there).
type podResourceInfo struct {
	ContainerResources map[string]v1.ResourceRequirements
	PodLevelResources  *v1.ResourceRequirements
}

type checkpointFile struct {
	Data     string `json:"data"`
	Checksum uint64 `json:"checksum"`
}

// checksum is the kubelet's checksum.New of a checkpoint's data string.
func checksum(data string) uint64 {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(data))
	return uint64(h.Sum32())
}

// marshalCheckpoint encodes allocations in the kubelet's format.
func marshalCheckpoint(allocated map[types.UID]PodAllocation) ([]byte, error) {
	info := podResourceCheckpointInfo{Entries: make(map[types.UID]podResourceInfo, len(allocated))}
	for uid, a := range allocated {
		info.Entries[uid] = podResourceInfo{ContainerResources: a.Containers, PodLevelResources: a.Pod}
	}
	data, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	return json.Marshal(checkpointFile{Data: string(data), Checksum: checksum(string(data))})
}

// unmarshalCheckpoint reads a checkpoint in the kubelet's format, or in
// the format crivk wrote before it used the kubelet's (a bare JSON object
// of PodAllocation by pod UID), so that an upgraded crivk keeps its
// allocations. Anything else, a checksum that does not match included, is
// an error with the kubelet's advice.
func unmarshalCheckpoint(path string, b []byte) (map[types.UID]PodAllocation, error) {
	out := map[types.UID]PodAllocation{}
	var cp checkpointFile
	if err := json.Unmarshal(b, &cp); err == nil && cp.Data != "" {
		if sum := checksum(cp.Data); sum != cp.Checksum {
			return nil, restoreError(path, fmt.Errorf("checkpoint is corrupted: checksum %d, the data's %d", cp.Checksum, sum))
		}
		var info podResourceCheckpointInfo
		if err := json.Unmarshal([]byte(cp.Data), &info); err != nil {
			return nil, restoreError(path, fmt.Errorf("failed to get pod resource information: %w", err))
		}
		for uid, e := range info.Entries {
			c := e.ContainerResources
			if c == nil {
				c = map[string]v1.ResourceRequirements{}
			}
			out[uid] = PodAllocation{Pod: e.PodLevelResources, Containers: c}
		}
		return out, nil
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, restoreError(path, err)
	}
	return out, nil
}

// restoreError is the kubelet's message for a checkpoint it cannot read
// (it refuses to start on it too).
func restoreError(path string, err error) error {
	return fmt.Errorf("could not restore state from checkpoint: %w, please drain this node and delete pod resource information checkpoint file %q before restarting crivk", err, path)
}
