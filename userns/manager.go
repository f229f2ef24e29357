package userns

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// UnitLength is the granularity of idsPerPod (the kubelet's
// userNsUnitLength) and its default (DefaultKubeletUserNamespacesIDsPerPod).
const UnitLength = 65536

// mappingsFile is the file, in the pod's directory, that holds the pod's
// mappings (the kubelet's name).
const mappingsFile = "userns"

// Config is what New needs.
type Config struct {
	// PodsDir is <root-dir>/pods: each pod's directory is PodsDir/<uid>.
	PodsDir string
	// IDsPerPod is the length of each pod's range; 0 means UnitLength.
	IDsPerPod uint32
	// First and Length are the node's range of host IDs (Mappings).
	First, Length uint32
	// MaxPods is the node's maxPods: the range must hold as many pods.
	MaxPods int
}

// Manager allocates the pods' ID ranges. It is safe for concurrent use.
type Manager struct {
	podsDir   string
	idsPerPod uint32
	off       uint32 // the first usable slot (First / idsPerPod)
	slots     uint32 // how many slots the node's range has

	mu     sync.Mutex
	used   []uint64             // a bit per slot; guarded by mu
	usedBy map[types.UID]uint32 // pod -> first host ID; guarded by mu
}

// userNamespace and idMapping are the file's format (the kubelet's).
type userNamespace struct {
	UIDMappings []idMapping `json:"uidMappings"`
	GIDMappings []idMapping `json:"gidMappings"`
}

type idMapping struct {
	HostID      uint32 `json:"hostId"`
	ContainerID uint32 `json:"containerId"`
	Length      uint32 `json:"length"`
}

// New checks the node's range as the kubelet's MakeUserNsManager does and
// records the range of every pod directory that has a mappings file.
func New(cfg Config) (*Manager, error) {
	n := cfg.IDsPerPod
	if n == 0 {
		n = UnitLength
	}
	if n%UnitLength != 0 {
		return nil, fmt.Errorf("kubelet user namespace length %v is not a multiple of %d", n, UnitLength)
	}
	if cfg.First%n != 0 {
		return nil, fmt.Errorf("kubelet user assigned ID %v is not a multiple of %v", cfg.First, n)
	}
	if cfg.First < n {
		// Mapping host ID 0 would circumvent security.
		return nil, fmt.Errorf("kubelet user assigned ID %v must be greater or equal to %v", cfg.First, n)
	}
	if cfg.Length%n != 0 {
		return nil, fmt.Errorf("kubelet user assigned IDs length %v is not a multiple of %v", cfg.Length, n)
	}
	if cfg.MaxPods > 0 && uint64(cfg.Length/n) < uint64(cfg.MaxPods) {
		return nil, fmt.Errorf("kubelet user assigned IDs are not enough to support %v pods", cfg.MaxPods)
	}
	m := &Manager{
		podsDir:   cfg.PodsDir,
		idsPerPod: n,
		off:       cfg.First / n,
		slots:     cfg.Length / n,
		usedBy:    map[types.UID]uint32{},
	}
	m.used = make([]uint64, (m.slots+63)/64)
	entries, err := os.ReadDir(cfg.PodsDir)
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("read pods from disk: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		uid := types.UID(e.Name())
		data, err := os.ReadFile(m.file(uid))
		if os.IsNotExist(err) || (err == nil && len(data) == 0) {
			continue
		}
		if err == nil {
			_, err = m.recordFile(uid, data)
		}
		if err != nil {
			return nil, fmt.Errorf("record pod mappings for existing pod %q: %w", uid, err)
		}
	}
	return m, nil
}

// IDsPerPod is the length of each pod's range.
func (m *Manager) IDsPerPod() uint32 { return m.idsPerPod }

// PodMappings is the user namespace of pod uid's sandbox: the range its
// mappings file names, or a new one, written to the file (and the file
// synced) before it is returned. The caller has checked that the runtime
// handler supports user namespaces.
func (m *Manager) PodMappings(uid types.UID) (*runtimeapi.UserNamespace, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	data, err := os.ReadFile(m.file(uid))
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("user namespace: %w", err)
	}
	var first uint32
	if len(data) > 0 {
		if first, err = m.recordFile(uid, data); err != nil {
			return nil, fmt.Errorf("user namespace: %w", err)
		}
	} else if first, err = m.create(uid); err != nil {
		return nil, fmt.Errorf("create user namespace: %w", err)
	}
	ids := []*runtimeapi.IDMapping{{HostId: first, ContainerId: 0, Length: m.idsPerPod}}
	gids := []*runtimeapi.IDMapping{{HostId: first, ContainerId: 0, Length: m.idsPerPod}}
	return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: ids, Gids: gids}, nil
}

// Release frees pod uid's range and removes its mappings file: its
// containers have stopped. A pod without a range is nothing to do.
func (m *Manager) Release(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.release(uid)
}

// Allocated reports whether pod uid has a range.
func (m *Manager) Allocated(uid types.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.usedBy[uid]
	return ok
}

// CleanupOrphans frees the ranges of pods keep does not want and of pods
// whose directory is gone (the kubelet's
// CleanupOrphanedPodUsernsAllocations): keep says whether a pod is known,
// to the API or to the runtime.
func (m *Manager) CleanupOrphans(keep func(types.UID) bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	entries, err := os.ReadDir(m.podsDir)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("user namespace: read pods from disk: %w", err)
	}
	onDisk := map[types.UID]bool{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		uid := types.UID(e.Name())
		onDisk[uid] = true
		if !keep(uid) {
			m.release(uid)
		}
	}
	for uid := range m.usedBy {
		if !onDisk[uid] {
			m.release(uid)
		}
	}
	return nil
}

func (m *Manager) file(uid types.UID) string {
	return filepath.Join(m.podsDir, string(uid), mappingsFile)
}

// create allocates the first free slot to uid and writes its file; on a
// failed write the slot is freed again. Called with mu held.
func (m *Manager) create(uid types.UID) (first uint32, retErr error) {
	slot, ok := m.firstFree()
	if !ok {
		return 0, errors.New("could not find an empty slot to allocate a user namespace")
	}
	first = (slot + m.off) * m.idsPerPod
	m.set(slot)
	m.usedBy[uid] = first
	defer func() {
		if retErr != nil {
			m.release(uid)
		}
	}()
	one := []idMapping{{HostID: first, ContainerID: 0, Length: m.idsPerPod}}
	data, err := json.Marshal(userNamespace{UIDMappings: one, GIDMappings: one})
	if err != nil {
		return 0, err
	}
	return first, writeSynced(filepath.Dir(m.file(uid)), mappingsFile, data)
}

// recordFile checks a mappings file as the kubelet's
// parseUserNsFileAndRecord does and records its range for uid. Called
// with mu held.
func (m *Manager) recordFile(uid types.UID, data []byte) (uint32, error) {
	var ns userNamespace
	if err := json.Unmarshal(data, &ns); err != nil {
		return 0, fmt.Errorf("invalid user namespace mappings file: %w", err)
	}
	switch {
	case len(ns.UIDMappings) != 1:
		return 0, errors.New("invalid user namespace configuration: no more than one mapping allowed.")
	case len(ns.UIDMappings) != len(ns.GIDMappings):
		return 0, errors.New("invalid user namespace configuration: GID and UID mappings should be identical.")
	case ns.UIDMappings[0] != ns.GIDMappings[0]:
		return 0, errors.New("invalid user namespace configuration: GID and UID mapping should be identical")
	case ns.UIDMappings[0].ContainerID != 0:
		return 0, errors.New("invalid user namespace configuration: UID 0 must be mapped")
	}
	from, length := ns.UIDMappings[0].HostID, ns.UIDMappings[0].Length
	if length != m.idsPerPod {
		return 0, fmt.Errorf("wrong user namespace length %v", length)
	}
	if from%m.idsPerPod != 0 {
		return 0, fmt.Errorf("wrong user namespace offset specified %v", from)
	}
	prev, found := m.usedBy[uid]
	if found && prev != from {
		return 0, fmt.Errorf("different user namespace range already used by pod %q", uid)
	}
	if found {
		return from, nil
	}
	slot := from/m.idsPerPod - m.off
	if from/m.idsPerPod < m.off || slot >= m.slots {
		return 0, fmt.Errorf("id %v is out of range", from)
	}
	if m.isSet(slot) {
		return 0, fmt.Errorf("range picked for pod %q already taken", uid)
	}
	m.set(slot)
	m.usedBy[uid] = from
	return from, nil
}

// release frees uid's slot and removes its file. Called with mu held.
func (m *Manager) release(uid types.UID) {
	first, ok := m.usedBy[uid]
	if !ok {
		return
	}
	delete(m.usedBy, uid)
	_ = os.Remove(m.file(uid))
	slot := first/m.idsPerPod - m.off
	m.used[slot/64] &^= 1 << (slot % 64)
}

func (m *Manager) isSet(slot uint32) bool { return m.used[slot/64]&(1<<(slot%64)) != 0 }
func (m *Manager) set(slot uint32)        { m.used[slot/64] |= 1 << (slot % 64) }

// firstFree is the lowest free slot.
func (m *Manager) firstFree() (uint32, bool) {
	for i, w := range m.used {
		if w == ^uint64(0) {
			continue
		}
		slot := uint32(i)*64 + uint32(bits.TrailingZeros64(^w))
		if slot < m.slots {
			return slot, true
		}
	}
	return 0, false
}

// writeSynced writes data to dir/name through a temporary file and a
// rename, then syncs dir, so that the file is there, whole, after a crash
// (the kubelet's file store and its parent-directory fsync).
func writeSynced(dir, name string, data []byte) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+name+".tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}
