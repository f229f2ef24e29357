package volume

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// hostMounter is the host's mount(2) and /proc/self/mountinfo.
type hostMounter struct{}

func (hostMounter) MountTmpfs(dir string, sizeBytes int64) error {
	opts := "mode=0777"
	if sizeBytes > 0 {
		opts += ",size=" + strconv.FormatInt(sizeBytes, 10)
	}
	return unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts)
}

func (hostMounter) Unmount(dir string) error {
	err := unix.Unmount(dir, 0)
	if err == unix.EBUSY {
		// A container still holds it: detach it now, it goes away with the
		// last user.
		err = unix.Unmount(dir, unix.MNT_DETACH)
	}
	if err == unix.EINVAL || err == unix.ENOENT {
		return nil // not a mount point (any more)
	}
	return err
}

func (hostMounter) MountPoints(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dir = filepath.Clean(dir)
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountInfo(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out, sc.Err()
}

func (h hostMounter) IsMountPoint(dir string) (bool, error) {
	mps, err := h.MountPoints(dir)
	if err != nil {
		return false, err
	}
	for _, mp := range mps {
		if mp == filepath.Clean(dir) {
			return true, nil
		}
	}
	return false, nil
}

// unescapeMountInfo decodes the octal escapes (\040 for a space) of a
// mountinfo path.
func unescapeMountInfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
