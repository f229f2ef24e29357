package eviction

import (
	"sort"

	evictionapi "github.com/crivk/crivk/eviction/api"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Ranking: which pod goes first for a starved resource, the kubelet's
// (helpers.go rankMemoryPressure, rankDiskPressureFunc, rankPIDPressure):
//
//	memory   1. usage above requests before usage within them
//	         2. lower priority first
//	         3. larger usage above requests first (working set - request)
//	disk     the same with the disk usage the signal's filesystem holds
//	         (bytes or inodes) and the ephemeral-storage request
//	pids     1. lower priority first  2. more processes first
//
// A pod without stats goes before those with stats at every step (it
// cannot be measured, and the kubelet prefers it).

// fsUsage names what a disk signal measures of a pod.
type fsUsage int

const (
	fsRoot        fsUsage = 1 << iota // the containers' writable layers
	fsLogs                            // the containers' logs
	fsLocalVolume                     // hostPath and local ephemeral volumes
)

// cmpFunc orders two pods: negative when a goes first.
type cmpFunc func(a, b *v1.Pod) int

// rank sorts pods (stably) by the comparisons in order.
func rank(pods []*v1.Pod, cmps ...cmpFunc) {
	sort.SliceStable(pods, func(i, j int) bool {
		for _, c := range cmps {
			if r := c(pods[i], pods[j]); r != 0 {
				return r < 0
			}
		}
		return false
	})
}

// rankFor returns the ranking of signal s; dedicated tells whether the
// image filesystem is apart from the node's.
func rankFor(s evictionapi.Signal, dedicated bool, stats podStatsFunc) func([]*v1.Pod) {
	disk := func(measure fsUsage, r v1.ResourceName) func([]*v1.Pod) {
		return func(pods []*v1.Pod) {
			rank(pods, exceedsRequests(stats, r, func(p statsapi.PodStats, pod *v1.Pod) *resource.Quantity {
				return podDiskUsage(p, pod, measure, r)
			}), priority, usageAboveRequests(stats, r, func(p statsapi.PodStats, pod *v1.Pod) *resource.Quantity {
				return podDiskUsage(p, pod, measure, r)
			}))
		}
	}
	all := fsRoot | fsLogs | fsLocalVolume
	nodeFs, imageFs := all, all
	if dedicated {
		nodeFs, imageFs = fsLogs|fsLocalVolume, fsRoot
	}
	switch s {
	case evictionapi.SignalMemoryAvailable, evictionapi.SignalAllocatableMemoryAvailable:
		mem := func(p statsapi.PodStats, _ *v1.Pod) *resource.Quantity { return memoryUsage(p.Memory) }
		return func(pods []*v1.Pod) {
			rank(pods, exceedsRequests(stats, v1.ResourceMemory, mem), priority, usageAboveRequests(stats, v1.ResourceMemory, mem))
		}
	case evictionapi.SignalPIDAvailable:
		return func(pods []*v1.Pod) { rank(pods, priority, processes(stats)) }
	case evictionapi.SignalNodeFsAvailable:
		return disk(nodeFs, v1.ResourceEphemeralStorage)
	case evictionapi.SignalNodeFsInodesFree:
		return disk(nodeFs, evictionapi.ResourceInodes)
	case evictionapi.SignalImageFsAvailable:
		return disk(imageFs, v1.ResourceEphemeralStorage)
	case evictionapi.SignalImageFsInodesFree:
		return disk(imageFs, evictionapi.ResourceInodes)
	}
	return nil
}

// request is the pod's request of r (containers, init containers and
// overhead, as the scheduler counts it); zero for inodes.
func request(pod *v1.Pod, r v1.ResourceName) resource.Quantity {
	q, ok := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})[r]
	if !ok {
		return resource.Quantity{}
	}
	return q
}

// exceedsRequests puts the pods whose usage is above their request of r
// first.
func exceedsRequests(stats podStatsFunc, r v1.ResourceName, usage func(statsapi.PodStats, *v1.Pod) *resource.Quantity) cmpFunc {
	return func(a, b *v1.Pod) int {
		sa, oka := stats(string(a.UID))
		sb, okb := stats(string(b.UID))
		if !oka || !okb {
			return cmpBool(!oka, !okb)
		}
		return cmpBool(usage(sa, a).Cmp(request(a, r)) > 0, usage(sb, b).Cmp(request(b, r)) > 0)
	}
}

// usageAboveRequests puts the pods using most above their request of r
// first.
func usageAboveRequests(stats podStatsFunc, r v1.ResourceName, usage func(statsapi.PodStats, *v1.Pod) *resource.Quantity) cmpFunc {
	return func(a, b *v1.Pod) int {
		sa, oka := stats(string(a.UID))
		sb, okb := stats(string(b.UID))
		if !oka || !okb {
			return cmpBool(!oka, !okb)
		}
		ua, ub := usage(sa, a), usage(sb, b)
		ua.Sub(request(a, r))
		ub.Sub(request(b, r))
		return ub.Cmp(*ua)
	}
}

// priority puts lower priorities first.
func priority(a, b *v1.Pod) int {
	pa, pb := corev1helpers.PodPriority(a), corev1helpers.PodPriority(b)
	switch {
	case pa < pb:
		return -1
	case pa > pb:
		return 1
	}
	return 0
}

// processes puts the pods with more processes first.
func processes(stats podStatsFunc) cmpFunc {
	return func(a, b *v1.Pod) int {
		sa, oka := stats(string(a.UID))
		sb, okb := stats(string(b.UID))
		if !oka || !okb {
			return cmpBool(!oka, !okb)
		}
		na, nb := processCount(sa.ProcessStats), processCount(sb.ProcessStats)
		switch {
		case na > nb:
			return -1
		case na < nb:
			return 1
		}
		return 0
	}
}

// cmpBool puts true before false.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

func memoryUsage(m *statsapi.MemoryStats) *resource.Quantity {
	if m == nil || m.WorkingSetBytes == nil {
		return resource.NewQuantity(0, resource.BinarySI)
	}
	return resource.NewQuantity(int64(*m.WorkingSetBytes), resource.BinarySI)
}

func processCount(p *statsapi.ProcessStats) uint64 {
	if p == nil || p.ProcessCount == nil {
		return 0
	}
	return *p.ProcessCount
}

// fsUsed is f's used bytes (r is storage) or inodes.
func fsUsed(f *statsapi.FsStats, r v1.ResourceName) int64 {
	if f == nil {
		return 0
	}
	if r == evictionapi.ResourceInodes {
		if f.InodesUsed == nil {
			return 0
		}
		return int64(*f.InodesUsed)
	}
	if f.UsedBytes == nil {
		return 0
	}
	return int64(*f.UsedBytes)
}

// podDiskUsage is what the pod uses of r (bytes or inodes) in what
// measure names: its containers' writable layers and logs, and its
// hostPath and local ephemeral volumes (the kubelet's podDiskUsage).
func podDiskUsage(p statsapi.PodStats, pod *v1.Pod, measure fsUsage, r v1.ResourceName) *resource.Quantity {
	var n int64
	for _, c := range p.Containers {
		if measure&fsRoot != 0 {
			n += fsUsed(c.Rootfs, r)
		}
		if measure&fsLogs != 0 {
			n += fsUsed(c.Logs, r)
		}
	}
	if measure&fsLocalVolume != 0 {
		local := map[string]bool{}
		for _, v := range pod.Spec.Volumes {
			if v.HostPath != nil || isLocalEphemeral(v) {
				local[v.Name] = true
			}
		}
		for _, v := range p.VolumeStats {
			if local[v.Name] {
				n += fsUsed(&v.FsStats, r)
			}
		}
	}
	if r == evictionapi.ResourceInodes {
		return resource.NewQuantity(n, resource.DecimalSI)
	}
	return resource.NewQuantity(n, resource.BinarySI)
}

// isLocalEphemeral is the kubelet's IsLocalEphemeralVolume: gitRepo,
// emptyDir on disk, configMap.
func isLocalEphemeral(v v1.Volume) bool {
	return v.GitRepo != nil || (v.EmptyDir != nil && v.EmptyDir.Medium == v1.StorageMediumDefault) || v.ConfigMap != nil
}
