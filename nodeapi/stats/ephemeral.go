package stats

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// A pod's local ephemeral storage, as the kubelet's summary counts it
// (pkg/kubelet/stats calcEphemeralStorage with the CRI stats provider):
// every container's writable layer (Rootfs) and log files (Logs), plus the
// pod's local ephemeral volumes. Those are the kubelet's
// IsLocalEphemeralVolume: emptyDir not in memory and configMap (secret,
// projected and downwardAPI volumes are not, nor an emptyDir of medium
// Memory, a tmpfs).

// localEphemeralPlugins are the volume plugin directories whose volumes
// are local ephemeral storage when they are on the pods' filesystem.
var localEphemeralPlugins = map[string]bool{
	"kubernetes.io~empty-dir": true,
	"kubernetes.io~configmap": true,
}

// localEphemeral returns the names of pod uid's local ephemeral volumes:
// of a local ephemeral plugin, on the same filesystem as the pods'
// directory (a tmpfs emptyDir is memory, not disk).
func (v *volumeStats) localEphemeral(uid string) map[string]bool {
	if v == nil || uid == "" {
		return nil
	}
	podsDev, ok := device(v.podsDir)
	if !ok {
		return nil
	}
	base := filepath.Join(v.podsDir, uid, "volumes")
	out := map[string]bool{}
	for plugin := range localEphemeralPlugins {
		vols, err := os.ReadDir(filepath.Join(base, plugin))
		if err != nil {
			continue
		}
		for _, vol := range vols {
			if dev, ok := device(filepath.Join(base, plugin, vol.Name())); ok && dev == podsDev {
				out[vol.Name()] = true
			}
		}
	}
	return out
}

func device(path string) (uint64, bool) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(sys.Dev), true
}

// addLogs sets each container's Logs from its log directory under
// podLogDir (<namespace>_<name>_<uid>/<container>/) and adds them to the
// pod's ephemeral storage.
//
// The filesystem's capacity, available bytes and inodes are rootFs's
// (the node's filesystem; nil: none), as the kubelet's
// getPodContainerLogStats gives them from its root filesystem.
func addLogs(p *statsapi.PodStats, podLogDir string, rootFs *statsapi.FsStats) {
	if podLogDir == "" {
		return
	}
	dir := filepath.Join(podLogDir, p.PodRef.Namespace+"_"+p.PodRef.Name+"_"+p.PodRef.UID)
	for i := range p.Containers {
		c := &p.Containers[i]
		path := filepath.Join(dir, c.Name)
		if _, err := os.Stat(path); err != nil {
			continue
		}
		used, inodes := du(path)
		at := c.StartTime
		if c.Rootfs != nil {
			at = c.Rootfs.Time
		}
		c.Logs = &statsapi.FsStats{Time: at, UsedBytes: &used, InodesUsed: &inodes}
		if rootFs != nil {
			c.Logs.CapacityBytes, c.Logs.AvailableBytes = rootFs.CapacityBytes, rootFs.AvailableBytes
			c.Logs.Inodes, c.Logs.InodesFree = rootFs.Inodes, rootFs.InodesFree
		}
		addEphemeral(p, at, used, inodes)
	}
}

// addEphemeralVolumes adds the usage of the pod's local ephemeral volumes
// (by name) to its ephemeral storage.
func addEphemeralVolumes(p *statsapi.PodStats, local map[string]bool) {
	for _, v := range p.VolumeStats {
		if !local[v.Name] || v.UsedBytes == nil {
			continue
		}
		var inodes uint64
		if v.InodesUsed != nil {
			inodes = *v.InodesUsed
		}
		addEphemeral(p, v.Time, *v.UsedBytes, inodes)
	}
}

func addEphemeral(p *statsapi.PodStats, at metav1.Time, used, inodes uint64) {
	if p.EphemeralStorage == nil {
		var zero, zeroInodes uint64
		p.EphemeralStorage = &statsapi.FsStats{Time: at, UsedBytes: &zero, InodesUsed: &zeroInodes}
	}
	if p.EphemeralStorage.InodesUsed == nil {
		var zero uint64
		p.EphemeralStorage.InodesUsed = &zero
	}
	*p.EphemeralStorage.UsedBytes += used
	*p.EphemeralStorage.InodesUsed += inodes
}

// readRlimit is the node's process limit and count, as the kubelet's
// pkg/kubelet/stats/pidlimit: the smaller of kernel.pid_max and
// kernel.threads-max, and the number of tasks from /proc/loadavg's fourth
// field (sysinfo(2) truncates it). procRoot is /proc but in tests.
func readRlimit(procRoot string, at metav1.Time) *statsapi.RlimitStats {
	r := &statsapi.RlimitStats{Time: at}
	max := int64(-1)
	for _, f := range []string{"sys/kernel/pid_max", "sys/kernel/threads-max"} {
		b, err := os.ReadFile(filepath.Join(procRoot, f))
		if err != nil {
			continue
		}
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && (max < 0 || v < max) {
			max = v
		}
	}
	if max >= 0 {
		r.MaxPID = &max
	}
	if n, err := runningTasks(procRoot); err == nil {
		r.NumOfRunningProcesses = &n
	}
	return r
}

// runningTasks reads the task count of /proc/loadavg ("0.1 0.2 0.3 2/3518 42").
func runningTasks(procRoot string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, "loadavg"))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 5 {
		return 0, fmt.Errorf("%s: not enough fields", filepath.Join(procRoot, "loadavg"))
	}
	_, total, ok := strings.Cut(f[3], "/")
	if !ok {
		return 0, fmt.Errorf("%s: no tasks field", filepath.Join(procRoot, "loadavg"))
	}
	return strconv.ParseInt(total, 10, 64)
}
