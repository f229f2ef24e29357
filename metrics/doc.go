// Package metrics is the agent's own /metrics on the node API: the Go
// runtime's and the process's metrics, crivk_build_info, and the kubelet's
// metrics for the work crivk does, under the kubelet's names, labels and
// buckets (pkg/kubelet/metrics), so that dashboards and the e2e framework's
// metrics grabber read a crivk node as a kubelet.
//
// # The caller's loop
//
// cmd/crivk makes one Agent per process (NewAgent) before the first API
// request, calls RegisterClientMetrics once so that client-go counts every
// request in it, and hands its methods to the packages that do the work as
// hooks, each declared by its consumer:
//
//   - cri.Config.ObserveCall: every CRI call (kubelet_runtime_operations_*);
//   - pleg.Config.ObserveRelist and ObserveRunning: every relist,
//     the running pods and containers it saw;
//   - lifecycle.Config.ObserveSync, ObservePodStart and ObservePodStartSLI:
//     the pod workers' syncs and each new pod's start;
//   - WatchPods with lifecycle.Engine.PodCounts: the desired and working
//     pods, read at each scrape;
//   - eviction.Config.ObserveEviction and ObserveStatsAge: the eviction
//     manager's evictions by signal and the age of the stats behind them;
//   - lifecycle.Config.ObservePreemption: the pods evicted to admit a
//     critical pod, by the resource it lacked.
//   - images.Config.ObserveRemoved and ObserveCollection, and
//     cri.ContainerGCConfig.Observe: the garbage collectors (gc.go).
//
// The node API serves Handler at GET /metrics, authorised as nodes/metrics.
// The probe metrics (/metrics/probes) are not here: they live beside the
// node API that serves them.
//
// # Many nodes in one process
//
// A multi-node crivk (docs/scale.md) makes one Agent per node, each served
// on its node's /metrics. What belongs to the process is counted in node
// 0's Agent only: client-go's requests (RegisterClientMetrics), every CRI
// call of the one runtime connection (the shared relist walk's, the image
// collector's and every node's own), and the one image collector's. The
// rest (relists, pod workers, pod starts, running pods, evictions,
// container GC) is each node's own. No node label is added: the names and
// labels stay the kubelet's.
//
// # What it must never do
//
//   - Never rename a metric or a label, or change a histogram's buckets:
//     the names are the kubelet's contract with whoever reads them.
//   - Never block or fail a caller: every hook is a counter, gauge or
//     histogram update; the engine's counts are read at scrape time, not
//     pushed.
//   - Never register in Prometheus's global registry: an Agent serves its
//     own, so tests can make as many as they like.
//   - Never import provider, nodestatus or cmd/crivk: it sits above
//     lifecycle and cri (whose types it reads) and below the wiring.
package metrics
