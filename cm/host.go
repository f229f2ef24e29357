package cm

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"
	"github.com/opencontainers/cgroups/fs2"
	"github.com/opencontainers/cgroups/fscommon"
)

// Host is the machine's cgroup filesystem: which version it is and where
// its hierarchies are mounted. It is the one place in crivk that knows
// cgroup v1 from v2: the pod cgroup tree (Manager), the node's own figures
// (NodeUsage, RootCgroupSample), the swap controller the runtime's
// containers are limited by (SwapAccounting), the memory cgroup the
// eviction manager's threshold notification watches (MemcgDir), and the
// cgroup v1 refusal at start (Version, internal/nodeagent) all read it
// here. A Host only reads; it is a value made once per process
// (DetectHost) and shared.
type Host struct {
	v2 bool
	// v2Mount is the unified mount (v2): /sys/fs/cgroup but in tests.
	v2Mount string
	// v1Mounts are the hierarchies (v1), controller -> mount; nil: the
	// machine's, which the library finds in /proc/self/mountinfo.
	v1Mounts map[string]string
	// procRoot is where /proc is read (the process' own cgroup).
	procRoot string
}

// HostConfig chooses a Host's filesystem instead of the machine's: unit
// tests give temporary trees. The zero value is the machine.
type HostConfig struct {
	// V1Mounts, when set, are cgroup v1 hierarchies (controller ->
	// directory), and select v1.
	V1Mounts map[string]string
	// V2Mount, when set, replaces /sys/fs/cgroup as the cgroup v2 mount
	// and selects v2. A directory that is no cgroup2 filesystem (a test's
	// tree) has its cgroups made with mkdir.
	V2Mount string
	// ProcRoot replaces /proc.
	ProcRoot string
}

// DetectHost is the machine's cgroup filesystem, its version read from
// the filesystem mounted at /sys/fs/cgroup (cgroup2 or not), as the
// kubelet's libcontainercgroups.IsCgroup2UnifiedMode.
func DetectHost() *Host { return NewHost(HostConfig{}) }

// NewHost is the filesystem cfg chooses; the machine's where it chooses
// nothing.
func NewHost(cfg HostConfig) *Host {
	h := &Host{v2Mount: unifiedMount, v1Mounts: cfg.V1Mounts, procRoot: "/proc"}
	if cfg.ProcRoot != "" {
		h.procRoot = cfg.ProcRoot
	}
	switch {
	case cfg.V2Mount != "":
		h.v2, h.v2Mount, h.v1Mounts = true, cfg.V2Mount, nil
	case cfg.V1Mounts != nil:
	default:
		h.v2 = cgroups.IsCgroup2UnifiedMode()
	}
	return h
}

// Version is 1 or 2.
func (h *Host) Version() int {
	if h.v2 {
		return 2
	}
	return 1
}

// fake reports a v2 mount that is no cgroup2 filesystem (a test's tree),
// where the library's fs2 would refuse to make a cgroup.
func (h *Host) fake() bool { return h.v2 && h.v2Mount != unifiedMount }

// manager returns the library's manager of the named cgroup (a path from
// the root of each hierarchy), with r as the values a Set would write.
func (h *Host) manager(name string, r *cgroups.Resources) (cgroups.Manager, error) {
	r.SkipFreezeOnSet = true
	cg := &cgroups.Cgroup{Path: name, Resources: r}
	if h.v2 {
		return fs2.NewManager(cg, filepath.Join(h.v2Mount, name))
	}
	var paths map[string]string
	if h.v1Mounts != nil {
		paths = map[string]string{}
		for ctrl, mount := range h.v1Mounts {
			paths[ctrl] = filepath.Join(mount, name)
		}
	}
	return fs.NewManager(cg, paths)
}

// hasController reports whether the controller is mounted (v1) or
// available at the root (v2: cgroup.controllers).
func (h *Host) hasController(ctrl string) bool {
	if h.v2 {
		b, err := os.ReadFile(filepath.Join(h.v2Mount, "cgroup.controllers"))
		return err == nil && slices.Contains(strings.Fields(string(b)), ctrl)
	}
	if h.v1Mounts != nil {
		_, ok := h.v1Mounts[ctrl]
		return ok
	}
	_, err := cgroups.FindCgroupMountpoint("", ctrl)
	return err == nil
}

// rootDir is the root cgroup's directory in controller's hierarchy (v1)
// or the unified one (v2, whatever the controller); "" when no hierarchy
// has the controller.
func (h *Host) rootDir(controller string) string {
	mgr, err := h.manager("/", &cgroups.Resources{SkipDevices: true})
	if err != nil {
		return ""
	}
	if h.v2 {
		return mgr.Path("")
	}
	return mgr.Path(controller)
}

// MemcgDir is the root memory cgroup's directory in the v1 memory
// hierarchy, where the kernel's memory threshold notification is armed
// (cgroup.event_control; the eviction manager's
// --kernel-memcg-notification); "" on cgroup v2, which has no such
// notification (the kubelet then polls only), or without a memory
// hierarchy.
func (h *Host) MemcgDir() string {
	if h.v2 {
		return ""
	}
	return h.rootDir("memory")
}

// SwapAccounting is the kubelet's checkSwapControllerAvailability: on
// cgroup v1, whether the root memory cgroup has
// memory.memsw.limit_in_bytes; on v2, whether the cgroup this process
// runs in (its /proc/self/cgroup) has memory.swap.max (the root has
// none). Anything it cannot read counts as no.
func (h *Host) SwapAccounting() bool {
	if !h.v2 {
		dir := h.rootDir("memory")
		if dir == "" {
			return false
		}
		_, err := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes"))
		return err == nil
	}
	own, err := cgroups.ParseCgroupFile(filepath.Join(h.procRoot, "self", "cgroup"))
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(h.v2Mount, own[""], "memory.swap.max"))
	return err == nil
}

// NodeUsage is the node's CPU time and memory: its root cgroup, read as
// cAdvisor reads its root container "/" for the kubelet's summary and
// resource metrics (cadvisor container/libcontainer GetStats and
// setMemoryStats, over opencontainers/cgroups' fs and fs2 statistics).
// The CPU and the memory are read apart: one the kernel cannot give
// leaves the other.
type NodeUsage struct {
	// CPU is the cumulative CPU time of the node in nanoseconds: v1
	// cpuacct.usage; v2 usage_usec of the root's cpu.stat × 1000 (the
	// library's CpuUsage.TotalUsage).
	CPU    uint64
	CPUErr error
	// Memory is the node's memory; MemoryErr says why there is none.
	Memory    NodeMemory
	MemoryErr error
}

// NodeMemory is cAdvisor's Memory of the root container: Usage,
// WorkingSet, RSS and ContainerData.Pgfault and Pgmajfault.
//
//	            cgroup v1 (the memory hierarchy's root)     cgroup v2 (the unified root)
//	Usage       memory.usage_in_bytes                       memory.current; the root has none:
//	                                                        anon + file of memory.stat (the
//	                                                        library's rootStatsFromMeminfo, which
//	                                                        v1's usage_in_bytes equals: rss + cache)
//	WorkingSet  Usage - total_inactive_file                 Usage - inactive_file (never below 0)
//	RSS         total_rss (rss without use_hierarchy)       anon
//	PageFaults  pgfault, pgmajfault of memory.stat          pgfault, pgmajfault of memory.stat
//
// The node's memory.available is the machine's MemTotal (/proc/meminfo)
// less WorkingSet: cAdvisor's root container has the machine's memory as
// its limit, and the kubelet's summary makes available = limit - working
// set (nodeapi/stats, with nodestatus.MemoryCapacity).
type NodeMemory struct {
	Usage, WorkingSet, RSS, PageFaults, MajorPageFaults uint64
}

// NodeUsage reads the root cgroup's CPU time and memory.
func (h *Host) NodeUsage() NodeUsage {
	var u NodeUsage
	if h.v2 {
		dir := h.rootDir("")
		u.CPU, u.CPUErr = readUsageUsec(dir)
		u.Memory, u.MemoryErr = readRootMemoryV2(dir)
		return u
	}
	if dir := h.rootDir("cpuacct"); dir == "" {
		u.CPUErr = errors.New("no cpuacct hierarchy")
	} else {
		u.CPU, u.CPUErr = fscommon.GetCgroupParamUint(dir, "cpuacct.usage")
	}
	if dir := h.rootDir("memory"); dir == "" {
		u.MemoryErr = errors.New("no memory hierarchy")
	} else {
		u.Memory, u.MemoryErr = readRootMemoryV1(dir)
	}
	return u
}

// readUsageUsec is usage_usec of dir's cpu.stat in nanoseconds.
func readUsageUsec(dir string) (uint64, error) {
	stat, err := readKeyValues(dir, "cpu.stat")
	if err != nil {
		return 0, err
	}
	usec, ok := stat["usage_usec"]
	if !ok {
		return 0, fmt.Errorf("%s: no usage_usec", filepath.Join(dir, "cpu.stat"))
	}
	return usec * 1000, nil
}

func readRootMemoryV1(dir string) (NodeMemory, error) {
	var m NodeMemory
	usage, err := fscommon.GetCgroupParamUint(dir, "memory.usage_in_bytes")
	if err != nil {
		return m, err
	}
	stat, err := readKeyValues(dir, "memory.stat")
	if err != nil {
		return m, err
	}
	inactive, ok := stat["total_inactive_file"]
	if !ok {
		return m, fmt.Errorf("%s: no total_inactive_file", filepath.Join(dir, "memory.stat"))
	}
	m.Usage, m.WorkingSet = usage, workingSet(usage, inactive)
	m.RSS = stat["total_rss"]
	if b, err := os.ReadFile(filepath.Join(dir, "memory.use_hierarchy")); err == nil && strings.TrimSpace(string(b)) == "0" {
		m.RSS = stat["rss"]
	}
	m.PageFaults, m.MajorPageFaults = stat["pgfault"], stat["pgmajfault"]
	return m, nil
}

func readRootMemoryV2(dir string) (NodeMemory, error) {
	var m NodeMemory
	stat, err := readKeyValues(dir, "memory.stat")
	if err != nil {
		return m, err
	}
	inactive, ok := stat["inactive_file"]
	if !ok {
		return m, fmt.Errorf("%s: no inactive_file", filepath.Join(dir, "memory.stat"))
	}
	usage, err := fscommon.GetCgroupParamUint(dir, "memory.current")
	if errors.Is(err, os.ErrNotExist) {
		// The root cgroup: no memory.current (nor max, nor peak).
		usage, err = stat["anon"]+stat["file"], nil
	}
	if err != nil {
		return m, err
	}
	m.Usage, m.WorkingSet, m.RSS = usage, workingSet(usage, inactive), stat["anon"]
	m.PageFaults, m.MajorPageFaults = stat["pgfault"], stat["pgmajfault"]
	return m, nil
}

// workingSet is usage less the inactive file pages, never below 0
// (cAdvisor's).
func workingSet(usage, inactive uint64) uint64 {
	if inactive > usage {
		return 0
	}
	return usage - inactive
}

// readKeyValues reads a flat keyed file of "key value" lines
// (memory.stat, cpu.stat).
func readKeyValues(dir, file string) (map[string]uint64, error) {
	f, err := cgroups.OpenFile(dir, file, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if sc.Text() == "" {
			continue
		}
		k, v, err := fscommon.ParseKeyValue(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, file), err)
		}
		out[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, file), err)
	}
	return out, nil
}
