package stats

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// fsStat is one of the machine's filesystems as cAdvisor's root container
// reports it (fs.GetGlobalFsInfo, raw handler's fsToFsStats): statfs of
// its mount point and /proc/diskstats of its device.
type fsStat struct {
	// device is the mount's source (/dev/sda1), a tmpfs's mount point, or
	// overlay_<major>-<minor> for an overlay, as cAdvisor names them.
	device                             string
	capacity, free, inodes, inodesFree uint64
	// disk are the device's /proc/diskstats counters (zero for a
	// filesystem without a block device): reads completed, merged,
	// sectors, ms reading, writes completed, merged, sectors, ms writing,
	// I/Os in progress, ms doing I/O, weighted ms.
	disk [11]uint64
}

// fsTypeWanted tells the filesystem types cAdvisor measures: ext*, nfs*,
// btrfs, overlay, tmpfs, xfs, zfs.
func fsTypeWanted(t string) bool {
	switch t {
	case "btrfs", "overlay", "tmpfs", "xfs", "zfs":
		return true
	}
	return strings.HasPrefix(t, "ext") || strings.HasPrefix(t, "nfs")
}

// readFilesystems measures the filesystems mounted in crivk's mount
// namespace (procRoot/self/mountinfo, the host's), one per source (a bind
// mount of a source already seen is the same filesystem; every tmpfs
// counts), sorted by device. A mount that cannot be measured (statfs
// fails: gone meanwhile) is left out.
func readFilesystems(procRoot string) ([]fsStat, error) {
	disks, err := readDiskStats(filepath.Join(procRoot, "diskstats"))
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(procRoot, "self", "mountinfo"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	seen := map[string]bool{}
	var out []fsStat
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - type source super-options
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 2 {
			continue
		}
		typ, source, mountpoint, devno := tail[0], tail[1], unescapeMount(fields[4]), fields[2]
		if !fsTypeWanted(typ) {
			continue
		}
		switch typ {
		case "tmpfs":
			source = mountpoint
		case "overlay":
			source = fmt.Sprintf("%s_%s", source, strings.Replace(devno, ":", "-", 1))
		}
		if seen[source] {
			continue
		}
		var st unix.Statfs_t
		if unix.Statfs(mountpoint, &st) != nil {
			continue
		}
		seen[source] = true
		bsize := uint64(st.Bsize)
		out = append(out, fsStat{device: source, capacity: st.Blocks * bsize, free: st.Bfree * bsize, inodes: st.Files,
			inodesFree: st.Ffree, disk: disks[devno]})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].device < out[j].device })
	return out, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
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

// readDiskStats reads /proc/diskstats: major:minor -> the first 11
// counters after the device name.
func readDiskStats(path string) (map[string][11]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string][11]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 14 {
			continue
		}
		var v [11]uint64
		ok := true
		for i := range v {
			if v[i], err = strconv.ParseUint(f[3+i], 10, 64); err != nil {
				ok = false
			}
		}
		if ok {
			out[f[0]+":"+f[1]] = v
		}
	}
	return out, nil
}
