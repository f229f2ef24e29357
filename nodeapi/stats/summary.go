package stats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// /stats/summary in the kubelet's shape (k8s.io/kubelet/pkg/apis/stats/
// v1alpha1): the node's CPU (time and rate) and memory (usage, working
// set, RSS, page faults) from its root cgroup, its filesystem (statfs of
// crivk's root dir) and the runtime's image filesystem (CRI
// ImageFsInfo); per pod, the running containers' CPU, memory and
// writable layer from CRI ListContainerStats (crivk's containers only),
// summed for the pod as the kubelet's CRI stats provider sums them; the
// pod's network (the default interface and all of them) from CRI
// ListPodSandboxStats, which containerd answers for sandboxes with a
// cgroup parent (pod cgroups, package cm); the pod's volumes that crivk
// keeps (emptyDir, configMap, secret, downwardAPI, projected) measured
// as the kubelet's du-based metrics, at most once a minute
// (volumestats.go); the containers' log files and the pod's ephemeral
// storage as the kubelet counts it (ephemeral.go); the node's process
// limit and count (Rlimit, the pid.available signal); the "pods" system
// container, kubepods' memory (the allocatableMemory.available signal)
// and CPU; per pod, the processes of its running containers
// (process_stats, the sum of each container cgroup's cgroup.procs lines,
// as cAdvisor counts them for the kubelet: the sandbox's pause process
// is not counted); with Config.Cgroups, the node's, pods' and containers'
// swap, as the kubelet's from cAdvisor (swap.go).

type summary struct {
	runtime     containerStatsSource
	imageFs     func(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
	node        func() nodeUsage
	nodeName    string
	rootDir     string
	memCapacity func() (int64, error)
	started     time.Time
	// volumes measures the pods' volumes (nil: no volume stats).
	volumes *volumeStats
	// podLogDir holds the pods' log directories (the containers' Logs);
	// "": no log stats.
	podLogDir string
	// processes counts a container's processes (nil: no process stats).
	processes Processes
	// podsCgroup reads kubepods, the "pods" system container (nil: none).
	podsCgroup PodsCgroup
	// rlimit reads the node's process limit and count (nil: none).
	rlimit func(at metav1.Time) *statsapi.RlimitStats
	// sandboxes lists the pods' sandbox stats (nil: no network stats;
	// New sets it only with pod cgroups).
	sandboxes func(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error)
	// owned selects the node's own containers and sandboxes
	// (Config.Owned; nil: every crivk container).
	owned map[string]string
	// procRoot is where /proc is read: the node's network is init's
	// network namespace ("": no node network).
	procRoot string
	// rates turns the node's and kubepods' CPU times into UsageNanoCores
	// (nil: none reported).
	rates *cpuRates
	// swap reads the node's, pods' and containers' swap (nil: none
	// reported, without Config.Cgroups).
	swap *swapReader
}

func (s summary) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	out, err := s.get(ctx)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(out); err != nil {
		log.G(ctx).WithError(err).Warn("node API: writing /stats/summary")
	}
}

// get computes the summary: what /stats/summary serves and what the
// eviction manager observes (Handlers.Summarize).
func (s summary) get(ctx context.Context) (*statsapi.Summary, error) {
	managed := s.owned
	if managed == nil {
		managed = cri.OwnedSelector("")
	}
	stats, err := s.runtime.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{LabelSelector: managed})
	if err != nil {
		return nil, fmt.Errorf("failed to list container stats: %w", err)
	}
	containers, err := s.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}, LabelSelector: managed,
	})
	if err != nil {
		return nil, fmt.Errorf("failed to list containers: %w", err)
	}
	sandboxes := s.sandboxStats(ctx, managed, containers)
	swap := s.swap.read(ctx, stats, containers)
	out := statsapi.Summary{Node: s.nodeStats(ctx), Pods: podStats(stats, containers, swap)}
	out.Node.Swap = swap.node
	s.addProcesses(ctx, out.Pods, stats, containers)
	addNetwork(out.Pods, sandboxes)
	live := map[string]bool{}
	for i := range out.Pods {
		p := &out.Pods[i]
		live[p.PodRef.UID] = true
		p.VolumeStats = s.volumes.forPod(p.PodRef.UID)
		addLogs(p, s.podLogDir, out.Node.Fs)
		addEphemeralVolumes(p, s.volumes.localEphemeral(p.PodRef.UID))
		if e, fs := p.EphemeralStorage, out.Node.Fs; e != nil && fs != nil {
			// The kubelet's makePodStorageStats: the root filesystem's
			// capacity, available bytes and inodes.
			e.CapacityBytes, e.AvailableBytes, e.Inodes, e.InodesFree = fs.CapacityBytes, fs.AvailableBytes, fs.Inodes, fs.InodesFree
		}
	}
	s.volumes.prune(live)
	return &out, nil
}

func (s summary) nodeStats(ctx context.Context) statsapi.NodeStats {
	u := s.node()
	now := metav1.NewTime(u.at)
	n := statsapi.NodeStats{NodeName: s.nodeName, StartTime: metav1.NewTime(s.started)}
	if u.cpuErr == nil {
		ns := uint64(u.cpuSeconds * 1e9)
		n.CPU = &statsapi.CPUStats{Time: now, UsageCoreNanoSeconds: &ns, UsageNanoCores: s.rates.nanoCores("/", u.at, ns)}
	}
	if u.memError == nil {
		ws, usage, rss, faults, major := u.workingSetBytes, u.usageBytes, u.rssBytes, u.pageFaults, u.majorPageFaults
		n.Memory = &statsapi.MemoryStats{Time: now, WorkingSetBytes: &ws, UsageBytes: &usage, RSSBytes: &rss,
			PageFaults: &faults, MajorPageFaults: &major}
		if capacity, err := s.memCapacity(); err == nil {
			// cAdvisor's: the capacity less the working set, never below 0.
			var avail uint64
			if uint64(capacity) > ws {
				avail = uint64(capacity) - ws
			}
			n.Memory.AvailableBytes = &avail
		}
	}
	n.Fs = statfs(s.rootDir, now)
	if s.rlimit != nil {
		n.Rlimit = s.rlimit(now)
	}
	if fs, err := imageFsStats(ctx, s.imageFs, now); err == nil {
		// The kubelet's CRI stats provider (ImageFsStats): the
		// containers' filesystem is the image filesystem while the
		// runtime does not split them.
		n.Runtime = &statsapi.RuntimeStats{ImageFs: fs, ContainerFs: fs}
	}
	if s.procRoot != "" {
		if ifaces, err := readNetDev(s.procRoot, 1); err == nil {
			n.Network = nodeNetwork(ifaces, now)
		} else {
			log.G(ctx).WithError(err).Debug("node API: no node network for /stats/summary")
		}
	}
	if s.podsCgroup != nil {
		if c, err := podsContainer(ctx, s.podsCgroup, s.rates, now, metav1.NewTime(s.started)); err == nil {
			n.SystemContainers = append(n.SystemContainers, c)
		} else {
			// As the kubelet: a system container it cannot read is left out.
			log.G(ctx).WithError(err).Warn("node API: failed to get system container stats of pods")
		}
	}
	return n
}

// nodeNetwork is the node's network as the kubelet gives cAdvisor's root
// container's (cadvisorInfoToNetworkStats): every interface cAdvisor
// keeps (readNetDev), and the one named eth0 as the default interface
// (none when no interface is named so).
func nodeNetwork(ifaces []netIface, at metav1.Time) *statsapi.NetworkStats {
	n := &statsapi.NetworkStats{Time: at, Interfaces: []statsapi.InterfaceStats{}}
	for _, it := range ifaces {
		rx, rxErr, tx, txErr := it.rxBytes, it.rxErrors, it.txBytes, it.txErrors
		st := statsapi.InterfaceStats{Name: it.name, RxBytes: &rx, RxErrors: &rxErr, TxBytes: &tx, TxErrors: &txErr}
		if it.name == "eth0" {
			n.InterfaceStats = st
		}
		n.Interfaces = append(n.Interfaces, st)
	}
	return n
}

// podsContainer is the summary's "pods" system container: the
// node-allocatable cgroup (kubepods) as the kubelet's cAdvisor stats give
// it (cadvisorInfoToCPUandMemoryStats). Memory: usage; working set;
// available = limit - working set, only when the cgroup has a limit,
// never below 0; RSS (total_rss on v1, anon on v2) and the cgroup's own
// pgfault and pgmajfault, as cAdvisor's setMemoryStats. CPU: the
// cumulative time (cpuacct.usage) and its rate (rates, 0 until two
// samples). Without the memory figures there is no container (as the
// kubelet leaves out one it cannot read); without the sample, no CPU,
// RSS or page faults. No filesystem or logs figures; its start time is
// crivk's, which made the cgroup.
func podsContainer(ctx context.Context, c PodsCgroup, rates *cpuRates, at, started metav1.Time) (statsapi.ContainerStats, error) {
	usage, ws, limit, err := c.PodsMemory()
	if err != nil {
		return statsapi.ContainerStats{}, err
	}
	mem := &statsapi.MemoryStats{Time: at, UsageBytes: &usage, WorkingSetBytes: &ws}
	if limit > 0 {
		var avail uint64
		if limit > ws {
			avail = limit - ws
		}
		mem.AvailableBytes = &avail
	}
	out := statsapi.ContainerStats{Name: statsapi.SystemContainerPods, StartTime: started, Memory: mem}
	cg, err := c.PodsCgroupSample()
	if err != nil {
		log.G(ctx).WithError(err).Debug("node API: no CPU or RSS of the pods system container")
		return out, nil
	}
	if cg.Spec.HasCPU {
		ns := cg.Stats.CpuStats.CpuUsage.TotalUsage
		out.CPU = &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: &ns, UsageNanoCores: rates.nanoCores(cg.Name, at.Time, ns)}
	}
	if cg.Spec.HasMemory {
		rss := sampleMemoryStat(cg, "rss", "anon")
		faults, major := cg.Stats.MemoryStats.Stats["pgfault"], cg.Stats.MemoryStats.Stats["pgmajfault"]
		mem.RSSBytes, mem.PageFaults, mem.MajorPageFaults = &rss, &faults, &major
	}
	return out, nil
}

// ImageFsStats is the runtime's image filesystem as /stats/summary
// reports it: capacity and available bytes and inodes from statfs of the
// mountpoint the runtime names (CRI ImageFsInfo), used bytes and inodes as
// the runtime counts them. The image garbage collector reads its capacity
// and available bytes, as the kubelet's reads its stats provider's
// ImageFsStats.
func ImageFsStats(ctx context.Context, fs ImageFs) (*statsapi.FsStats, error) {
	return imageFsStats(ctx, fs.ImageFsInfo, metav1.Now())
}

func imageFsStats(ctx context.Context, imageFs func(context.Context) (*runtimeapi.ImageFsInfoResponse, error), now metav1.Time) (*statsapi.FsStats, error) {
	info, err := imageFs(ctx)
	if err != nil {
		return nil, err
	}
	if len(info.GetImageFilesystems()) == 0 {
		return nil, errors.New("the runtime reports no image filesystem")
	}
	img := info.GetImageFilesystems()[0]
	fs := statfs(img.GetFsId().GetMountpoint(), now)
	if fs == nil {
		fs = &statsapi.FsStats{Time: now}
	}
	if v := img.GetUsedBytes(); v != nil {
		used := v.GetValue()
		fs.UsedBytes = &used
	}
	if v := img.GetInodesUsed(); v != nil {
		used := v.GetValue()
		fs.InodesUsed = &used
	}
	return fs, nil
}

// statfs is the filesystem holding path; nil if it cannot be read.
func statfs(path string, at metav1.Time) *statsapi.FsStats {
	var st unix.Statfs_t
	if path == "" || unix.Statfs(path, &st) != nil {
		return nil
	}
	bsize := uint64(st.Bsize)
	capacity, avail := st.Blocks*bsize, st.Bavail*bsize
	used := (st.Blocks - st.Bfree) * bsize
	inodes, free := st.Files, st.Ffree
	inodesUsed := inodes - free
	return &statsapi.FsStats{Time: at, CapacityBytes: &capacity, AvailableBytes: &avail, UsedBytes: &used,
		Inodes: &inodes, InodesFree: &free, InodesUsed: &inodesUsed}
}

// podStats groups the running containers' stats by pod, with the pod's
// sums, and the pods' and containers' swap figures.
func podStats(stats []*runtimeapi.ContainerStats, running []*runtimeapi.Container, swap swapFigures) []statsapi.PodStats {
	created := map[string]int64{}
	for _, c := range running {
		created[c.GetId()] = c.GetCreatedAt()
	}
	byUID := map[string]*statsapi.PodStats{}
	for _, s := range stats {
		a := s.GetAttributes()
		at, ok := created[a.GetId()]
		if !ok {
			continue
		}
		l := a.GetLabels()
		uid := l[cri.LabelPodUID]
		p := byUID[uid]
		if p == nil {
			p = &statsapi.PodStats{PodRef: statsapi.PodReference{Name: l[cri.LabelPodName], Namespace: l[cri.LabelPodNamespace], UID: uid},
				StartTime: metav1.NewTime(time.Unix(0, at)), Swap: swap.pods[uid]}
			byUID[uid] = p
		}
		c := statsapi.ContainerStats{Name: l[cri.LabelContainerName], StartTime: metav1.NewTime(time.Unix(0, at))}
		c.CPU, c.Memory, c.Swap = containerCPU(s.GetCpu()), containerMemory(s.GetMemory()), swap.containers[a.GetId()]
		p.CPU, p.Memory = addCPU(p.CPU, c.CPU), addMemory(p.Memory, c.Memory)
		if wl := s.GetWritableLayer(); wl != nil && wl.GetUsedBytes() != nil {
			n := wl.GetUsedBytes().GetValue()
			c.Rootfs = writableLayer(wl)
			var inodes uint64
			if c.Rootfs.InodesUsed != nil {
				inodes = *c.Rootfs.InodesUsed
			}
			addEphemeral(p, c.Rootfs.Time, n, inodes)
		}
		p.Containers = append(p.Containers, c)
	}
	out := make([]statsapi.PodStats, 0, len(byUID))
	for _, p := range byUID {
		sort.Slice(p.Containers, func(i, j int) bool { return p.Containers[i].Name < p.Containers[j].Name })
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].PodRef.Namespace+"/"+out[i].PodRef.Name < out[j].PodRef.Namespace+"/"+out[j].PodRef.Name
	})
	return out
}

// addProcesses sets each pod's process_stats: the sum of its running
// containers' process counts, as the kubelet's CRI stats provider sums
// cAdvisor's (mergeProcessStats). A container whose count cannot be read
// adds nothing; a pod with none read has no process_stats.
func (s summary) addProcesses(ctx context.Context, pods []statsapi.PodStats, stats []*runtimeapi.ContainerStats, running []*runtimeapi.Container) {
	if s.processes == nil {
		return
	}
	isRunning := map[string]bool{}
	for _, c := range running {
		isRunning[c.GetId()] = true
	}
	counts := map[string]uint64{}
	counted := map[string]bool{}
	for _, st := range stats {
		a := st.GetAttributes()
		if !isRunning[a.GetId()] {
			continue
		}
		uid := a.GetLabels()[cri.LabelPodUID]
		n, err := s.processes.ContainerProcesses(types.UID(uid), a.GetId())
		if err != nil {
			log.G(ctx).WithError(err).WithField("container", a.GetId()).Debug("node API: no process count for /stats/summary")
			continue
		}
		counts[uid] += n
		counted[uid] = true
	}
	for i := range pods {
		if uid := pods[i].PodRef.UID; counted[uid] {
			n := counts[uid]
			pods[i].ProcessStats = &statsapi.ProcessStats{ProcessCount: &n}
		}
	}
}

// sandboxStats is the sandbox stats of the running containers' pods.
// Network stats are a plus: a runtime that cannot give them leaves them
// out, as the kubelet's CRI stats provider. containerd fails the whole
// list when one sandbox's metrics fail (a pod being torn down, its
// cgroup gone): the sandboxes of the running containers are then asked
// one by one, so one pod's teardown does not take every pod's network
// figures away.
func (s summary) sandboxStats(ctx context.Context, managed map[string]string, running []*runtimeapi.Container) []*runtimeapi.PodSandboxStats {
	if s.sandboxes == nil {
		return nil
	}
	all, err := s.sandboxes(ctx, &runtimeapi.PodSandboxStatsFilter{LabelSelector: managed})
	if err == nil {
		return all
	}
	log.G(ctx).WithError(err).Debug("node API: listing the pod sandbox stats failed; asking for each running pod's sandbox")
	var out []*runtimeapi.PodSandboxStats
	asked := map[string]bool{}
	for _, c := range running {
		id := c.GetPodSandboxId()
		if id == "" || asked[id] {
			continue
		}
		asked[id] = true
		one, err := s.sandboxes(ctx, &runtimeapi.PodSandboxStatsFilter{Id: id, LabelSelector: managed})
		if err != nil {
			log.G(ctx).WithError(err).WithField("podSandboxID", id).Debug("node API: no pod sandbox stats for /stats/summary")
			continue
		}
		out = append(out, one...)
	}
	return out
}

// addNetwork sets each pod's network stats from its sandbox's.
func addNetwork(pods []statsapi.PodStats, sandboxes []*runtimeapi.PodSandboxStats) {
	byUID := map[string]*runtimeapi.NetworkUsage{}
	for _, sb := range sandboxes {
		if n := sb.GetLinux().GetNetwork(); n != nil {
			byUID[sb.GetAttributes().GetMetadata().GetUid()] = n
		}
	}
	for i := range pods {
		n := byUID[pods[i].PodRef.UID]
		if n == nil {
			continue
		}
		ns := &statsapi.NetworkStats{Time: metav1.NewTime(time.Unix(0, n.GetTimestamp()))}
		if d := n.GetDefaultInterface(); d != nil {
			ns.InterfaceStats = interfaceStats(d)
		}
		for _, it := range n.GetInterfaces() {
			ns.Interfaces = append(ns.Interfaces, interfaceStats(it))
		}
		pods[i].Network = ns
	}
}

func interfaceStats(it *runtimeapi.NetworkInterfaceUsage) statsapi.InterfaceStats {
	val := func(v *runtimeapi.UInt64Value) *uint64 {
		if v == nil {
			return nil
		}
		x := v.GetValue()
		return &x
	}
	return statsapi.InterfaceStats{Name: it.GetName(), RxBytes: val(it.GetRxBytes()), RxErrors: val(it.GetRxErrors()),
		TxBytes: val(it.GetTxBytes()), TxErrors: val(it.GetTxErrors())}
}

// writableLayer is a container's Rootfs: the layer's used bytes and
// inodes as the runtime counts them, and the capacity, available bytes
// and inodes of the filesystem holding it (statfs of the mountpoint the
// runtime names), as the kubelet's CRI stats provider gives them from
// that filesystem's info; without a mountpoint, the used figures only.
func writableLayer(wl *runtimeapi.FilesystemUsage) *statsapi.FsStats {
	at := metav1.NewTime(time.Unix(0, wl.GetTimestamp()))
	fs := &statsapi.FsStats{Time: at}
	if mp := wl.GetFsId().GetMountpoint(); mp != "" {
		if st := statfs(mp, at); st != nil {
			fs.CapacityBytes, fs.AvailableBytes, fs.Inodes, fs.InodesFree = st.CapacityBytes, st.AvailableBytes, st.Inodes, st.InodesFree
		}
	}
	fs.UsedBytes, fs.InodesUsed = criValue(wl.GetUsedBytes()), criValue(wl.GetInodesUsed())
	return fs
}

// containerCPU is a container's CPU as the runtime reports it; nil
// without a report.
func containerCPU(cpu *runtimeapi.CpuUsage) *statsapi.CPUStats {
	if cpu == nil {
		return nil
	}
	return &statsapi.CPUStats{Time: metav1.NewTime(time.Unix(0, cpu.GetTimestamp())),
		UsageCoreNanoSeconds: criValue(cpu.GetUsageCoreNanoSeconds()), UsageNanoCores: criValue(cpu.GetUsageNanoCores())}
}

// containerMemory is a container's memory as the runtime reports it (the
// kubelet's CRI stats provider copies the same five figures; containerd
// reads them from the container's cgroup); nil without a report.
func containerMemory(mem *runtimeapi.MemoryUsage) *statsapi.MemoryStats {
	if mem == nil {
		return nil
	}
	return &statsapi.MemoryStats{Time: metav1.NewTime(time.Unix(0, mem.GetTimestamp())),
		WorkingSetBytes: criValue(mem.GetWorkingSetBytes()), UsageBytes: criValue(mem.GetUsageBytes()),
		AvailableBytes: criValue(mem.GetAvailableBytes()), RSSBytes: criValue(mem.GetRssBytes()),
		PageFaults: criValue(mem.GetPageFaults()), MajorPageFaults: criValue(mem.GetMajorPageFaults())}
}

func criValue(v *runtimeapi.UInt64Value) *uint64 {
	if v == nil {
		return nil
	}
	x := v.GetValue()
	return &x
}

// addCPU adds a container's CPU to its pod's sum, as the kubelet's CRI
// stats provider sums them when cAdvisor has no pod cgroup
// (addPodCPUMemoryStats): a figure the container lacks adds 0, and the
// pod's time is its last container's.
func addCPU(sum, c *statsapi.CPUStats) *statsapi.CPUStats {
	if c == nil {
		return sum
	}
	if sum == nil {
		sum = &statsapi.CPUStats{}
	}
	sum.Time = c.Time
	sum.UsageCoreNanoSeconds = plus(sum.UsageCoreNanoSeconds, c.UsageCoreNanoSeconds)
	sum.UsageNanoCores = plus(sum.UsageNanoCores, c.UsageNanoCores)
	return sum
}

// addMemory adds a container's memory to its pod's sum, as addCPU.
func addMemory(sum, c *statsapi.MemoryStats) *statsapi.MemoryStats {
	if c == nil {
		return sum
	}
	if sum == nil {
		sum = &statsapi.MemoryStats{}
	}
	sum.Time = c.Time
	sum.AvailableBytes = plus(sum.AvailableBytes, c.AvailableBytes)
	sum.UsageBytes = plus(sum.UsageBytes, c.UsageBytes)
	sum.WorkingSetBytes = plus(sum.WorkingSetBytes, c.WorkingSetBytes)
	sum.RSSBytes = plus(sum.RSSBytes, c.RSSBytes)
	sum.PageFaults = plus(sum.PageFaults, c.PageFaults)
	sum.MajorPageFaults = plus(sum.MajorPageFaults, c.MajorPageFaults)
	return sum
}

// plus is a + b, a nil one counting 0; never nil.
func plus(a, b *uint64) *uint64 {
	var x uint64
	if a != nil {
		x += *a
	}
	if b != nil {
		x += *b
	}
	return &x
}
