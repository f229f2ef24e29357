package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"
)

// volume is what the driver remembers of a volume CreateVolume made.
type volume struct {
	Name          string `json:"name"`
	ID            string `json:"id"`
	CapacityBytes int64  `json:"capacity_bytes"`
}

// stateFile is the JSON document of DIR/state.json.
type stateFile struct {
	Volumes map[string]volume `json:"volumes"` // by id
}

// store holds the volumes and writes them to one JSON file on every change.
// It does no mounting and knows nothing of gRPC.
type store struct {
	path string

	mu   sync.Mutex
	vols map[string]volume // by id; guarded by mu
}

// loadStore reads path, or starts empty when it does not exist.
func loadStore(path string) (*store, error) {
	s := &store{path: path, vols: map[string]volume{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state %s: %w", path, err)
	}
	var f stateFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("parse state %s: %w", path, err)
	}
	if f.Volumes != nil {
		s.vols = f.Volumes
	}
	return s, nil
}

// volumeID is the id of the volume named name: stable across restarts, so
// that a CreateVolume retried after one is still idempotent.
func volumeID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:16])
}

func (s *store) get(id string) (volume, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vols[id]
	return v, ok
}

// put records v (replacing the volume of its id) and writes the file; on a
// write error the memory is left as it was.
func (s *store) put(v volume) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := maps.Clone(s.vols)
	next[v.ID] = v
	if err := s.write(next); err != nil {
		return err
	}
	s.vols = next
	return nil
}

// remove forgets the volume id; removing an unknown id is no change.
func (s *store) remove(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.vols[id]; !ok {
		return nil
	}
	next := maps.Clone(s.vols)
	delete(next, id)
	if err := s.write(next); err != nil {
		return err
	}
	s.vols = next
	return nil
}

// write replaces the file atomically: a synced temporary file beside it,
// renamed over it.
func (s *store) write(vols map[string]volume) (retErr error) {
	b, err := json.MarshalIndent(stateFile{Volumes: vols}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), ".state-*.json")
	if err != nil {
		return fmt.Errorf("write state %s: %w", s.path, err)
	}
	defer func() {
		if retErr != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write state %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("sync state %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close state %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("write state %s: %w", s.path, err)
	}
	return nil
}
