// Package allocation keeps the resources the node has allocated to each
// pod and decides in-place resizes, as the kubelet's allocation manager
// (pkg/kubelet/allocation) and the resize conditions of its status manager.
//
// A pod's allocation is what its containers (and sidecars) and the pod
// itself (spec.resources, pod-level resources) were admitted with. Once
// a pod runs, the spec's resources (which the API's resize subresource
// changes) are only a request: the engine syncs the allocated pod
// (Allocated), and a spec that differs from the allocation, a container's
// resources or the pod-level ones, is a resize to decide
// (Manager.HandleResize, the kubelet v1.37's handlePodResourcesResize):
//
//	spec == allocation ───────────────────────> PodResizePending cleared
//	admission refuses it beside the others'
//	allocations (OutOfcpu, ...) ──────────────> PodResizePending Deferred, with
//	                                            admission's message (retried at
//	                                            the kubelet's triggers, retry.go)
//	fits ──> allocation := spec; PodResizePending cleared; PodResizeInProgress
//	         (new generation); Normal ResizeStarted
//
// The v1.37 kubelet finds no resize crivk could be asked for Infeasible:
// since v1.36 the API server refuses a resize beyond the node's
// allocatable (#136043) and static pods are resized as others; its
// remaining Infeasible cases (a feature gate off, containers that swap,
// the static CPU or memory manager, memory-backed volumes) do not arise
// on a crivk node.
//
// A generation of the spec is decided once at the pod's sync; a Deferred
// one is decided again, for every deferred pod in the kubelet's order
// (SortPending), when a pod is removed, another resize is asked for or
// finishes, and periodically (retry.go; the engine runs the loop).
//
// A Deferred decision is a Warning event (ResizeDeferred) when the reason
// or the generation changes. The engine then sets PodResizeInProgress
// while the runtime's values differ from the allocation
// (cri.ResizeInProgress for the containers; for the pod-level resources,
// the kubelet's actuated ones, the pod cgroup's values as crivk last
// wrote them, cri.Runtime.PodCgroupResizing), clears it when they match
// (Normal ResizeCompleted) and sets its reason Error with the runtime
// manager's message when applying the resize failed (Warning
// ResizeError). The messages are the kubelet's, with its JSON summary of
// the containers' resources (the kubelet's summary has no pod-level
// resources yet).
//
// # Where allocations live
//
// In memory, and in a checkpoint file (Config.Path,
// <root-dir>/allocated_pods_state, in the kubelet's own format and checksum
// (checkpoint.go), written whole and renamed into place at every change),
// read back at start (a file crivk wrote before it used the kubelet's
// format is read too; an unreadable one stops crivk, as it stops the
// kubelet): after a restart, a resize that was
// pending stays pending, and admission counts what was allocated, not
// what the specs ask. The runtime cannot hold it: a container's labels and
// annotations are fixed at its creation, and the values it reports are the
// actuated ones, which differ from the allocation while a resize is in
// progress (and leave the memory request out). The conditions are kept in
// memory only and taken back from the API's pod status after a restart
// (Backfill), as the kubelet's BackfillPodResizeConditions.
//
// What this package must never do: talk to the runtime or the API, or
// decide anything but allocations (admission's checks are given to it).
package allocation
