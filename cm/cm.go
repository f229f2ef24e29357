package cm

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/crivk/crivk/podutil"
	"github.com/opencontainers/cgroups"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
)

const (
	// podsCgroup is the kubelet's "kubepods", the parent of every pod cgroup.
	podsCgroup = "kubepods"
	// podPrefix starts a pod cgroup's name: pod<uid>.
	podPrefix = "pod"
	// quotaPeriod is the CFS period of pod cgroups in microseconds (100 ms).
	quotaPeriod = 100000
	// unifiedMount is where cgroup v2 is mounted.
	unifiedMount = "/sys/fs/cgroup"
)

// Config configures the Manager.
type Config struct {
	// Root is the cgroup (within each hierarchy) under which kubepods is
	// created, "/" by default (--cgroup-root).
	Root string
	// PodsCPUMilli and PodsMemory bound every pod together: the kubepods
	// cgroup's CPU shares and memory limit (the node's capacity minus the
	// system and kube reservations). 0: no bound.
	PodsCPUMilli int64
	PodsMemory   int64
	// PodsPIDs bounds the processes of every pod together: the kubepods
	// cgroup's pids.max (the node's pid capacity, MaxPID, minus the pid
	// reservations), as the kubelet's node allocatable cgroup. 0: no bound.
	PodsPIDs int64
	// PodPidsLimit is each pod cgroup's pids.max (--pod-max-pids, the
	// kubelet's podPidsLimit); 0 or less: none, the pod is bounded by
	// kubepods only.
	PodPidsLimit int64

	// Host is the machine's cgroup filesystem (its version and mounts);
	// nil: DetectHost. Unit tests give a temporary tree (NewHost).
	Host *Host
}

// Manager keeps the node's pod cgroups; see the package documentation.
type Manager struct {
	cfg  Config
	host *Host
	root string // cleaned, absolute
	// pids tells whether the pids controller is there: without it no
	// pids.max is written (kubepods), and --pod-max-pids is refused.
	pids bool

	mu sync.Mutex
	// burstable holds the CPU request (millicores) of every Burstable pod
	// with a cgroup: the Burstable QoS cgroup's shares are their sum.
	burstable map[types.UID]int64
	// applied is, per pod, the cgroup EnsurePod last created or set and
	// the values it wrote: as the kubelet's EnsureExists, a pod whose
	// cgroup exists with those values is not written again at every sync
	// (a pod syncs several times while it starts; each write is dozens of
	// cgroupfs calls). Guarded by mu.
	applied map[types.UID]appliedCgroup
}

// appliedCgroup is the pod cgroup EnsurePod made: its name, the values
// written and the library's paths of it (one per hierarchy on v1).
type appliedCgroup struct {
	name  string
	res   cgroups.Resources
	paths []string
}

// New returns a Manager for cfg, on the machine's cgroups unless cfg
// gives a Host.
func New(cfg Config) (*Manager, error) {
	root := cfg.Root
	if root == "" {
		root = "/"
	}
	if !path.IsAbs(root) {
		return nil, fmt.Errorf("cgroup root %q is not an absolute path", cfg.Root)
	}
	host := cfg.Host
	if host == nil {
		host = DetectHost()
	}
	m := &Manager{cfg: cfg, host: host, root: path.Clean(root), burstable: map[types.UID]int64{}, applied: map[types.UID]appliedCgroup{}}
	m.pids = host.hasController("pids")
	if cfg.PodPidsLimit > 0 && !m.pids {
		return nil, errors.New("--pod-max-pids needs the pids cgroup controller, which this node does not have")
	}
	return m, nil
}

// Version is 1 or 2, the cgroup version in use.
func (m *Manager) Version() int { return m.host.Version() }

// Root is the cgroup root, cleaned.
func (m *Manager) Root() string { return m.root }

// qosCgroup names the cgroup a pod of class q lives in.
func (m *Manager) qosCgroup(q v1.PodQOSClass) string {
	switch q {
	case v1.PodQOSBurstable:
		return path.Join(m.root, podsCgroup, "burstable")
	case v1.PodQOSBestEffort:
		return path.Join(m.root, podsCgroup, "besteffort")
	default:
		return path.Join(m.root, podsCgroup)
	}
}

// PodCgroup is the pod's cgroup name, e.g. /kubepods/burstable/pod<uid>:
// the cgroup parent of its sandbox (cgroupfs driver).
func (m *Manager) PodCgroup(pod *v1.Pod) string {
	return path.Join(m.qosCgroup(podutil.QOSClass(pod)), podPrefix+string(pod.UID))
}

// Start creates kubepods and the two QoS cgroups with their values.
func (m *Manager) Start() error {
	pods := &cgroups.Resources{SkipDevices: true, CpuShares: uint64(podutil.MilliCPUToShares(m.cfg.PodsCPUMilli)), Memory: m.cfg.PodsMemory,
		PidsLimit: max(m.cfg.PodsPIDs, 0)}
	if !m.pids {
		pods.PidsLimit = 0
	}
	if m.cfg.PodsCPUMilli == 0 {
		pods.CpuShares = 0
	}
	if _, err := m.ensure(path.Join(m.root, podsCgroup), pods); err != nil {
		return err
	}
	if _, err := m.ensure(m.qosCgroup(v1.PodQOSBestEffort), &cgroups.Resources{SkipDevices: true, CpuShares: podutil.MinShares}); err != nil {
		return err
	}
	return m.updateBurstable()
}

// Join puts process pid into the cgroup <root>/<name> in every hierarchy,
// creating it. `crivk runtime` (charts/crivk) puts itself into
// <root>/runtime before it starts crivk's containerd, so that the
// containerd and its shims, which inherit the cgroup, live beside kubepods
// and not in the cgroup of the pod that started them (docs/coexistence.md).
func (m *Manager) Join(name string, pid int) error {
	full := path.Join(m.root, name)
	// Every hierarchy, devices included (v1): the kubelet kills what is
	// left in any hierarchy of a pod cgroup it removes. Apply only creates
	// the cgroup and moves the process; no device rule is written, so the
	// new devices cgroup keeps its parent's (the root's: all devices).
	mgr, err := m.manager(full, &cgroups.Resources{})
	if err != nil {
		return err
	}
	if m.host.fake() {
		// Not a cgroup2 filesystem (unit tests): do what fs2 would.
		if err := os.MkdirAll(mgr.Path(""), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(mgr.Path(""), "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
	}
	if err := mgr.Apply(pid); err != nil {
		return fmt.Errorf("moving process %d to cgroup %s: %w", pid, full, err)
	}
	return nil
}

// updateBurstable sets the Burstable QoS cgroup's shares to the sum of its
// pods' CPU requests (the kubelet's qosContainerManager).
func (m *Manager) updateBurstable() error {
	m.mu.Lock()
	var milli int64
	for _, v := range m.burstable {
		milli += v
	}
	m.mu.Unlock()
	_, err := m.ensure(m.qosCgroup(v1.PodQOSBurstable), &cgroups.Resources{SkipDevices: true, CpuShares: uint64(podutil.MilliCPUToShares(milli))})
	return err
}

// PodResources is the kubelet's ResourceConfigForPod (PodLevelResources on)
// on a cgroup v1 node with the CFS quota enforced, as opencontainers/cgroups
// resources. The requests and limits are component-helpers' PodRequests
// and PodLimits: a pod-level value (spec.resources) replaces the
// containers' sum for its resource, and the overhead is added (to the
// limits only where they are set). A limit is declared, and so written,
// when every container, init containers and sidecars included, sets it in
// its own spec (v1.37: each container's own limits, no longer the
// cumulative limits PodLimits passed to its ContainerFn, now removed), or
// the pod sets it at pod level: a pod-level request alone leaves the
// containers' limits in force.
func PodResources(pod *v1.Pod) *cgroups.Resources {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	lims := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	cpuLimits, memLimits := true, true
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if cs[i].Resources.Limits.Cpu().IsZero() {
				cpuLimits = false
			}
			if cs[i].Resources.Limits.Memory().IsZero() {
				memLimits = false
			}
		}
	}
	if resourcehelper.IsPodLevelResourcesSet(pod) {
		if !pod.Spec.Resources.Limits.Cpu().IsZero() {
			cpuLimits = true
		}
		if !pod.Spec.Resources.Limits.Memory().IsZero() {
			memLimits = true
		}
	}
	r := &cgroups.Resources{SkipDevices: true, CpuShares: uint64(podutil.MilliCPUToShares(reqs.Cpu().MilliValue()))}
	switch podutil.QOSClass(pod) {
	case v1.PodQOSBestEffort:
		r.CpuShares = podutil.MinShares
		return r
	case v1.PodQOSGuaranteed:
		cpuLimits, memLimits = true, true
	}
	if cpuLimits {
		r.CpuQuota = podutil.MilliCPUToQuota(lims.Cpu().MilliValue(), quotaPeriod)
		r.CpuPeriod = quotaPeriod
	}
	if memLimits {
		r.Memory = lims.Memory().Value()
	}
	return r
}

// podResources are the values EnsurePod writes on the pod's cgroup:
// PodResources and, when --pod-max-pids is positive, its pids.max (the
// kubelet's podContainerManager.EnsureExists).
func (m *Manager) podResources(pod *v1.Pod) *cgroups.Resources {
	r := PodResources(pod)
	if m.cfg.PodPidsLimit > 0 {
		r.PidsLimit = m.cfg.PodPidsLimit
	}
	return r
}

// EnsurePod creates the pod's cgroup with the values of its class, or sets
// them again; the Burstable QoS cgroup follows.
//
// A pod whose cgroup this Manager made, and whose directories all still
// exist, is left as it is, even when the pod's values changed: an
// in-place resize changes them through ResizePodCgroup, in the kubelet's
// order around its containers' (package cri's resize). After a restart
// (nothing made by this Manager yet) the pod's values are written, but
// for pids.max: a pod cgroup that exists keeps the one it was made with,
// as the kubelet writes podPidsLimit only when it creates the cgroup
// (EnsureExists leaves an existing one alone).
func (m *Manager) EnsurePod(pod *v1.Pod) error {
	name, res := m.PodCgroup(pod), m.podResources(pod)
	m.mu.Lock()
	prev, ok := m.applied[pod.UID]
	m.mu.Unlock()
	if ok && prev.name == name && allExist(prev.paths) {
		return nil
	}
	if !ok || prev.name != name || !reflect.DeepEqual(prev.res, *res) || !allExist(prev.paths) {
		if !ok && res.PidsLimit != 0 {
			if mgr, err := m.manager(name, &cgroups.Resources{SkipDevices: true}); err == nil && m.exists(mgr) {
				res.PidsLimit = 0
			}
		}
		want := *res
		mgr, err := m.ensure(name, res)
		if err != nil {
			return fmt.Errorf("pod cgroup %s: %w", name, err)
		}
		paths := make([]string, 0, len(mgr.GetPaths()))
		for _, p := range mgr.GetPaths() {
			paths = append(paths, p)
		}
		m.mu.Lock()
		m.applied[pod.UID] = appliedCgroup{name: name, res: want, paths: paths}
		m.mu.Unlock()
	}
	if podutil.QOSClass(pod) != v1.PodQOSBurstable {
		return nil
	}
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	req := reqs.Cpu().MilliValue()
	m.mu.Lock()
	prevReq, had := m.burstable[pod.UID]
	m.burstable[pod.UID] = req
	m.mu.Unlock()
	if had && prevReq == req {
		return nil
	}
	return m.updateBurstable()
}

// PodCgroupValues returns, for an in-place resize, the limit and request
// of resource the pod cgroup has (as this Manager last wrote them) and
// those of pod (its allocated spec): the CFS quota and the CPU shares, or
// the memory limit (request 0); a limit of 0 is none. The pod's cgroup
// must have been made (EnsurePod).
func (m *Manager) PodCgroupValues(pod *v1.Pod, resource v1.ResourceName) (curLimit, curRequest, wantLimit, wantRequest int64, err error) {
	m.mu.Lock()
	prev, ok := m.applied[pod.UID]
	m.mu.Unlock()
	if !ok {
		return 0, 0, 0, 0, fmt.Errorf("pod cgroup %s was not made by this agent", m.PodCgroup(pod))
	}
	want := PodResources(pod)
	switch resource {
	case v1.ResourceCPU:
		return prev.res.CpuQuota, int64(prev.res.CpuShares), want.CpuQuota, int64(want.CpuShares), nil
	case v1.ResourceMemory:
		return prev.res.Memory, 0, want.Memory, 0, nil
	}
	return 0, 0, 0, 0, fmt.Errorf("resource %q is not resizable", resource)
}

// ResizePodCgroup writes pod's CPU limit (quota and period) or request
// (shares, and the Burstable QoS cgroup's sum), or its memory limit, on
// its existing cgroup, and nothing else: one step of an in-place resize.
func (m *Manager) ResizePodCgroup(pod *v1.Pod, resource v1.ResourceName, limit bool) error {
	name, want := m.PodCgroup(pod), PodResources(pod)
	m.mu.Lock()
	prev, ok := m.applied[pod.UID]
	m.mu.Unlock()
	if !ok {
		return fmt.Errorf("pod cgroup %s was not made by this agent", name)
	}
	part := &cgroups.Resources{SkipDevices: true}
	next := prev.res
	switch {
	case resource == v1.ResourceCPU && limit:
		part.CpuQuota, part.CpuPeriod = want.CpuQuota, want.CpuPeriod
		next.CpuQuota, next.CpuPeriod = want.CpuQuota, want.CpuPeriod
	case resource == v1.ResourceCPU:
		part.CpuShares = want.CpuShares
		next.CpuShares = want.CpuShares
	case resource == v1.ResourceMemory && limit:
		part.Memory = want.Memory
		next.Memory = want.Memory
	default:
		return nil // a memory request is no cgroup value
	}
	if _, err := m.ensure(name, part); err != nil {
		return fmt.Errorf("resizing pod cgroup %s: %w", name, err)
	}
	m.mu.Lock()
	m.applied[pod.UID] = appliedCgroup{name: name, res: next, paths: prev.paths}
	_, burstable := m.burstable[pod.UID]
	if burstable {
		reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
		m.burstable[pod.UID] = reqs.Cpu().MilliValue()
	}
	m.mu.Unlock()
	if burstable && resource == v1.ResourceCPU && !limit {
		return m.updateBurstable()
	}
	return nil
}

// RemovePod kills what still runs in the pod's cgroup and removes it, in
// whichever QoS class it is (the pod may be unknown: an orphan found after
// a restart). Removing a cgroup that does not exist is no error.
func (m *Manager) RemovePod(uid types.UID) error {
	var errs []error
	for _, q := range []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		name := path.Join(m.qosCgroup(q), podPrefix+string(uid))
		mgr, err := m.manager(name, &cgroups.Resources{SkipDevices: true})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !m.exists(mgr) {
			continue
		}
		if err := killAll(mgr); err != nil {
			errs = append(errs, fmt.Errorf("pod cgroup %s: %w", name, err))
			continue
		}
		if err := mgr.Destroy(); err != nil {
			errs = append(errs, fmt.Errorf("removing pod cgroup %s: %w", name, err))
		}
	}
	m.mu.Lock()
	_, had := m.burstable[uid]
	delete(m.burstable, uid)
	delete(m.applied, uid)
	m.mu.Unlock()
	if had {
		errs = append(errs, m.updateBurstable())
	}
	return errors.Join(errs...)
}

// PodUIDs lists the pods that have a cgroup, by UID.
func (m *Manager) PodUIDs() ([]types.UID, error) {
	var uids []types.UID
	for _, q := range []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		dir, err := m.dir(m.qosCgroup(q))
		if err != nil {
			return nil, err
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return nil, err
		}
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), podPrefix) {
				uids = append(uids, types.UID(strings.TrimPrefix(e.Name(), podPrefix)))
			}
		}
	}
	return uids, nil
}

// ContainerProcesses counts the processes in a container's cgroup, below
// its pod's: cAdvisor's ProcessCount, the lines of the cgroup.procs of the
// container's cpu cgroup (v1) or of its unified cgroup (v2), which the
// kubelet sums per pod into /stats/summary's process_stats. containerd
// names a container's cgroup <pod cgroup>/<container ID> (cgroupfs
// driver). A pod with no cgroup, or a container with none, is an error
// wrapping os.ErrNotExist.
func (m *Manager) ContainerProcesses(podUID types.UID, containerID string) (uint64, error) {
	for _, pod := range m.podCgroupNames(podUID) {
		mgr, err := m.manager(path.Join(pod, containerID), &cgroups.Resources{SkipDevices: true})
		if err != nil {
			return 0, err
		}
		dir := mgr.Path("")
		if !m.host.v2 {
			dir = mgr.Path("cpu")
		}
		pids, err := cgroups.GetPids(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("processes of container %s of pod %s: %w", containerID, podUID, err)
		}
		return uint64(len(pids)), nil
	}
	return 0, fmt.Errorf("container %s of pod %s has no cgroup: %w", containerID, podUID, os.ErrNotExist)
}

// PodDir is the directory of the pod's cgroup in the memory hierarchy (v1)
// or the unified one (v2): where its limits can be read.
func (m *Manager) PodDir(pod *v1.Pod, controller string) (string, error) {
	mgr, err := m.manager(m.PodCgroup(pod), &cgroups.Resources{SkipDevices: true})
	if err != nil {
		return "", err
	}
	return mgr.Path(controller), nil
}

// ensure creates the named cgroup (and its parents) and sets r on it.
func (m *Manager) ensure(name string, r *cgroups.Resources) (cgroups.Manager, error) {
	mgr, err := m.manager(name, r)
	if err != nil {
		return nil, err
	}
	if m.host.fake() {
		// Not a cgroup2 filesystem (unit tests): fs2's Apply refuses
		// paths outside /sys/fs/cgroup.
		if err := os.MkdirAll(mgr.Path(""), 0o755); err != nil {
			return nil, err
		}
	} else if err := mgr.Apply(-1); err != nil {
		return nil, fmt.Errorf("creating cgroup %s: %w", name, err)
	}
	if m.host.v2 && r.CpuShares != 0 {
		// fs2 sets cpu.weight, not shares: converted as the kubelet v1.35
		// does (linearly), not with the library's newer curve.
		r.CpuWeight = cpuWeight(r.CpuShares)
	}
	if err := mgr.Set(r); err != nil {
		return nil, fmt.Errorf("setting cgroup %s: %w", name, err)
	}
	return mgr, nil
}

// cpuWeight is the kubelet's getCPUWeight: shares in [2, 262144] mapped
// linearly onto cgroup v2 weights in [1, 10000].
func cpuWeight(shares uint64) uint64 {
	if shares >= 262144 {
		return 10000
	}
	return 1 + ((shares-2)*9999)/262142
}

// manager returns the library's manager of the named cgroup.
func (m *Manager) manager(name string, r *cgroups.Resources) (cgroups.Manager, error) {
	return m.host.manager(name, r)
}

// dir is the named cgroup's directory in one hierarchy (memory on v1):
// enough to list its children.
func (m *Manager) dir(name string) (string, error) {
	mgr, err := m.manager(name, &cgroups.Resources{SkipDevices: true})
	if err != nil {
		return "", err
	}
	if m.host.v2 {
		return mgr.Path(""), nil
	}
	if p := mgr.Path("memory"); p != "" {
		return p, nil
	}
	return mgr.Path("cpu"), nil
}

// exists reports whether the cgroup exists in any of its hierarchies.
// allExist reports whether every one of paths exists (false for none).
func allExist(paths []string) bool {
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return len(paths) > 0
}

func (m *Manager) exists(mgr cgroups.Manager) bool {
	for _, p := range mgr.GetPaths() {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

// killAll SIGKILLs every process in the cgroup and below (the kubelet's
// tryKillingCgroupProcesses); processes already gone are no error.
func killAll(mgr cgroups.Manager) error {
	pids, err := mgr.GetAllPids()
	if err != nil {
		if os.IsNotExist(err) || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("listing its processes: %w", err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("killing process %d: %w", pid, err)
		}
	}
	return nil
}
