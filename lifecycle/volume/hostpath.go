package volume

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
)

// checkHostPath applies the hostPath type check of src, creating the path
// for DirectoryOrCreate and FileOrCreate as the kubelet does (0755
// directory, 0644 empty file). The messages are the kubelet's.
func checkHostPath(src *v1.HostPathVolumeSource) error {
	t := v1.HostPathUnset
	if src.Type != nil {
		t = *src.Type
	}
	p := src.Path
	info, statErr := os.Stat(p)
	exists := statErr == nil
	fail := func(what string) error {
		return fmt.Errorf("hostPath type check failed: %s is not a %s", p, what)
	}
	switch t {
	case v1.HostPathUnset:
		return nil
	case v1.HostPathDirectoryOrCreate:
		if !exists {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return fmt.Errorf("hostPath type check failed: creating directory %s: %w", p, err)
			}
			return nil
		}
		if !info.IsDir() {
			return fail("directory")
		}
	case v1.HostPathDirectory:
		if !exists {
			return fmt.Errorf("hostPath type check failed: %s is not a directory", p)
		}
		if !info.IsDir() {
			return fail("directory")
		}
	case v1.HostPathFileOrCreate:
		if !exists {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return fmt.Errorf("hostPath type check failed: creating %s: %w", filepath.Dir(p), err)
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil && !os.IsExist(err) {
				return fmt.Errorf("hostPath type check failed: creating file %s: %w", p, err)
			}
			if f != nil {
				f.Close()
			}
			return nil
		}
		if !info.Mode().IsRegular() {
			return fail("file")
		}
	case v1.HostPathFile:
		if !exists || !info.Mode().IsRegular() {
			return fail("file")
		}
	case v1.HostPathSocket:
		if !exists || info.Mode()&fs.ModeSocket == 0 {
			return fail("socket file")
		}
	case v1.HostPathCharDev:
		if !exists || info.Mode()&fs.ModeCharDevice == 0 {
			return fail("character device")
		}
	case v1.HostPathBlockDev:
		if !exists || info.Mode()&fs.ModeDevice == 0 || info.Mode()&fs.ModeCharDevice != 0 {
			return fail("block device")
		}
	default:
		return fmt.Errorf("hostPath type check failed: invalid type %q", t)
	}
	return nil
}
