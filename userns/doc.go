// Package userns gives each pod with spec.hostUsers: false a user
// namespace of its own: the kubelet's user namespace manager
// (pkg/kubelet/userns), whose allocation it keeps on disk in the same file
// and format, so that a crivk started over a root dir finds the ranges of
// the pods already running, and so does a kubelet.
//
// # The ID ranges
//
// The machine's range of host IDs (Mappings) is the `kubelet` user's
// subordinate range, read with getsubids (identical for UIDs and GIDs; an
// existing `kubelet` user without getsubids is an error, as for the
// kubelet), or, where there is no such user, every ID from idsPerPod up
// to 2^32. It is cut into slots of idsPerPod IDs (the
// KubeletConfiguration's userNamespaces.idsPerPod, 65536 by default, a
// multiple of 65536); slot 0 (host ID 0) is never given out, nor a range
// past 2^32 (where a slot would wrap to host ID 0). One Pool holds the
// slots for every node of the process (each node's Manager is its view):
// no two pods of the process get the same IDs, whatever the node count
// was when they got them. A pod gets one whole slot, a free one searched
// from a random place (as the kubelet's allocation map does), mapped from
// container ID 0, the same for UIDs and GIDs:
//
//	container 0..idsPerPod-1  ->  host first..first+idsPerPod-1
//
// New refuses, with the kubelet's messages, a range that is not made of
// whole slots, that starts below idsPerPod, or that has fewer slots than
// the process' nodes' maxPods.
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
// New reads the file of every pod directory of every pods directory it is
// given and records its range, so a restart never gives a running pod's
// range to another pod; a pod that has its range and lost its file gets
// the same range (and file) again, never a second one; a file that
// is not one the manager writes (two mappings, root not mapped, UIDs and
// GIDs apart, a range not a slot of this node) fails New, as it fails the
// kubelet's start.
//
// # Who calls what
//
//   - internal/nodeagent builds the Pool (New) over every pods directory
//     under the root dir, and hands each node's Manager to cri
//     (cri.Config.UserNamespaces, cri.NodeView) and lifecycle
//     (Config.UserNamespaces). A Pool it cannot make (no getsubids for an
//     existing `kubelet` user, a range too small) does not stop the node:
//     its pods with hostUsers: false are refused with the reason.
//   - cri asks PodMappings when it makes a sandbox for a pod with
//     hostUsers: false, after checking that the runtime handler supports
//     user namespaces (a runtime that does not gets the kubelet's refusal
//     and nothing is allocated).
//   - lifecycle calls Release when a pod's worker ends it
//     (SyncTerminatedPod, SyncTerminatingRuntimePod) and CleanupOrphans
//     in its housekeeping, which frees only the ranges of pods that
//     neither the API, the engine nor the runtime has.
//
// An agent beside it on the same machine (a kubelet, or another crivk,
// docs/coexistence.md) takes its IDs without seeing these files: there,
// the ranges must be configured apart (--user-namespaces-range), or crivk
// refuses such pods (the chart's default, --user-namespaces-range=none).
//
// The manager never creates, changes or removes a namespace itself: the
// runtime makes the namespace from the mappings, and mounts volumes
// idmapped into it.
package userns
