package stats

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/crivk/crivk/cm"
	"github.com/crivk/crivk/cri"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// /metrics/resource is the kubelet's resource metrics endpoint, the one
// metrics-server v0.7 scrapes (`kubectl top`): CPU and working-set memory
// of the node (its root cgroup) and of every container and pod crivk runs
// (CRI ListContainerStats, filtered to crivk's containers), and, with
// Config.Cgroups, the swap usage of the node, containers and pods and the
// containers' swap limits (swap.go), in Prometheus text format with
// timestamps, named and labelled as the kubelet's
// (pkg/kubelet/metrics/collectors/resource_metrics.go).

// containerStatsSource is what the endpoint needs of the runtime.
type containerStatsSource interface {
	ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
}

// nodeUsage is the node's CPU time and memory (its root cgroup's, as
// package cm reads it on cgroup v1 and v2: cm.NodeUsage), dated.
type nodeUsage struct {
	cpuSeconds      float64
	workingSetBytes uint64
	// usageBytes, rssBytes, pageFaults and majorPageFaults are cAdvisor's
	// root container's Memory.Usage, RSS, ContainerData.Pgfault and
	// Pgmajfault (cm.NodeMemory says where each is read).
	usageBytes, rssBytes, pageFaults, majorPageFaults uint64
	at                                                time.Time
	cpuErr, memError                                  error
}

// NodeCgroup reads the node's root cgroup (cm.Host implements it, for
// cgroup v1 and v2).
type NodeCgroup interface {
	NodeUsage() cm.NodeUsage
}

var _ NodeCgroup = (*cm.Host)(nil)

// readNodeUsage reads the node's figures from its root cgroup, dated now.
func readNodeUsage(c NodeCgroup, now time.Time) nodeUsage {
	r := c.NodeUsage()
	m := r.Memory
	return nodeUsage{cpuSeconds: float64(r.CPU) / 1e9, cpuErr: r.CPUErr, memError: r.MemoryErr, at: now,
		workingSetBytes: m.WorkingSet, usageBytes: m.Usage, rssBytes: m.RSS, pageFaults: m.PageFaults, majorPageFaults: m.MajorPageFaults}
}

// resourceMetrics writes the endpoint's answer.
type resourceMetrics struct {
	runtime containerStatsSource
	node    func() nodeUsage
	// owned selects the node's own containers (Config.Owned).
	owned map[string]string
	// swap reads the swap figures; nil: none (no Config.Cgroups).
	swap *swapReader
}

func (m resourceMetrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	managed := m.owned
	if managed == nil {
		managed = cri.OwnedSelector("")
	}
	stats, serr := m.runtime.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{LabelSelector: managed})
	containers, cerr := m.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}, LabelSelector: managed,
	})
	scrapeError := 0
	if serr != nil || cerr != nil {
		log.G(ctx).WithField("stats", serr).WithField("containers", cerr).Warn("node API: /metrics/resource could not read the runtime")
		scrapeError = 1
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	writeResourceMetrics(w, m.node(), stats, containers, m.swap.read(ctx, stats, containers), scrapeError)
}

// series of one metric family, kept sorted for a stable answer.
type family struct {
	name, help, typ string
	lines           []string
	// omitEmpty: no HELP and TYPE lines without a series, as the
	// kubelet's registry writes no family without a metric.
	omitEmpty bool
}

func (f *family) add(labels string, v float64, at time.Time) {
	if labels != "" {
		labels = "{" + labels + "}"
	}
	f.lines = append(f.lines, fmt.Sprintf("%s%s %s %d", f.name, labels, strconv.FormatFloat(v, 'g', -1, 64), at.UnixMilli()))
}

func (f *family) write(w io.Writer) {
	if f.omitEmpty && len(f.lines) == 0 {
		return
	}
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", f.name, f.help, f.name, f.typ)
	sort.Strings(f.lines)
	for _, l := range f.lines {
		fmt.Fprintln(w, l)
	}
}

// writeResourceMetrics renders the kubelet's resource metrics: the node's
// from its root cgroup, each running container's from its CRI stats, each
// pod's as the sum of its containers', and the containers' start times;
// the swap series from swap, as the kubelet's collectNodeSwapMetrics,
// collectContainerSwapMetrics and collectPodSwapMetrics (a usage series
// when the usage is known; a container's limit, available + usage, only
// when its available swap is known: a limited swap limit). The swap
// families, ALPHA in the kubelet, are left out when they have no series.
// One function: the families are declared, filled and written in the
// kubelet's order, each a few lines.
func writeResourceMetrics(w io.Writer, node nodeUsage, stats []*runtimeapi.ContainerStats, running []*runtimeapi.Container, swap swapFigures, scrapeError int) {
	nodeCPU := family{name: "node_cpu_usage_seconds_total", help: "[STABLE] Cumulative cpu time consumed by the node in core-seconds", typ: "counter"}
	nodeMem := family{name: "node_memory_working_set_bytes", help: "[STABLE] Current working set of the node in bytes", typ: "gauge"}
	ctrCPU := family{name: "container_cpu_usage_seconds_total", help: "[STABLE] Cumulative cpu time consumed by the container in core-seconds", typ: "counter"}
	ctrMem := family{name: "container_memory_working_set_bytes", help: "[STABLE] Current working set of the container in bytes", typ: "gauge"}
	ctrStart := family{name: "container_start_time_seconds", help: "[STABLE] Start time of the container since unix epoch in seconds", typ: "gauge"}
	podCPU := family{name: "pod_cpu_usage_seconds_total", help: "[STABLE] Cumulative cpu time consumed by the pod in core-seconds", typ: "counter"}
	podMem := family{name: "pod_memory_working_set_bytes", help: "[STABLE] Current working set of the pod in bytes", typ: "gauge"}
	nodeSwap := family{name: "node_swap_usage_bytes", help: "[ALPHA] Current swap usage of the node in bytes. Reported only on non-windows systems", typ: "gauge", omitEmpty: true}
	ctrSwap := family{name: "container_swap_usage_bytes", help: "[ALPHA] Current amount of the container swap usage in bytes. Reported only on non-windows systems", typ: "gauge", omitEmpty: true}
	ctrSwapLimit := family{name: "container_swap_limit_bytes", help: "[ALPHA] Current amount of the container swap limit in bytes. Reported only on non-windows systems", typ: "gauge", omitEmpty: true}
	podSwap := family{name: "pod_swap_usage_bytes", help: "[ALPHA] Current amount of the pod swap usage in bytes. Reported only on non-windows systems", typ: "gauge", omitEmpty: true}
	scrape := family{name: "resource_scrape_error", help: "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise", typ: "gauge"}

	if node.cpuErr == nil {
		nodeCPU.add("", node.cpuSeconds, node.at)
	}
	if node.memError == nil {
		nodeMem.add("", float64(node.workingSetBytes), node.at)
	}
	if sw := swap.node; sw != nil && sw.SwapUsageBytes != nil {
		nodeSwap.add("", float64(*sw.SwapUsageBytes), sw.Time.Time)
	}
	isRunning := map[string]*runtimeapi.Container{}
	for _, c := range running {
		isRunning[c.Id] = c
	}
	type podKey struct{ ns, name string }
	type podSum struct {
		uid        string
		cpu, mem   float64
		cpuAt, mAt time.Time
		hasCPU     bool
		hasMem     bool
	}
	pods := map[podKey]*podSum{}
	for _, s := range stats {
		a := s.GetAttributes()
		c, ok := isRunning[a.GetId()]
		if !ok {
			continue // the kubelet reports running containers only
		}
		l := a.GetLabels()
		pk := podKey{l[cri.LabelPodNamespace], l[cri.LabelPodName]}
		labels := fmt.Sprintf(`container=%q,namespace=%q,pod=%q`, l[cri.LabelContainerName], pk.ns, pk.name)
		ps := pods[pk]
		if ps == nil {
			ps = &podSum{uid: l[cri.LabelPodUID]}
			pods[pk] = ps
		}
		if cpu := s.GetCpu(); cpu != nil && cpu.GetUsageCoreNanoSeconds() != nil {
			at := time.Unix(0, cpu.GetTimestamp())
			v := float64(cpu.GetUsageCoreNanoSeconds().GetValue()) / 1e9
			ctrCPU.add(labels, v, at)
			ps.cpu, ps.cpuAt, ps.hasCPU = ps.cpu+v, at, true
		}
		if mem := s.GetMemory(); mem != nil && mem.GetWorkingSetBytes() != nil {
			at := time.Unix(0, mem.GetTimestamp())
			v := float64(mem.GetWorkingSetBytes().GetValue())
			ctrMem.add(labels, v, at)
			ps.mem, ps.mAt, ps.hasMem = ps.mem+v, at, true
		}
		created := time.Unix(0, c.GetCreatedAt())
		ctrStart.add(labels, float64(created.UnixNano())/1e9, created)
		if sw := swap.containers[a.GetId()]; sw != nil {
			var usage float64
			if sw.SwapUsageBytes != nil {
				usage = float64(*sw.SwapUsageBytes)
				ctrSwap.add(labels, usage, sw.Time.Time)
			}
			if sw.SwapAvailableBytes != nil {
				ctrSwapLimit.add(labels, float64(*sw.SwapAvailableBytes)+usage, sw.Time.Time)
			}
		}
	}
	for pk, ps := range pods {
		labels := fmt.Sprintf(`namespace=%q,pod=%q`, pk.ns, pk.name)
		if ps.hasCPU {
			podCPU.add(labels, ps.cpu, ps.cpuAt)
		}
		if ps.hasMem {
			podMem.add(labels, ps.mem, ps.mAt)
		}
		if sw := swap.pods[ps.uid]; sw != nil && sw.SwapUsageBytes != nil {
			podSwap.add(labels, float64(*sw.SwapUsageBytes), sw.Time.Time)
		}
	}
	for _, f := range []*family{&ctrCPU, &ctrMem, &ctrStart, &ctrSwapLimit, &ctrSwap, &nodeCPU, &nodeMem, &nodeSwap, &podCPU, &podMem, &podSwap} {
		f.write(w)
	}
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %d\n", scrape.name, scrape.help, scrape.name, scrape.typ, scrape.name, scrapeError)
}
