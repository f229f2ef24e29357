package stats

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/crivk/crivk/cm"
	"github.com/crivk/crivk/cri"
	"github.com/opencontainers/cgroups"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// /metrics/cadvisor is the kubelet's cAdvisor endpoint
// (pkg/kubelet/server/server.go: cAdvisor's PrometheusCollector with the
// kubelet's includedMetrics and containerPrometheusLabelsFunc), computed
// from the cgroups and /proc without cAdvisor: see the package doc for
// where each family comes from.

// Cgroups reads the pods' and containers' cgroups as cAdvisor reads a
// container's (cm.Manager implements it). A cgroup that is not there is
// an error wrapping os.ErrNotExist: the container exited meanwhile.
type Cgroups interface {
	// RootCgroupSample reads the machine's root cgroup, cAdvisor's "/".
	RootCgroupSample() (cm.CgroupSample, error)
	PodCgroupSample(podUID types.UID) (cm.CgroupSample, error)
	ContainerCgroupSample(podUID types.UID, containerID string) (cm.CgroupSample, error)
}

// Sandboxes lists the runtime's pod sandboxes (cri.RuntimeService
// implements it).
type Sandboxes interface {
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
}

// SandboxImager names the image the runtime makes sandboxes from
// (cri.Runtime implements it): the image label of a sandbox's series.
type SandboxImager interface {
	SandboxImage(ctx context.Context) (string, error)
}

var (
	_ Cgroups       = (*cm.Manager)(nil)
	_ Sandboxes     = cri.RuntimeService(nil)
	_ SandboxImager = (*cri.Runtime)(nil)
)

// cadvisorLabels are the labels of every series, in the kubelet's
// containerPrometheusLabelsFunc: the cgroup's name (id), the container
// ID (name; "" for a pod cgroup), the image, and the pod's namespace,
// name and the container's name ("" for a sandbox and a pod cgroup, as
// with containerd).
var cadvisorLabels = []string{"container", "id", "image", "name", "namespace", "pod"}

// cadvisorEntry is one cgroup cAdvisor would report: the machine's
// root, a pod's, a sandbox's or a container's.
type cadvisorEntry struct {
	// labels are the values of cadvisorLabels.
	labels []string
	cg     cm.CgroupSample
	// rootPid is the process whose limits are the ulimits (and whose
	// network namespace a sandbox's or the root's interfaces are): a
	// container's first process (the lowest pid in its cgroup), init for
	// the root; 0 for a pod cgroup, as cAdvisor's raw containers but "/"
	// have no pid.
	rootPid int
	procs   procStats
	// net are the interfaces of a sandbox's network namespace (or the
	// machine's, for the root); nil for containers, which share their
	// sandbox's (cAdvisor's RemoveNetMetrics), and pod cgroups.
	net []netIface
	// fs are the machine's filesystems, on the root entry only.
	fs []fsStat
	at time.Time
}

// cadvisorValue is one series of a family: its extra labels' values.
type cadvisorValue struct {
	labels []string
	v      float64
}

// cadvisorMetric is a family of cAdvisor's containerMetrics.
type cadvisorMetric struct {
	name, help string
	typ        prometheus.ValueType
	extra      []string
	// cond, when set, tells whether the entry has the family.
	cond   func(e *cadvisorEntry) bool
	values func(e *cadvisorEntry) []cadvisorValue
}

func one(v float64) []cadvisorValue { return []cadvisorValue{{v: v}} }

func counter(name, help string, f func(e *cadvisorEntry) float64) cadvisorMetric {
	return cadvisorMetric{name: name, help: help, typ: prometheus.CounterValue, values: func(e *cadvisorEntry) []cadvisorValue { return one(f(e)) }}
}

func gauge(name, help string, f func(e *cadvisorEntry) float64) cadvisorMetric {
	return cadvisorMetric{name: name, help: help, typ: prometheus.GaugeValue, values: func(e *cadvisorEntry) []cadvisorValue { return one(f(e)) }}
}

// memoryStat is a key of the cgroup's memory.stat as cAdvisor reads it:
// on v1 the hierarchical total_<key> when memory.use_hierarchy is 1 (it is
// below kubepods), else <key>; on v2 v2Key ("": none, 0).
func memoryStat(e *cadvisorEntry, key, v2Key string) float64 {
	return float64(sampleMemoryStat(e.cg, key, v2Key))
}

// sampleMemoryStat is memoryStat of a cgroup sample.
func sampleMemoryStat(cg cm.CgroupSample, key, v2Key string) uint64 {
	st := cg.Stats.MemoryStats
	switch {
	case !hasV1Stats(st.Stats):
		if v2Key == "" {
			return 0
		}
		return st.Stats[v2Key]
	case st.UseHierarchy:
		return st.Stats["total_"+key]
	default:
		return st.Stats[key]
	}
}

// hasV1Stats tells a v1 memory.stat (it has the total_ keys) from a v2
// one.
func hasV1Stats(s map[string]uint64) bool {
	_, ok := s["total_rss"]
	return ok
}

// workingSet is usage less inactive file pages, as cAdvisor's.
func workingSet(e *cadvisorEntry) float64 {
	st := e.cg.Stats.MemoryStats
	key := "total_inactive_file"
	if !hasV1Stats(st.Stats) {
		key = "inactive_file"
	}
	usage := st.Usage.Usage
	if v, ok := st.Stats[key]; ok {
		if usage < v {
			return 0
		}
		usage -= v
	}
	return float64(usage)
}

// blkio is one operation of a per-device blkio list, one series per
// device, as cAdvisor's ioValues.
func blkio(entries []cgroups.BlkioStatEntry, op string, scale float64, dev func(major, minor uint64) string) []cadvisorValue {
	type key struct{ major, minor uint64 }
	var order []key
	sums := map[key]uint64{}
	for _, x := range entries {
		k := key{x.Major, x.Minor}
		if _, ok := sums[k]; !ok {
			order = append(order, k)
			sums[k] = 0
		}
		if x.Op == op {
			sums[k] = x.Value
		}
	}
	var out []cadvisorValue
	for _, k := range order {
		out = append(out, cadvisorValue{labels: []string{dev(k.major, k.minor)}, v: float64(sums[k]) * scale})
	}
	return out
}

// cadvisorMetrics are the families of the kubelet's includedMetrics
// (CpuUsage, MemoryUsage, CpuLoad, DiskIO, DiskUsage, NetworkUsage,
// Process, OOM), named, typed and described as cAdvisor v0.53's, in
// cAdvisor's order: one table per metric kind below. dev names a block
// device (major, minor) as cAdvisor's machine info does.
func cadvisorMetrics(now func() time.Time, dev func(major, minor uint64) string) []cadvisorMetric {
	out := []cadvisorMetric{
		gauge("container_last_seen", "Last time a container was seen by the exporter", func(*cadvisorEntry) float64 { return float64(now().Unix()) }),
	}
	out = append(out, cpuMetrics()...)
	out = append(out, memoryMetrics()...)
	out = append(out, diskUsageMetrics()...)
	out = append(out, diskIOMetrics(dev)...)
	out = append(out, networkMetrics()...)
	out = append(out, processMetrics()...)
	return append(out, oomMetrics()...)
}

// cpuMetrics are cAdvisor's CpuUsageMetrics.
func cpuMetrics() []cadvisorMetric {
	return []cadvisorMetric{
		counter("container_cpu_user_seconds_total", "Cumulative user cpu time consumed in seconds.", func(e *cadvisorEntry) float64 {
			return float64(e.cg.Stats.CpuStats.CpuUsage.UsageInUsermode) / 1e9
		}),
		counter("container_cpu_system_seconds_total", "Cumulative system cpu time consumed in seconds.", func(e *cadvisorEntry) float64 {
			return float64(e.cg.Stats.CpuStats.CpuUsage.UsageInKernelmode) / 1e9
		}),
		{name: "container_cpu_usage_seconds_total", help: "Cumulative cpu time consumed in seconds.", typ: prometheus.CounterValue, extra: []string{"cpu"},
			values: func(e *cadvisorEntry) []cadvisorValue {
				// The kubelet leaves out PerCpuUsageMetrics: one "total"
				// series, none while the total is 0.
				if total := e.cg.Stats.CpuStats.CpuUsage.TotalUsage; total > 0 {
					return []cadvisorValue{{labels: []string{"total"}, v: float64(total) / 1e9}}
				}
				return nil
			}},
		withQuota(counter("container_cpu_cfs_periods_total", "Number of elapsed enforcement period intervals.", func(e *cadvisorEntry) float64 {
			return float64(e.cg.Stats.CpuStats.ThrottlingData.Periods)
		})),
		withQuota(counter("container_cpu_cfs_throttled_periods_total", "Number of throttled period intervals.", func(e *cadvisorEntry) float64 {
			return float64(e.cg.Stats.CpuStats.ThrottlingData.ThrottledPeriods)
		})),
		withQuota(counter("container_cpu_cfs_throttled_seconds_total", "Total time duration the container has been throttled.", func(e *cadvisorEntry) float64 {
			return float64(e.cg.Stats.CpuStats.ThrottlingData.ThrottledTime) / 1e9
		})),
		// No CpuLoadMetrics (container_cpu_load_average_10s,
		// container_cpu_load_d_average_10s, container_tasks_state): the
		// kubelet's includedMetrics has left them out since v1.37
		// (#139870); they were always 0 there.
	}
}

// memoryMetrics are cAdvisor's MemoryUsageMetrics.
func memoryMetrics() []cadvisorMetric {
	return []cadvisorMetric{
		gauge("container_memory_cache", "Number of bytes of page cache memory.", func(e *cadvisorEntry) float64 { return memoryStat(e, "cache", "file") }),
		gauge("container_memory_rss", "Size of RSS in bytes.", func(e *cadvisorEntry) float64 { return memoryStat(e, "rss", "anon") }),
		gauge("container_memory_kernel_usage", "Size of kernel memory allocated in bytes.", func(e *cadvisorEntry) float64 {
			return float64(e.cg.Stats.MemoryStats.KernelUsage.Usage)
		}),
		gauge("container_memory_mapped_file", "Size of memory mapped files in bytes.", func(e *cadvisorEntry) float64 {
			return memoryStat(e, "mapped_file", "file_mapped")
		}),
		gauge("container_memory_swap", "Container swap usage in bytes.", func(e *cadvisorEntry) float64 { return float64(sampleSwap(e.cg)) }),
		counter("container_memory_failcnt", "Number of memory usage hits limits", func(e *cadvisorEntry) float64 {
			return float64(e.cg.Stats.MemoryStats.Usage.Failcnt)
		}),
		gauge("container_memory_usage_bytes", "Current memory usage in bytes, including all memory regardless of when it was accessed", func(e *cadvisorEntry) float64 {
			return float64(e.cg.Stats.MemoryStats.Usage.Usage)
		}),
		gauge("container_memory_max_usage_bytes", "Maximum memory usage recorded in bytes", func(e *cadvisorEntry) float64 {
			return float64(e.cg.Stats.MemoryStats.Usage.MaxUsage)
		}),
		gauge("container_memory_working_set_bytes", "Current working set in bytes.", workingSet),
		gauge("container_memory_total_active_file_bytes", "Current total active file in bytes.", func(e *cadvisorEntry) float64 {
			return memoryStat(e, "active_file", "active_file")
		}),
		gauge("container_memory_total_inactive_file_bytes", "Current total inactive file in bytes.", func(e *cadvisorEntry) float64 {
			return memoryStat(e, "inactive_file", "inactive_file")
		}),
		{name: "container_memory_failures_total", help: "Cumulative count of memory allocation failures.", typ: prometheus.CounterValue,
			extra: []string{"failure_type", "scope"}, values: func(e *cadvisorEntry) []cadvisorValue {
				// cAdvisor reports the cgroup's own pgfault and pgmajfault
				// for both scopes.
				st := e.cg.Stats.MemoryStats.Stats
				pf, mf := float64(st["pgfault"]), float64(st["pgmajfault"])
				return []cadvisorValue{{[]string{"pgfault", "container"}, pf}, {[]string{"pgmajfault", "container"}, mf},
					{[]string{"pgfault", "hierarchy"}, pf}, {[]string{"pgmajfault", "hierarchy"}, mf}}
			}},
	}
}

// diskUsageMetrics are cAdvisor's DiskUsageMetrics: the root's filesystems
// only (cAdvisor has no filesystem usage for containerd's containers).
func diskUsageMetrics() []cadvisorMetric {
	return []cadvisorMetric{
		fsGauge("container_fs_inodes_free", "Number of available Inodes", func(f fsStat) float64 { return float64(f.inodesFree) }),
		fsGauge("container_fs_inodes_total", "Number of Inodes", func(f fsStat) float64 { return float64(f.inodes) }),
		fsGauge("container_fs_limit_bytes", "Number of bytes that can be consumed by the container on this filesystem.", func(f fsStat) float64 {
			return float64(f.capacity)
		}),
		fsGauge("container_fs_usage_bytes", "Number of bytes that are consumed by the container on this filesystem.", func(f fsStat) float64 {
			return float64(f.capacity - f.free)
		}),
	}
}

// diskIOMetrics are cAdvisor's DiskIOMetrics: the cgroup's blkio lists
// (the library reads the BFQ or CFQ files, else the throttle ones), one
// series per device, then, on the root, one per filesystem from
// /proc/diskstats. cAdvisor divides the diskstats' milliseconds by 1e9 for
// its *_seconds_total: kept, so that the values are the kubelet's.
func diskIOMetrics(dev func(major, minor uint64) string) []cadvisorMetric {
	return []cadvisorMetric{
		ioCounter("container_fs_reads_bytes_total", "Cumulative count of bytes read", serviceBytes, "Read", 1, dev, nil),
		ioCounter("container_fs_reads_total", "Cumulative count of reads completed", serviced, "Read", 1, dev, disk(0)),
		ioCounter("container_fs_sector_reads_total", "Cumulative count of sector reads completed", sectors, "Read", 1, dev, disk(2)),
		ioCounter("container_fs_reads_merged_total", "Cumulative count of reads merged", merged, "Read", 1, dev, disk(1)),
		ioCounter("container_fs_read_seconds_total", "Cumulative count of seconds spent reading", serviceTime, "Read", 1e-9, dev, diskNs(3)),
		ioCounter("container_fs_writes_bytes_total", "Cumulative count of bytes written", serviceBytes, "Write", 1, dev, nil),
		ioCounter("container_fs_writes_total", "Cumulative count of writes completed", serviced, "Write", 1, dev, disk(4)),
		ioCounter("container_fs_sector_writes_total", "Cumulative count of sector writes completed", sectors, "Write", 1, dev, disk(6)),
		ioCounter("container_fs_writes_merged_total", "Cumulative count of writes merged", merged, "Write", 1, dev, disk(5)),
		ioCounter("container_fs_write_seconds_total", "Cumulative count of seconds spent writing", serviceTime, "Write", 1e-9, dev, diskNs(7)),
		asGauge(ioCounter("container_fs_io_current", "Number of I/Os currently in progress", queued, "Total", 1, dev, disk(8))),
		ioCounter("container_fs_io_time_seconds_total", "Cumulative count of seconds spent doing I/Os", serviceTime, "Total", 1e-9, dev, diskNs(9)),
		{name: "container_fs_io_time_weighted_seconds_total", help: "Cumulative weighted I/O time in seconds", typ: prometheus.CounterValue,
			extra: []string{"device"}, values: func(e *cadvisorEntry) []cadvisorValue { return fsSeries(e, diskNs(10)) }},
		{name: "container_blkio_device_usage_total", help: "Blkio Device bytes usage", typ: prometheus.CounterValue,
			extra: []string{"device", "major", "minor", "operation"}, values: func(e *cadvisorEntry) []cadvisorValue {
				var out []cadvisorValue
				for _, x := range e.cg.Stats.BlkioStats.IoServiceBytesRecursive {
					op := x.Op
					if op == "" {
						op = "Count"
					}
					out = append(out, cadvisorValue{labels: []string{dev(x.Major, x.Minor), fmt.Sprint(x.Major), fmt.Sprint(x.Minor), op}, v: float64(x.Value)})
				}
				return out
			}},
	}
}

// networkMetrics are cAdvisor's NetworkUsageMetrics: the sandbox's only.
func networkMetrics() []cadvisorMetric {
	return []cadvisorMetric{
		netMetric("container_network_receive_bytes_total", "Cumulative count of bytes received", func(i netIface) uint64 { return i.rxBytes }),
		netMetric("container_network_receive_packets_total", "Cumulative count of packets received", func(i netIface) uint64 { return i.rxPackets }),
		netMetric("container_network_receive_packets_dropped_total", "Cumulative count of packets dropped while receiving", func(i netIface) uint64 { return i.rxDropped }),
		netMetric("container_network_receive_errors_total", "Cumulative count of errors encountered while receiving", func(i netIface) uint64 { return i.rxErrors }),
		netMetric("container_network_transmit_bytes_total", "Cumulative count of bytes transmitted", func(i netIface) uint64 { return i.txBytes }),
		netMetric("container_network_transmit_packets_total", "Cumulative count of packets transmitted", func(i netIface) uint64 { return i.txPackets }),
		netMetric("container_network_transmit_packets_dropped_total", "Cumulative count of packets dropped while transmitting", func(i netIface) uint64 { return i.txDropped }),
		netMetric("container_network_transmit_errors_total", "Cumulative count of errors encountered while transmitting", func(i netIface) uint64 { return i.txErrors }),
	}
}

// processMetrics are cAdvisor's ProcessMetrics.
func processMetrics() []cadvisorMetric {
	return []cadvisorMetric{
		gauge("container_processes", "Number of processes running inside the container.", func(e *cadvisorEntry) float64 { return float64(len(e.cg.Procs)) }),
		gauge("container_file_descriptors", "Number of open file descriptors for the container.", func(e *cadvisorEntry) float64 { return float64(e.procs.fds) }),
		gauge("container_sockets", "Number of open sockets for the container.", func(e *cadvisorEntry) float64 { return float64(e.procs.sockets) }),
		gauge("container_threads_max", "Maximum number of threads allowed inside the container, infinity if value is zero", func(e *cadvisorEntry) float64 {
			return float64(e.cg.Stats.PidsStats.Limit)
		}),
		gauge("container_threads", "Number of threads running inside the container", func(e *cadvisorEntry) float64 {
			return float64(e.cg.Stats.PidsStats.Current)
		}),
		{name: "container_ulimits_soft", help: "Soft ulimit values for the container root process. Unlimited if -1, except priority and nice",
			typ: prometheus.GaugeValue, extra: []string{"ulimit"}, values: func(e *cadvisorEntry) []cadvisorValue {
				if e.procs.maxOpenFiles == nil {
					return nil
				}
				return []cadvisorValue{{labels: []string{"max_open_files"}, v: float64(*e.procs.maxOpenFiles)}}
			}},
	}
}

// oomMetrics are cAdvisor's OOMMetrics.
func oomMetrics() []cadvisorMetric {
	return []cadvisorMetric{
		counter("container_oom_events_total", "Count of out of memory events observed for the container", func(e *cadvisorEntry) float64 {
			return float64(e.cg.OOMKills)
		}),
	}
}

// The cgroup's blkio lists, as cAdvisor's DiskIo names them.
func serviceBytes(st *cgroups.BlkioStats) []cgroups.BlkioStatEntry { return st.IoServiceBytesRecursive }
func serviced(st *cgroups.BlkioStats) []cgroups.BlkioStatEntry     { return st.IoServicedRecursive }
func sectors(st *cgroups.BlkioStats) []cgroups.BlkioStatEntry      { return st.SectorsRecursive }
func merged(st *cgroups.BlkioStats) []cgroups.BlkioStatEntry       { return st.IoMergedRecursive }
func serviceTime(st *cgroups.BlkioStats) []cgroups.BlkioStatEntry  { return st.IoServiceTimeRecursive }
func queued(st *cgroups.BlkioStats) []cgroups.BlkioStatEntry       { return st.IoQueuedRecursive }

// disk is a /proc/diskstats counter of a filesystem's device; diskNs one
// of its millisecond counters, divided by 1e9 as cAdvisor does.
func disk(i int) func(fsStat) float64 { return func(f fsStat) float64 { return float64(f.disk[i]) } }
func diskNs(i int) func(fsStat) float64 {
	return func(f fsStat) float64 { return float64(f.disk[i]) / 1e9 }
}

// fsSeries is one series per filesystem of the entry (the root's).
func fsSeries(e *cadvisorEntry, v func(fsStat) float64) []cadvisorValue {
	var out []cadvisorValue
	for _, f := range e.fs {
		out = append(out, cadvisorValue{labels: []string{f.device}, v: v(f)})
	}
	return out
}

func fsGauge(name, help string, v func(fsStat) float64) cadvisorMetric {
	return cadvisorMetric{name: name, help: help, typ: prometheus.GaugeValue, extra: []string{"device"},
		values: func(e *cadvisorEntry) []cadvisorValue { return fsSeries(e, v) }}
}

// ioCounter is cAdvisor's ioValues: op of a blkio list per device (times
// scale), then fsv of each filesystem (nil: none).
func ioCounter(name, help string, list func(*cgroups.BlkioStats) []cgroups.BlkioStatEntry, op string, scale float64,
	dev func(major, minor uint64) string, fsv func(fsStat) float64) cadvisorMetric {
	return cadvisorMetric{name: name, help: help, typ: prometheus.CounterValue, extra: []string{"device"},
		values: func(e *cadvisorEntry) []cadvisorValue {
			out := blkio(list(&e.cg.Stats.BlkioStats), op, scale, dev)
			if fsv != nil {
				out = append(out, fsSeries(e, fsv)...)
			}
			return out
		}}
}

func asGauge(m cadvisorMetric) cadvisorMetric {
	m.typ = prometheus.GaugeValue
	return m
}

func withQuota(m cadvisorMetric) cadvisorMetric {
	m.cond = func(e *cadvisorEntry) bool { return e.cg.Spec.CPUQuota != 0 }
	return m
}

func netMetric(name, help string, f func(netIface) uint64) cadvisorMetric {
	return cadvisorMetric{name: name, help: help, typ: prometheus.CounterValue, extra: []string{"interface"},
		values: func(e *cadvisorEntry) []cadvisorValue {
			var out []cadvisorValue
			for _, i := range e.net {
				out = append(out, cadvisorValue{labels: []string{i.name}, v: float64(f(i))})
			}
			return out
		}}
}

// specMemory is a limit as cAdvisor shows it: above 1<<62 is none, 0.
func specMemory(v uint64) float64 {
	if v > 1<<62 {
		return 0
	}
	return float64(v)
}

// cadvisorCollector collects one scrape: a prometheus.Collector made for
// one request, so that the runtime's calls carry its context.
type cadvisorCollector struct {
	ctx     context.Context
	entries func(ctx context.Context) ([]*cadvisorEntry, error)
	metrics []cadvisorMetric
}

var (
	cadvisorScrapeError = prometheus.NewDesc("container_scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
	cadvisorSpecs       = []struct {
		name, help string
		cond       func(e *cadvisorEntry) bool
		v          func(e *cadvisorEntry) float64
	}{
		{"container_start_time_seconds", "Start time of the container since unix epoch in seconds.", nil, func(e *cadvisorEntry) float64 {
			return float64(e.cg.Created.Unix())
		}},
		{"container_spec_cpu_period", "CPU period of the container.", func(e *cadvisorEntry) bool { return e.cg.Spec.HasCPU }, func(e *cadvisorEntry) float64 {
			return float64(e.cg.Spec.CPUPeriod)
		}},
		{"container_spec_cpu_quota", "CPU quota of the container.", func(e *cadvisorEntry) bool { return e.cg.Spec.HasCPU && e.cg.Spec.CPUQuota != 0 }, func(e *cadvisorEntry) float64 {
			return float64(e.cg.Spec.CPUQuota)
		}},
		{"container_spec_cpu_shares", "CPU share of the container.", func(e *cadvisorEntry) bool { return e.cg.Spec.HasCPU }, func(e *cadvisorEntry) float64 {
			return float64(e.cg.Spec.CPUShares)
		}},
		{"container_spec_memory_limit_bytes", "Memory limit for the container.", func(e *cadvisorEntry) bool { return e.cg.Spec.HasMemory }, func(e *cadvisorEntry) float64 {
			return specMemory(e.cg.Spec.MemoryLimit)
		}},
		{"container_spec_memory_swap_limit_bytes", "Memory swap limit for the container.", func(e *cadvisorEntry) bool { return e.cg.Spec.HasMemory }, func(e *cadvisorEntry) float64 {
			return specMemory(e.cg.Spec.MemorySwapLimit)
		}},
		{"container_spec_memory_reservation_limit_bytes", "Memory reservation limit for the container.", func(e *cadvisorEntry) bool { return e.cg.Spec.HasMemory }, func(e *cadvisorEntry) float64 {
			return specMemory(e.cg.Spec.MemoryReservation)
		}},
	}
)

// Describe sends nothing: the collector is unchecked, as its series
// depend on the pods.
func (c cadvisorCollector) Describe(chan<- *prometheus.Desc) {}

func (c cadvisorCollector) Collect(ch chan<- prometheus.Metric) {
	entries, err := c.entries(c.ctx)
	scrapeError := 0.0
	if err != nil {
		log.G(c.ctx).WithError(err).Warn("node API: /metrics/cadvisor could not list the runtime's pods")
		scrapeError = 1
	}
	ch <- prometheus.MustNewConstMetric(cadvisorScrapeError, prometheus.GaugeValue, scrapeError)
	for _, s := range cadvisorSpecs {
		desc := prometheus.NewDesc(s.name, s.help, cadvisorLabels, nil)
		for _, e := range entries {
			if s.cond == nil || s.cond(e) {
				c.send(ch, desc, prometheus.GaugeValue, s.v(e), e.labels, time.Time{})
			}
		}
	}
	for _, m := range c.metrics {
		desc := prometheus.NewDesc(m.name, m.help, append(slices.Clone(cadvisorLabels), m.extra...), nil)
		for _, e := range entries {
			if m.cond != nil && !m.cond(e) {
				continue
			}
			for _, v := range m.values(e) {
				at := e.at
				if m.name == "container_last_seen" {
					at = time.Unix(int64(v.v), 0)
				}
				c.send(ch, desc, m.typ, v.v, append(slices.Clone(e.labels), v.labels...), at)
			}
		}
	}
}

// send sends one series, dated at unless at is zero. A series the client
// library refuses (a label value that is not UTF-8, say a mount point's)
// is left out and logged, never a panic in the request.
func (c cadvisorCollector) send(ch chan<- prometheus.Metric, desc *prometheus.Desc, typ prometheus.ValueType, v float64, labels []string, at time.Time) {
	m, err := prometheus.NewConstMetric(desc, typ, v, labels...)
	if err != nil {
		log.G(c.ctx).WithError(err).Debugf("node API: /metrics/cadvisor: a series of %v left out", labels)
		return
	}
	if !at.IsZero() {
		m = prometheus.NewMetricWithTimestamp(at, m)
	}
	ch <- m
}

// cadvisorSource lists the entries of a scrape.
type cadvisorSource struct {
	containers interface {
		ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	}
	sandboxes    Sandboxes
	sandboxImage SandboxImager // nil: sandboxes without an image label
	cgroups      Cgroups
	procRoot     string
	owned        map[string]string
	clock        clock.PassiveClock
}

// entries reads the machine's root cgroup, every ready sandbox of the
// node's pods with its pod's cgroup, and every running container, from
// their cgroups and /proc. A
// cgroup gone meanwhile is left out; a cgroup that cannot be read is
// logged and left out (cAdvisor skips such a container too).
// One function: the root cgroup, the sandboxes and the containers are all
// read through its one closure (add), which keeps the rule above for
// cgroups gone or unreadable in one place.
func (s cadvisorSource) entries(ctx context.Context) ([]*cadvisorEntry, error) {
	managed := s.owned
	if managed == nil {
		managed = cri.OwnedSelector("")
	}
	sandboxes, err := s.sandboxes.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}, LabelSelector: managed})
	if err != nil {
		return nil, fmt.Errorf("listing the sandboxes: %w", err)
	}
	containers, err := s.containers.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}, LabelSelector: managed})
	if err != nil {
		return nil, fmt.Errorf("listing the containers: %w", err)
	}
	var pauseImage string
	if s.sandboxImage != nil && len(sandboxes) > 0 {
		if pauseImage, err = s.sandboxImage.SandboxImage(ctx); err != nil {
			log.G(ctx).WithError(err).Debug("node API: /metrics/cadvisor: no sandbox image")
		}
	}
	var out []*cadvisorEntry
	// add reads one cgroup; rootPid picks the pid whose limits (and, with
	// net, whose network namespace) the entry reports (0: none).
	add := func(what string, read func() (cm.CgroupSample, error), labels func(cg cm.CgroupSample) []string, rootPid func(cg cm.CgroupSample) int, net bool) *cadvisorEntry {
		cg, err := read()
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				log.G(ctx).WithError(err).Warnf("node API: /metrics/cadvisor: %s", what)
			}
			return nil
		}
		e := &cadvisorEntry{labels: labels(cg), cg: cg, at: s.clock.Now()}
		if rootPid != nil {
			e.rootPid = rootPid(cg)
		}
		e.procs = readProcStats(s.procRoot, cg.Procs, e.rootPid)
		if net && e.rootPid > 0 {
			e.net, err = readNetDev(s.procRoot, e.rootPid)
			if err != nil {
				log.G(ctx).WithError(err).Debugf("node API: /metrics/cadvisor: network of %s", what)
			}
		}
		out = append(out, e)
		return e
	}
	// A container's first process is the lowest pid of its cgroup (unless
	// pids wrapped); the machine's is init.
	lowest := func(cg cm.CgroupSample) int {
		if len(cg.Procs) == 0 {
			return 0
		}
		return slices.Min(cg.Procs)
	}
	if root := add("the root cgroup", s.cgroups.RootCgroupSample, func(cm.CgroupSample) []string { return []string{"", "/", "", "", "", ""} },
		func(cm.CgroupSample) int { return 1 }, true); root != nil {
		if root.fs, err = readFilesystems(s.procRoot); err != nil {
			log.G(ctx).WithError(err).Warn("node API: /metrics/cadvisor: the machine's filesystems")
		}
	}
	pods := map[types.UID]bool{}
	for _, sb := range sandboxes {
		l := sb.GetLabels()
		uid, ns, name := types.UID(l[cri.LabelPodUID]), l[cri.LabelPodNamespace], l[cri.LabelPodName]
		if !pods[uid] {
			pods[uid] = true
			add(fmt.Sprintf("pod %s/%s %s", ns, name, uid), func() (cm.CgroupSample, error) { return s.cgroups.PodCgroupSample(uid) },
				func(cg cm.CgroupSample) []string { return []string{"", cg.Name, "", "", ns, name} }, nil, false)
		}
		add(fmt.Sprintf("sandbox %s of pod %s/%s", sb.GetId(), ns, name), func() (cm.CgroupSample, error) { return s.cgroups.ContainerCgroupSample(uid, sb.GetId()) },
			func(cg cm.CgroupSample) []string { return []string{"", cg.Name, pauseImage, sb.GetId(), ns, name} }, lowest, true)
	}
	for _, c := range containers {
		l := c.GetLabels()
		uid, ns, name := types.UID(l[cri.LabelPodUID]), l[cri.LabelPodNamespace], l[cri.LabelPodName]
		add(fmt.Sprintf("container %s (%s) of pod %s/%s", l[cri.LabelContainerName], c.GetId(), ns, name),
			func() (cm.CgroupSample, error) { return s.cgroups.ContainerCgroupSample(uid, c.GetId()) },
			func(cg cm.CgroupSample) []string {
				return []string{l[cri.LabelContainerName], cg.Name, c.GetImage().GetImage(), c.GetId(), ns, name}
			}, lowest, false)
	}
	return out, nil
}

// cadvisorHandler serves /metrics/cadvisor: each request collects anew
// into its own registry, as the kubelet's handler asks cAdvisor for the
// current containers (the kubelet's cAdvisor keeps a cache of up to a
// few seconds; crivk reads the cgroups at the request).
type cadvisorHandler struct {
	source  cadvisorSource
	metrics []cadvisorMetric
}

func newCadvisorHandler(src cadvisorSource, sysRoot string) cadvisorHandler {
	return cadvisorHandler{source: src, metrics: cadvisorMetrics(src.clock.Now, blockDeviceNamer(sysRoot))}
}

func (h cadvisorHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(cadvisorCollector{ctx: r.Context(), entries: h.source.entries, metrics: h.metrics}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
}

// blockDeviceNamer names a block device as cAdvisor's machine info does,
// /dev/<name> from /sys/dev/block/<major>:<minor>/uevent; "" for one it
// does not know.
func blockDeviceNamer(sysRoot string) func(major, minor uint64) string {
	return func(major, minor uint64) string {
		b, err := os.ReadFile(fmt.Sprintf("%s/dev/block/%d:%d/uevent", sysRoot, major, minor))
		if err != nil {
			return ""
		}
		for _, line := range strings.Split(string(b), "\n") {
			if name, ok := strings.CutPrefix(line, "DEVNAME="); ok {
				return "/dev/" + strings.TrimSpace(name)
			}
		}
		return ""
	}
}
