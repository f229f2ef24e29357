// Package userns gives each pod with spec.hostUsers: false a user
// namespace of its own: the kubelet's user namespace manager
// (pkg/kubelet/userns), whose allocation it keeps on disk in the same file
// and format, so that a crivk started over a root dir finds the ranges of
// the pods already running, and so does a kubelet.
//
// # The ID ranges
//
// The node's range of host IDs (Mappings) is the `kubelet` user's
// subordinate range, read with getsubids (identical for UIDs and GIDs),
// or, where there is no such user or no getsubids, every ID from idsPerPod
// up to 2^32. It is cut into slots of idsPerPod IDs (the
// KubeletConfiguration's userNamespaces.idsPerPod, 65536 by default, a
// multiple of 65536); slot 0 (host ID 0) is never given out. A pod gets
// one whole slot, mapped from container ID 0, the same for UIDs and GIDs:
//
//	container 0..idsPerPod-1  ->  host first..first+idsPerPod-1
//
// New refuses, with the kubelet's messages, a range that is not made of
// whole slots, that starts below idsPerPod, or that has fewer slots than
// the node's maxPods.
//
// # One pod's allocation
//
//	no file ──PodMappings──> allocated, <root-dir>/pods/<uid>/userns written
//	   ^                         │        (written, fsynced, then returned)
//	   │                         │ PodMappings again: the file's range
//	   └──────Release────────────┘
//	          (the pod terminated: its containers stopped and its cgroup
//	           removed, SyncTerminatedPod; or an orphan, CleanupOrphans)
//
// New reads the file of every pod directory and records its range, so a
// restart never gives a running pod's range to another pod; a file that
// is not one the manager writes (two mappings, root not mapped, UIDs and
// GIDs apart, a range not a slot of this node) fails New, as it fails the
// kubelet's start.
//
// # Who calls what
//
//   - internal/nodeagent builds the Manager (New) from the node's root dir,
//     idsPerPod and maxPods, and hands it to cri (cri.Config.UserNamespaces)
//     and lifecycle (EngineConfig.UserNamespaces).
//   - cri asks PodMappings when it makes a sandbox for a pod with
//     hostUsers: false, after checking that the runtime handler supports
//     user namespaces (a runtime that does not gets the kubelet's refusal
//     and nothing is allocated).
//   - lifecycle calls Release when a pod's worker ends it
//     (SyncTerminatedPod, SyncTerminatingRuntimePod) and CleanupOrphans
//     after its housekeeping removed orphaned pod directories.
//
// The manager never creates, changes or removes a namespace itself: the
// runtime makes the namespace from the mappings, and mounts volumes
// idmapped into it.
package userns
