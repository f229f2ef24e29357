package userns

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"

	"github.com/crivk/crivk/internal/atomicfile"
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
	// PodsDirs are the directories of pod directories (<root-dir>/pods of
	// each node the process runs, and of nodes it ran before): the
	// mappings files in them are the ranges in use.
	PodsDirs []string
	// IDsPerPod is the length of each pod's range; 0 means UnitLength.
	IDsPerPod uint32
	// First and Length are the machine's range of host IDs (Mappings).
	First, Length uint32
	// MaxPods is the pods of all the process' nodes: the range must hold
	// as many.
	MaxPods int
}

// Pool is the machine's range of IDs, cut into slots, shared by the
// Managers of the process' nodes, so that no two of them give the same
// IDs, whatever the node count was when a pod got its range. It is safe
// for concurrent use.
type Pool struct {
	idsPerPod uint32
	off       uint32 // the first usable slot (First / idsPerPod)
	slots     uint32 // how many slots the machine's range has

	mu     sync.Mutex
	used   []uint64                // a bit per slot; guarded by mu
	usedBy map[types.UID]allocated // guarded by mu
	// randIntN picks where the search for a free slot starts (the
	// kubelet's allocation map searches from a random place too).
	randIntN func(n int) int
}

// allocated is one pod's range: its first host ID and the directory of
// pod directories its file is in.
type allocated struct {
	first   uint32
	podsDir string
}

// Manager is one node's view of the Pool: the pods of its pods directory.
type Manager struct {
	pool    *Pool
	podsDir string
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

// New checks the machine's range as the kubelet's MakeUserNsManager does
// (and that it does not pass 2^32, where a slot would wrap to host ID 0)
// and records the range of every pod directory of cfg.PodsDirs that has a
// mappings file.
func New(cfg Config) (*Pool, error) {
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
	if uint64(cfg.First)+uint64(cfg.Length) > 1<<32 {
		return nil, fmt.Errorf("kubelet user assigned IDs %v+%v pass the last ID 4294967295", cfg.First, cfg.Length)
	}
	if cfg.Length%n != 0 {
		return nil, fmt.Errorf("kubelet user assigned IDs length %v is not a multiple of %v", cfg.Length, n)
	}
	if cfg.MaxPods > 0 && uint64(cfg.Length/n) < uint64(cfg.MaxPods) {
		return nil, fmt.Errorf("kubelet user assigned IDs are not enough to support %v pods", cfg.MaxPods)
	}
	p := &Pool{
		idsPerPod: n,
		off:       cfg.First / n,
		slots:     cfg.Length / n,
		usedBy:    map[types.UID]allocated{},
		randIntN:  rand.IntN,
	}
	p.used = make([]uint64, (p.slots+63)/64)
	for _, dir := range cfg.PodsDirs {
		entries, err := os.ReadDir(dir)
		if err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("read pods from disk: %w", err)
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			uid := types.UID(e.Name())
			data, err := os.ReadFile(mappingsPath(dir, uid))
			if os.IsNotExist(err) || (err == nil && len(data) == 0) {
				continue
			}
			if err == nil {
				_, err = p.recordFile(dir, uid, data)
			}
			if err != nil {
				return nil, fmt.Errorf("record pod mappings for existing pod %q: %w", uid, err)
			}
		}
	}
	return p, nil
}

// Manager is the view of the node whose pod directories are in podsDir.
func (p *Pool) Manager(podsDir string) *Manager { return &Manager{pool: p, podsDir: podsDir} }

// IDsPerPod is the length of each pod's range.
func (p *Pool) IDsPerPod() uint32 { return p.idsPerPod }

// PodMappings is the user namespace of pod uid's sandbox: the range it
// has (its mappings file, written again if it went missing), or a new
// one, written to the file (and the file synced) before it is returned.
// The caller has checked that the runtime handler supports user
// namespaces.
func (m *Manager) PodMappings(uid types.UID) (*runtimeapi.UserNamespace, error) {
	p := m.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	data, err := os.ReadFile(mappingsPath(m.podsDir, uid))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	var first uint32
	switch a, ok := p.usedBy[uid]; {
	case len(data) > 0:
		if first, err = p.recordFile(m.podsDir, uid, data); err != nil {
			return nil, fmt.Errorf("user namespace: %w", err)
		}
	case ok:
		// The pod has its range, its file is gone: the same range, never
		// a second one (its sandbox may run in the first).
		first = a.first
		if err := p.writeFile(m.podsDir, uid, first); err != nil {
			return nil, fmt.Errorf("user namespace: %w", err)
		}
	default:
		if first, err = p.create(m.podsDir, uid); err != nil {
			return nil, fmt.Errorf("create user namespace: %w", err)
		}
	}
	ids := []*runtimeapi.IDMapping{{HostId: first, ContainerId: 0, Length: p.idsPerPod}}
	gids := []*runtimeapi.IDMapping{{HostId: first, ContainerId: 0, Length: p.idsPerPod}}
	return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: ids, Gids: gids}, nil
}

// Release frees pod uid's range and removes its mappings file: its
// containers have stopped. A pod without a range is nothing to do.
func (m *Manager) Release(uid types.UID) {
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	m.pool.release(uid)
}

// Allocated reports whether pod uid has a range.
func (m *Manager) Allocated(uid types.UID) bool {
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	_, ok := m.pool.usedBy[uid]
	return ok
}

// CleanupOrphans frees the ranges of this node's pods that keep does not
// want (the kubelet's CleanupOrphanedPodUsernsAllocations): keep says
// whether a pod is known, to the API, to the engine or to the runtime. A
// pod keep wants keeps its range, its directory gone or not.
func (m *Manager) CleanupOrphans(keep func(types.UID) bool) error {
	p := m.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	entries, err := os.ReadDir(m.podsDir)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("user namespace: read pods from disk: %w", err)
	}
	for _, e := range entries {
		if uid := types.UID(e.Name()); e.IsDir() && !keep(uid) {
			p.release(uid)
		}
	}
	for uid, a := range p.usedBy {
		if a.podsDir == m.podsDir && !keep(uid) {
			p.release(uid)
		}
	}
	return nil
}

func mappingsPath(podsDir string, uid types.UID) string {
	return filepath.Join(podsDir, string(uid), mappingsFile)
}

// create allocates a free slot to uid and writes its file; on a failed
// write the slot is freed again. Called with mu held.
func (p *Pool) create(podsDir string, uid types.UID) (first uint32, retErr error) {
	slot, ok := p.free()
	if !ok {
		return 0, errors.New("could not find an empty slot to allocate a user namespace")
	}
	first = (slot + p.off) * p.idsPerPod
	p.set(slot)
	p.usedBy[uid] = allocated{first: first, podsDir: podsDir}
	defer func() {
		if retErr != nil {
			p.release(uid)
		}
	}()
	return first, p.writeFile(podsDir, uid, first)
}

// writeFile writes uid's mappings file for the range at first.
func (p *Pool) writeFile(podsDir string, uid types.UID, first uint32) error {
	one := []idMapping{{HostID: first, ContainerID: 0, Length: p.idsPerPod}}
	data, err := json.Marshal(userNamespace{UIDMappings: one, GIDMappings: one})
	if err != nil {
		return err
	}
	return writeSynced(filepath.Join(podsDir, string(uid)), mappingsFile, data)
}

// recordFile checks a mappings file as the kubelet's
// parseUserNsFileAndRecord does and records its range for uid. Called
// with mu held.
func (p *Pool) recordFile(podsDir string, uid types.UID, data []byte) (uint32, error) {
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
	if length != p.idsPerPod {
		return 0, fmt.Errorf("wrong user namespace length %v", length)
	}
	if from%p.idsPerPod != 0 {
		return 0, fmt.Errorf("wrong user namespace offset specified %v", from)
	}
	prev, found := p.usedBy[uid]
	if found && prev.first != from {
		return 0, fmt.Errorf("different user namespace range already used by pod %q", uid)
	}
	if found {
		return from, nil
	}
	slot := from/p.idsPerPod - p.off
	if from/p.idsPerPod < p.off || slot >= p.slots {
		return 0, fmt.Errorf("id %v is out of range", from)
	}
	if p.isSet(slot) {
		return 0, fmt.Errorf("range picked for pod %q already taken", uid)
	}
	p.set(slot)
	p.usedBy[uid] = allocated{first: from, podsDir: podsDir}
	return from, nil
}

// release frees uid's slot and removes its file. Called with mu held.
func (p *Pool) release(uid types.UID) {
	a, ok := p.usedBy[uid]
	if !ok {
		return
	}
	delete(p.usedBy, uid)
	_ = os.Remove(mappingsPath(a.podsDir, uid))
	slot := a.first/p.idsPerPod - p.off
	p.used[slot/64] &^= 1 << (slot % 64)
}

func (p *Pool) isSet(slot uint32) bool { return p.used[slot/64]&(1<<(slot%64)) != 0 }
func (p *Pool) set(slot uint32)        { p.used[slot/64] |= 1 << (slot % 64) }

// free is a free slot: the first at or after a random one, wrapping.
func (p *Pool) free() (uint32, bool) {
	start := uint32(p.randIntN(int(p.slots)))
	for i := uint32(0); i < p.slots; i++ {
		slot := (start + i) % p.slots
		if !p.isSet(slot) {
			return slot, true
		}
	}
	return 0, false
}

// writeSynced writes data to dir/name atomically, then syncs dir, so that
// the file is there, whole, after a crash (the kubelet's file store and its
// parent-directory fsync).
func writeSynced(dir, name string, data []byte) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, name), data); err != nil {
		return err
	}
	return atomicfile.SyncDir(dir)
}
