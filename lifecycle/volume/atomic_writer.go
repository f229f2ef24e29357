package volume

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// FileProjection is one file of an atomically written volume.
type FileProjection struct {
	Data []byte
	Mode int32
	// FsGroup, when set, is the group the file belongs to (pod's fsGroup).
	FsGroup *int64
	// FsUser, when set, is the user the file belongs to (a projected
	// token's, the kubelet's FileProjection.FsUser).
	FsUser *int64
}

const (
	dataDirName    = "..data"
	newDataDirName = "..data_tmp"
)

// atomicWriter writes payloads into dir with the kubelet's algorithm: see
// the package documentation. It is not safe for concurrent use on the same
// dir; the manager serialises the writes of one pod.
type atomicWriter struct {
	dir string
	// now names the timestamped directories.
	now func() time.Time
	// step, when set, is called after each step of a write; an error stops
	// the write there, as a crash would (tests).
	step func(name string) error
	// setPerms, when set, is called once a new version is written and
	// before it becomes visible: the kubelet's setPerms, which gives the
	// whole volume the pod's fsGroup (ownership.go).
	setPerms func() error
}

// Write makes dir hold exactly payload (paths relative to dir). Nothing is
// written when the current version already equals payload.
func (w *atomicWriter) Write(payload map[string]FileProjection) error {
	clean := make(map[string]FileProjection, len(payload))
	for p, f := range payload {
		if err := validatePath(p); err != nil {
			return err
		}
		clean[filepath.Clean(p)] = f
	}
	oldTs, err := os.Readlink(filepath.Join(w.dir, dataDirName))
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("reading %s: %w", filepath.Join(w.dir, dataDirName), err)
	}
	if oldTs != "" {
		same, err := sameContent(filepath.Join(w.dir, oldTs), clean)
		if err != nil {
			return err
		}
		if same {
			// A crash after the swap may have left visible names out of date.
			if err := w.syncVisible(clean); err != nil {
				return err
			}
			return w.removeStale(oldTs)
		}
	}
	tsDir, err := os.MkdirTemp(w.dir, w.now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return fmt.Errorf("creating a new version directory in %s: %w", w.dir, err)
	}
	if err := os.Chmod(tsDir, 0o755); err != nil {
		return err
	}
	if err := writePayload(tsDir, clean); err != nil {
		_ = os.RemoveAll(tsDir)
		return err
	}
	if w.setPerms != nil {
		if err := w.setPerms(); err != nil {
			_ = os.RemoveAll(tsDir)
			return err
		}
	}
	if err := w.hook("written"); err != nil {
		return err
	}
	tmp := filepath.Join(w.dir, newDataDirName)
	if err := os.Remove(tmp); err != nil && !os.IsNotExist(err) {
		return err
	}
	if err := os.Symlink(filepath.Base(tsDir), tmp); err != nil {
		return fmt.Errorf("linking %s: %w", tmp, err)
	}
	if err := w.hook("linked"); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(w.dir, dataDirName)); err != nil {
		return fmt.Errorf("swapping %s: %w", filepath.Join(w.dir, dataDirName), err)
	}
	if err := w.hook("swapped"); err != nil {
		return err
	}
	if err := w.syncVisible(clean); err != nil {
		return err
	}
	if err := w.hook("visible"); err != nil {
		return err
	}
	return w.removeStale(filepath.Base(tsDir))
}

func (w *atomicWriter) hook(name string) error {
	if w.step == nil {
		return nil
	}
	return w.step(name)
}

// validatePath rejects paths that could leave the volume.
func validatePath(p string) error {
	if p == "" {
		return fmt.Errorf("invalid path: must not be empty")
	}
	if filepath.IsAbs(p) {
		return fmt.Errorf("invalid path %q: must be relative", p)
	}
	if len(p) > 4096 {
		return fmt.Errorf("invalid path %q: too long", p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return fmt.Errorf("invalid path %q: must not contain '..'", p)
		}
	}
	if strings.HasPrefix(p, "..") {
		return fmt.Errorf("invalid path %q: must not start with '..'", p)
	}
	return nil
}

func writePayload(tsDir string, payload map[string]FileProjection) error {
	for p, f := range payload {
		full := filepath.Join(tsDir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, f.Data, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", full, err)
		}
		if f.FsGroup != nil || f.FsUser != nil {
			uid, gid := -1, -1
			if f.FsUser != nil {
				uid = int(*f.FsUser)
			}
			if f.FsGroup != nil {
				gid = int(*f.FsGroup)
			}
			if err := os.Lchown(full, uid, gid); err != nil {
				return err
			}
		}
		if err := os.Chmod(full, fs.FileMode(f.Mode)&fs.ModePerm); err != nil {
			return err
		}
	}
	return nil
}

// sameContent reports whether tsDir holds exactly payload.
func sameContent(tsDir string, payload map[string]FileProjection) (bool, error) {
	n := 0
	same := true
	err := filepath.WalkDir(tsDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		n++
		rel, _ := filepath.Rel(tsDir, path)
		f, ok := payload[rel]
		if !ok {
			same = false
			return filepath.SkipAll
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode().Perm() != fs.FileMode(f.Mode)&fs.ModePerm {
			same = false
			return filepath.SkipAll
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.Equal(data, f.Data) {
			same = false
			return filepath.SkipAll
		}
		return nil
	})
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return same && n == len(payload), nil
}

// syncVisible makes the top-level names of payload symlinks through
// ..data and removes the visible names it no longer has.
func (w *atomicWriter) syncVisible(payload map[string]FileProjection) error {
	want := map[string]bool{}
	for p := range payload {
		want[strings.SplitN(p, "/", 2)[0]] = true
	}
	for name := range want {
		link := filepath.Join(w.dir, name)
		target := filepath.Join(dataDirName, name)
		cur, err := os.Readlink(link)
		if err == nil && cur == target {
			continue
		}
		if err := os.Remove(link); err != nil && !os.IsNotExist(err) {
			return err
		}
		if err := os.Symlink(target, link); err != nil {
			return fmt.Errorf("linking %s: %w", link, err)
		}
	}
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") || want[e.Name()] {
			continue
		}
		if e.Type()&fs.ModeSymlink == 0 {
			continue // not ours
		}
		if err := os.Remove(filepath.Join(w.dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// removeStale removes every version directory but current, and a
// ..data_tmp link a crash left behind.
func (w *atomicWriter) removeStale(current string) error {
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		n := e.Name()
		if n == dataDirName || n == current || !strings.HasPrefix(n, "..") {
			continue
		}
		if n == newDataDirName || e.IsDir() {
			if err := os.RemoveAll(filepath.Join(w.dir, n)); err != nil {
				return err
			}
		}
	}
	return nil
}
