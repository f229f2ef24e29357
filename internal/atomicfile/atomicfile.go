// Package atomicfile writes a file so that a reader, or the next start
// after a crash, sees either its old content or the whole new one: a
// temporary file in the same directory, synced, renamed over the file.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write writes data to path through a synced temporary file of path's
// directory (".<name>.tmp*", removed on failure) renamed over path.
func Write(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
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
	return os.Rename(tmp.Name(), path)
}

// SyncDir syncs directory dir, so that a rename or a new entry in it
// survives a crash (the kubelet's parent-directory fsync).
func SyncDir(dir string) error {
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
