package stats

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/crivk/crivk/cm"
	"github.com/crivk/crivk/cri"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Swap figures, for /stats/summary and /metrics/resource, as the
// kubelet's CRI stats provider gives them from cAdvisor
// (pkg/kubelet/stats: cadvisorInfoToSwapStats, makeContainerStats,
// addCadvisorContainerStats, addSwapStats; the node's from cAdvisor's
// root container in server/stats/summary.go):
//
//	usage       cAdvisor's Memory.Swap: on v1 the swap of memory.stat (total_swap
//	            with use_hierarchy), on v2 memory.swap.current (the library's
//	            SwapUsage less Usage)
//	available   the swap limit less usage; none when the limit is unlimited (above
//	            1<<62). The limit is cAdvisor's Spec.Memory.SwapLimit:
//	            memory.memsw.limit_in_bytes on v1 (memory + swap), memory.swap.max
//	            on v2; the machine's SwapTotal of /proc/meminfo for the root
//	node        the root cgroup
//	container   its cgroup; the runtime's swap stats when its cgroup cannot be read
//	            (gone, say), and usage 0 and available 0 when the runtime has none
//	            either (the kubelet's makeContainerStats)
//	pod         its pod cgroup (none when that cgroup has no memory controller);
//	            without one, the sum of its containers' runtime figures (the
//	            kubelet's addSwapStats, which sums them before cAdvisor's replace
//	            the containers' own)
//
// A cgroup without the memory controller has no swap figures, as
// cAdvisor's HasMemory. Only with Config.Cgroups: without it there are no
// swap figures at all.

// swapReader reads the swap figures of one request.
type swapReader struct {
	cgroups Cgroups
	// procRoot is where /proc is read: the machine's SwapTotal.
	procRoot string
	now      func() time.Time
}

// swapFigures are the node's, the running containers' (by container ID)
// and the pods' (by pod UID) swap figures; nil: none.
type swapFigures struct {
	node       *statsapi.SwapStats
	containers map[string]*statsapi.SwapStats
	pods       map[string]*statsapi.SwapStats
}

// read reads the figures of the node and of the running containers among
// stats and of their pods. A nil reader reads none.
func (r *swapReader) read(ctx context.Context, stats []*runtimeapi.ContainerStats, running []*runtimeapi.Container) swapFigures {
	out := swapFigures{containers: map[string]*statsapi.SwapStats{}, pods: map[string]*statsapi.SwapStats{}}
	if r == nil {
		return out
	}
	out.node = r.nodeSwap(ctx)
	isRunning := map[string]bool{}
	for _, c := range running {
		isRunning[c.GetId()] = true
	}
	sums := map[string]*statsapi.SwapStats{}
	var uids []string
	for _, s := range stats {
		id := s.GetAttributes().GetId()
		if !isRunning[id] {
			continue
		}
		uid := s.GetAttributes().GetLabels()[cri.LabelPodUID]
		fromRuntime := r.runtimeSwap(s.GetSwap())
		sum := sums[uid]
		if sum == nil {
			sum = &statsapi.SwapStats{Time: fromRuntime.Time}
			sums[uid] = sum
			uids = append(uids, uid)
		}
		sum.SwapUsageBytes = plus(sum.SwapUsageBytes, fromRuntime.SwapUsageBytes)
		sum.SwapAvailableBytes = plus(sum.SwapAvailableBytes, fromRuntime.SwapAvailableBytes)
		out.containers[id] = fromRuntime
		if cg, ok := r.sample(ctx, "container "+id, func() (cm.CgroupSample, error) { return r.cgroups.ContainerCgroupSample(types.UID(uid), id) }); ok {
			if sw := cgroupSwap(cg, cg.Spec.MemorySwapLimit, r.now()); sw != nil {
				out.containers[id] = sw
			}
		}
	}
	for _, uid := range uids {
		if cg, ok := r.sample(ctx, "pod "+uid, func() (cm.CgroupSample, error) { return r.cgroups.PodCgroupSample(types.UID(uid)) }); ok {
			out.pods[uid] = cgroupSwap(cg, cg.Spec.MemorySwapLimit, r.now())
			continue
		}
		out.pods[uid] = sums[uid]
	}
	return out
}

// sample reads a cgroup; false when it cannot (gone: quietly).
func (r *swapReader) sample(ctx context.Context, what string, read func() (cm.CgroupSample, error)) (cm.CgroupSample, bool) {
	cg, err := read()
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			log.G(ctx).WithError(err).Debugf("node API: no swap figures from the cgroup of %s", what)
		}
		return cm.CgroupSample{}, false
	}
	return cg, true
}

// nodeSwap is the root cgroup's swap, its limit the machine's swap
// (cAdvisor's root container: SwapTotal of /proc/meminfo, or the root's
// memsw limit when that cannot be read); nil when the root cannot be
// read.
func (r *swapReader) nodeSwap(ctx context.Context) *statsapi.SwapStats {
	cg, ok := r.sample(ctx, "the node", r.cgroups.RootCgroupSample)
	if !ok {
		return nil
	}
	limit := cg.Spec.MemorySwapLimit
	if total, err := swapTotal(r.procRoot); err == nil {
		limit = total
	}
	// cAdvisor's root has memory whenever it knows the machine's memory.
	cg.Spec.HasMemory = true
	return cgroupSwap(cg, limit, r.now())
}

// runtimeSwap is a container's swap as the runtime gives it; usage 0 and
// available 0 when it gives none (the kubelet's makeContainerStats).
func (r *swapReader) runtimeSwap(sw *runtimeapi.SwapUsage) *statsapi.SwapStats {
	if sw == nil {
		var zero, none uint64
		return &statsapi.SwapStats{Time: metav1.NewTime(r.now()), SwapUsageBytes: &zero, SwapAvailableBytes: &none}
	}
	return &statsapi.SwapStats{Time: metav1.NewTime(time.Unix(0, sw.GetTimestamp())),
		SwapUsageBytes: criValue(sw.GetSwapUsageBytes()), SwapAvailableBytes: criValue(sw.GetSwapAvailableBytes())}
}

// cgroupSwap is the kubelet's cadvisorInfoToSwapStats of a cgroup with
// the swap limit limit; nil without the memory controller. Available is
// never below 0 (cAdvisor's unsigned difference would wrap; a v1 memsw
// limit counts memory too, so it cannot be below the swap in use).
func cgroupSwap(cg cm.CgroupSample, limit uint64, at time.Time) *statsapi.SwapStats {
	if !cg.Spec.HasMemory || cg.Stats == nil {
		return nil
	}
	usage := sampleSwap(cg)
	out := &statsapi.SwapStats{Time: metav1.NewTime(at), SwapUsageBytes: &usage}
	if limit <= 1<<62 {
		var avail uint64
		if limit > usage {
			avail = limit - usage
		}
		out.SwapAvailableBytes = &avail
	}
	return out
}

// sampleSwap is cAdvisor's Memory.Swap of a cgroup: on v2 swap.current
// (the library's SwapUsage is swap + memory), on v1 the swap of
// memory.stat (total_swap under use_hierarchy).
func sampleSwap(cg cm.CgroupSample) uint64 {
	st := cg.Stats.MemoryStats
	if !hasV1Stats(st.Stats) && st.SwapUsage.Usage > st.Usage.Usage {
		return st.SwapUsage.Usage - st.Usage.Usage
	}
	return sampleMemoryStat(cg, "swap", "")
}

// swapTotal is the machine's swap in bytes: SwapTotal of meminfo, as
// cAdvisor's GetMachineSwapCapacity.
func swapTotal(procRoot string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, "meminfo"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "SwapTotal:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, err
			}
			return kb * 1024, nil
		}
	}
	return 0, errors.New("no SwapTotal in meminfo")
}
