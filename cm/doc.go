// Package cm is crivk's cgroup manager: the node's pod cgroup tree, as the
// kubelet's container manager keeps it with the cgroupfs driver
// (pkg/kubelet/cm: qosContainerManager, podContainerManager,
// ResourceConfigForPod).
//
// # Layout
//
// Under the cgroup root (--cgroup-root, default "/"; another root lets crivk
// live beside a kubelet on one machine):
//
//	<root>/kubepods                     cpu.shares = allocatable CPU, memory limit =
//	                                    capacity - system-reserved - kube-reserved,
//	                                    pids.max = MaxPID - the pid reservations
//	<root>/kubepods/pod<uid>            Guaranteed pods
//	<root>/kubepods/burstable           cpu.shares = sum of the Burstable pods' CPU requests
//	<root>/kubepods/burstable/pod<uid>  Burstable pods
//	<root>/kubepods/besteffort          cpu.shares = 2
//	<root>/kubepods/besteffort/pod<uid> BestEffort pods
//
// A pod cgroup holds the sum of its containers' requests and limits
// (component-helpers' PodRequests/PodLimits, which take init containers,
// sidecars, pod-level resources and overhead into account; a pod-level
// value replaces the containers' sum): CPU shares from the requests; CFS
// quota and period when every container (init containers as PodLimits sees
// them) has a CPU limit or the pod has one at pod level; the memory limit
// likewise; a Guaranteed pod gets both whatever; a BestEffort pod only gets
// the minimum shares (the kubelet's ResourceConfigForPod, PodLevelResources
// on; its class from the pod-level values when it sets them). With --pod-max-pids N > 0 (the kubelet's
// podPidsLimit) every pod cgroup gets pids.max N when it is made, whatever
// its class: a pod cgroup that already exists (crivk restarted with
// another N) keeps its own, as the kubelet writes it only at creation.
// The pod's sandbox is created with the pod
// cgroup as its cgroup parent, so containerd puts the sandbox and every
// container of the pod below it, where the container's own limits apply.
//
// cgroup v1 (one hierarchy per controller, this machine) and v2 (one unified
// hierarchy, detected at start) are both handled by
// github.com/opencontainers/cgroups, the library the kubelet and runc use:
// its fs and fs2 managers create, set and remove the cgroups; this package
// never writes cgroupfs files itself.
//
// # The host's cgroups (Host)
//
// Host is the one place in crivk that knows cgroup v1 from v2 and where the
// hierarchies are mounted; every reader of cgroup files goes through it
// (host.go). internal/nodeagent detects it once per process (DetectHost)
// and hands it to:
//
//	Settings.Validate    Version: the kubelet's refusal of a cgroup v1 host
//	                     (--fail-cgroupv1) and of singleProcessOOMKill false on v1
//	Manager (Config.Host) the pod cgroup tree and every sample below
//	nodeapi/stats        NodeUsage: the node's CPU and memory (its memory.available),
//	                     as cAdvisor's root container, on v1 and v2; RootCgroupSample
//	eviction             MemcgDir: the v1 root memory cgroup of the threshold
//	                     notification ("" on v2, which has none)
//	cri (the wiring)     SwapAccounting and Version: the swap controller; Version:
//	                     whether containers get memory.oom.group (v2)
//
// Unit tests give a Host on a temporary tree (NewHost with V1Mounts or
// V2Mount); the library then needs cgroups.TestMode to read a plain
// directory as cgroupfs.
//
// # Life of a pod cgroup
//
//	                 EnsurePod (each sync of a pod that may run,
//	                 |          before its sandbox is created)
//	absent --------> present, values of the pod's QoS class
//	   ^                 |
//	   |   RemovePod     | the pod terminated: its containers and sandbox
//	   +-----------------+ are stopped (SyncTerminatedPod, the runtime-pod
//	                       path), or housekeeping finds the cgroup of a pod
//	                       nobody knows and no runtime pod has (also after
//	                       a crivk restart)
//
// RemovePod first kills what still runs inside (the kubelet's
// tryKillingCgroupProcesses: a process a stopped container leaked), then
// removes the cgroup in every hierarchy. The Burstable QoS cgroup's shares
// follow the pods: EnsurePod and RemovePod recompute them.
//
// # Who calls what
//
// internal/nodeagent builds the Manager (New, then Start for the node-level
// cgroups) and hands it to the engine (lifecycle.Config.PodCgroups) and its
// CgroupParent to the runtime (cri.Config.CgroupParent). The engine calls
// EnsurePod from SyncPod, RemovePod from SyncTerminatedPod and
// SyncTerminatingRuntimePod, and PodUIDs from housekeeping's orphan sweep.
//
// An in-place resize changes an existing pod cgroup only through
// ResizePodCgroup, one value at a time, which package cri's resize calls
// in the kubelet's order around its containers' updates (through
// cri.Config.PodCgroups, wired by cmd/crivk); PodCgroupValues tells it
// what grows and what shrinks. EnsurePod leaves an existing pod cgroup
// it made alone.
//
// ContainerProcesses counts a container's processes in its cgroup below
// the pod's, for /stats/summary's process_stats (package nodeapi/stats,
// through the Processes interface it declares; wired by cmd/crivk).
// PodCgroupSample and ContainerCgroupSample read a pod's, a sandbox's or
// a container's cgroup as cAdvisor does (CgroupSample: the library's
// GetStats, the limits, the oom_kill counter, cgroup.procs, the creation
// time) for /metrics/cadvisor (nodeapi/stats' Cgroups interface).
// PodCgroupConfig reads a pod cgroup's CPU shares, quota and period and
// memory limit from cgroupfs for the pod status' resources (the kubelet's
// GetPodCgroupConfig; the engine through its PodCgroups interface).
// PodsMemory and PodsCgroupSample read the node-allocatable cgroup,
// kubepods, for /stats/summary's "pods" system container (its memory,
// and its CPU time, RSS and page faults; nodeapi/stats' PodsCgroup
// interface). All of them only read.
//
// The package sits beside lifecycle, not under it, as the kubelet keeps cm
// beside its pod logic: the engine knows it only through the PodCgroups
// interface it declares itself, and no lifecycle file imports it. It must
// never decide when a pod's cgroup goes (the engine does), talk to the
// runtime, or import lifecycle or cri.
package cm
