// Package eviction is crivk's eviction manager, the kubelet's
// pkg/kubelet/eviction: it watches the node's resources, reports the
// pressure conditions, refuses new pods under pressure and, when a
// threshold is met, evicts one pod at a time so that the node, not the
// kernel's OOM killer or a full disk, decides what goes.
//
// # Signals
//
// Every round reads the node's statistics (nodeapi/stats's Summarize, the
// kubelet's summary; nothing is measured twice) and derives:
//
//	memory.available     MemTotal - working set of the root cgroup (package cm reads it:
//	                     cgroup v1 memory.usage_in_bytes - total_inactive_file of the
//	                     memory hierarchy's root; v2 anon + file - inactive_file of the
//	                     root's memory.stat, as opencontainers/cgroups gives cAdvisor)
//	allocatableMemory.available
//	                     kubepods' memory limit - its working set: the summary's "pods"
//	                     system container (package cm reads the cgroup); none without
//	                     pod cgroups
//	nodefs.available     statfs of --root-dir: available bytes and free inodes
//	nodefs.inodesFree
//	imagefs.available    the runtime's image filesystem (CRI ImageFsInfo, statfs of its
//	imagefs.inodesFree   mountpoint)
//	pid.available        min(kernel.pid_max, kernel.threads-max) - tasks (/proc/loadavg)
//
// # A node of many (Config.MemoryShare)
//
// One crivk process serving several nodes (--node-count, docs/scale.md)
// gives each node's manager its part of the machine's memory (its Node's
// memory capacity, --node-shares). Its memory.available is then two
// measures, kept side by side in one observation:
//
//	the node's      MemoryShare - working set of its own pods (the summary's "pods"
//	                system container: kubepods under <cgroup-root>/<node>; no new read)
//	the machine's   as above (MemTotal - the root cgroup's working set)
//
// A memory.available threshold is met when either measure meets it, each
// against its own capacity (a percentage is of the share for the one, of
// the machine for the other; the same with the minimum reclaim). So a
// node whose own pods fill its share is under MemoryPressure and evicts
// one of them while the machine still has memory, and its neighbours are
// not under pressure for it unless the machine itself runs low (each
// node's pods are bounded by its own kubepods; the machine's measure is
// the only one they share); and the machine's real pressure is still seen
// by every node, each of which evicts one of its own pods per round (N nodes: up to
// N pods per round for the machine, one per node, as N kubelets on one
// host would). The eviction message gives the figures of the measure that
// met the threshold; the "attempting to reclaim" log says which
// (measure=node or machine). Without pod cgroups (no "pods" container) the
// machine's measure stands alone. The kernel notification
// (--kernel-memcg-notification) watches the machine's root cgroup and
// kubepods as before; the node's own measure is polled. Beside it the
// allocatableMemory.available twin of each hard threshold still watches
// the node's kubepods against its bound (its allocatable plus the hard
// threshold); the node's memory.available carries the same idea to soft
// thresholds, percentages and the MemoryPressure message, against its
// share's capacity. MemoryShare 0 (a single node) is the kubelet's
// memory.available, unchanged.
//
// # Thresholds (evictionapi.ParseThresholds, the kubelet's flags and formats)
//
// The signals, the Threshold type and the parser of the flags are package
// eviction/api's (evictionapi, the kubelet's pkg/kubelet/eviction/api):
// cmd/crivk parses the flags once and gives the same thresholds to this
// manager (Config.Thresholds) and to nodestatus (Reservations.EvictionHard).
// --eviction-hard (default evictionapi.DefaultHard, also taken off the
// allocatable by nodestatus; with pod cgroups, Config.EnforceNodeAllocatable, each hard
// memory.available threshold gets an allocatableMemory.available twin, as
// the kubelet's with --enforce-node-allocatable=pods), --eviction-soft
// with --eviction-soft-grace-period,
// --eviction-minimum-reclaim, --eviction-max-pod-grace-period,
// --eviction-pressure-transition-period (5m). A threshold is met when the
// available amount is below its value (a quantity or a percentage of the
// capacity); once met and acted on it stays met until the available amount
// is above value + minimum reclaim.
//
// # The caller's loop
//
// cmd/crivk makes one Manager (New) before the engine, hands it to the
// engine as its first admission check (lifecycle.Config.Pressure, the
// kubelet's eviction admit handler) and to the node status loop as its
// PressureSource (nodestatus), then runs Run(ctx, engine). Each round
// (synchronize, every MonitoringPeriod, 10 s):
//
//  1. observe the signals; the met thresholds, with those met before whose
//     minimum reclaim is not reached;
//  2. the conditions (MemoryPressure, DiskPressure, PIDPressure) of every
//     met threshold, grace period or not, reported until the transition
//     period has passed since it was last met;
//  3. pods past an emptyDir sizeLimit, their ephemeral-storage limit or a
//     container's limit are evicted first, pressure or not (the kubelet's
//     localStorageEviction), with grace 1 s;
//  4. of the thresholds past their grace period and measured anew since the
//     last round, memory first: under disk pressure the node's own reclaim
//     runs first (ContainerGC, then ImageGC: dead containers, unused
//     images); if measured again nothing is met, no pod goes;
//  5. otherwise the active pods are ranked for the signal (rank.go: usage
//     above requests, then priority, then usage above requests) and the
//     first that is not critical is evicted: lifecycle.Engine.Evict stops
//     its containers (grace 1 s for a hard threshold, the shorter of
//     --eviction-max-pod-grace-period and the pod's for a soft one), then
//     publishes it Failed (Succeeded, without reason and message, when
//     all its containers exited 0, as the kubelet's), reason Evicted,
//     with the kubelet's message
//     ("The node was low on resource: memory. Threshold quantity: ...,
//     available: .... Container c was using ..., request is ..., has larger
//     consumption of memory. ") and the DisruptionTarget condition; the
//     Evicted event carries the offending containers;
//  6. after an eviction, wait (up to 30 s) for the pod to be cleaned up
//     before the next round, so the next decision sees what it freed.
//
// Admission under pressure (Admit): under MemoryPressure alone, BestEffort
// pods are refused unless they tolerate the memory-pressure taint; under
// any other pressure every pod; critical pods (static, mirror, priority
// >= system-cluster-critical's) never. Reason Evicted, message "The node
// had condition: [DiskPressure]. ".
//
// Metrics: kubelet_evictions{eviction_signal} and
// kubelet_eviction_stats_age_seconds{eviction_signal} (Config.Observe*,
// package metrics).
//
// # What it must never do
//
//   - Never evict more than one pod per round, nor a critical pod.
//   - Never stop a container or write a status itself: the engine does
//     (Evict), so a pod is never shown terminal while its containers
//     run, and never deleted: an evicted pod stays terminal in the API.
//   - Never write the Node: nodestatus reads the pressure through
//     PressureSource.
//   - Never import nodestatus, provider or cmd: it sits beside them, above
//     lifecycle.
//
// # The memcg threshold notification (memcg.go)
//
// With Config.KernelMemcgNotification (--kernel-memcg-notification), Run
// makes one notifier per memory.available threshold on the root memory
// cgroup, and one per allocatableMemory.available threshold on kubepods'
// (Config.PodsMemoryCgroup), as the kubelet's (cgroup v1: the wiring gives
// the root memory cgroup, Config.MemoryCgroup, from cm.Host; on cgroup v2
// there is none, and the manager logs that it is not supported and polls
// alone, as the kubelet). Each round, at most every 10 s, re-arms it
// at capacity - threshold + inactive_file of memory.usage_in_bytes
// (cgroup.event_control with an eventfd); when the kernel signals, Run
// runs a round at once instead of waiting for the monitoring period. Only
// Run's goroutine touches the notifiers; the eventfd readers only send on
// a channel of one. The kernel part sits behind the memcg interface
// (cgroupV1 is the real one), so the arithmetic and the re-arming are
// tested without root.
//
// Not done: a separate container filesystem (containerfs.* thresholds are
// accepted and follow nodefs), and a second hard allocatableMemory.available
// threshold beside one given on the command line (the kubelet keeps both).
package eviction
