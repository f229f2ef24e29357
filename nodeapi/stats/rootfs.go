package stats

import (
	"fmt"
	"github.com/moby/sys/mountinfo"
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
	mounts, err := mountinfo.GetMountsFromReader(f, func(m *mountinfo.Info) (skip, stop bool) {
		return !fsTypeWanted(m.FSType), false
	})
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []fsStat
	for _, m := range mounts {
		source, devno := m.Source, fmt.Sprintf("%d:%d", m.Major, m.Minor)
		switch m.FSType {
		case "tmpfs":
			source = m.Mountpoint
		case "overlay":
			source = fmt.Sprintf("%s_%d-%d", source, m.Major, m.Minor)
		}
		if seen[source] {
			continue
		}
		var st unix.Statfs_t
		if unix.Statfs(m.Mountpoint, &st) != nil {
			continue
		}
		seen[source] = true
		bsize := uint64(st.Bsize)
		out = append(out, fsStat{device: source, capacity: st.Blocks * bsize, free: st.Bfree * bsize, inodes: st.Files,
			inodesFree: st.Ffree, disk: disks[devno]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].device < out[j].device })
	return out, nil
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
