// Package nodestatus is the Node object crivk registers and keeps up to
// date, as the kubelet's pkg/kubelet/nodestatus and its node status loop:
//
//   - the Node crivk registers (BuildNode from a NodeConfig): capacity read
//     from the machine, allocatable (capacity less the Reservations:
//     --system-reserved, --kube-reserved and the hard eviction thresholds),
//     addresses, node info, labels and the registration taints;
//   - the conditions the node owns (NodeConditions): Ready from the
//     runtime's readiness and the PLEG's health, and MemoryPressure,
//     DiskPressure and PIDPressure;
//   - the node status loop virtual-kubelet's node controller drives
//     (NodeProvider), with the kubelet's node events (Starting, NodeReady,
//     NodeNotReady, ...);
//   - the NotReady registration while crivk waits for a runtime that is not
//     up yet (NotReadyReporter);
//   - the node as the API has it (View), kept by a watch of the node's own
//     object, as the kubelet's node informer;
//   - what the node's events are recorded on (NodeRef): the kubelet's
//     nodeRef without a UID and its nodeRefWithUID, with the Node's UID
//     once the View has it (v1.37, #139921);
//   - status.images (images.go, the kubelet's Images setter): the 50
//     biggest images from the image collector's list
//     (NodeProvider.SetImages), written when they change.
//
// # The caller's loop
//
// cmd/crivk wires it in this order:
//
//  1. Parse --system-reserved and --kube-reserved (ParseResourceList) into
//     Reservations, with the thresholds evictionapi.ParseThresholds parsed
//     once from --eviction-hard (default evictionapi.DefaultHard; the
//     eviction manager gets the same ones). Reservations.PodsBound bounds
//     the pod cgroup tree; Reservations.Allocatable is the Node's
//     allocatable.
//  2. While the runtime does not answer, run NotReadyReporter.Run. Cancel it
//     and wait for it to return once the runtime answers, before step 5: it
//     writes the Node itself, and a late NotReady must not follow the node
//     controller's Ready.
//  3. BuildNode with the runtime's version and readiness: the Node to
//     register.
//  4. NewView of that Node, then View.Run with View.ListWatch for the
//     lifetime of the agent. Admission reads View.Node (it never waits for
//     the API); the node controller's reads before a status write use
//     View.Watched; the status loop compares with View.APINode.
//  5. NewNodeProvider with the runtime, the Node, the node status update
//     period, View.APINode, the event recorder, the eviction manager (its
//     PressureSource) and the PLEG's health check,
//     handed to virtual-kubelet's node controller. The controller calls
//     Ping before each Lease renewal and NotifyNodeStatus once; NodeProvider
//     then checks the runtime every period and calls back when a condition
//     changed status or the API's node differs (the node lifecycle
//     controller's Unknown after an outage). The engine asks
//     NodeProvider.NetworkError before starting a pod that is not on the
//     host network.
//
// # Who writes what
//
//   - The Node's creation and its status after registration: virtual-
//     kubelet's node controller (internal/vknode), from the Node that
//     NodeProvider hands it; the Lease, renewed whenever Ping answers.
//   - Before the runtime first answers: NotReadyReporter, a Create or a
//     status update of the conditions the node owns only.
//   - Not crivk: NetworkUnavailable (the network provider's), the Unknown
//     conditions and the not-ready/unreachable taints (the node lifecycle
//     controller's), labels and taints others set after registration (the
//     View reads them, for admission).
//
// # What it must never do
//
//   - Ping never asks the runtime: liveness is the agent's, readiness the
//     runtime's. The Lease is renewed while containerd is down, so the node
//     is NotReady, not Unknown, and its pods are not evicted as unreachable.
//   - Never report NetworkUnavailable, and never drop it (or any condition
//     the node does not own) from a status it writes: NotReadyReporter
//     keeps them explicitly, the node controller's three-way status patch
//     by construction.
//   - View.APINode never returns the Node crivk registered: it says nothing
//     of what the API has.
//   - Never write pod objects, and never import lifecycle or provider: the
//     runtime is asked through ReadinessChecker (cri.Readiness), the PLEG
//     through plain health functions.
//
// # The pressure conditions
//
// MemoryPressure, DiskPressure and PIDPressure are the eviction manager's
// (package eviction, the kubelet's pkg/kubelet/eviction): it decides them
// from its signals and thresholds, with the transition period, and
// NodeProvider reads them through PressureSource at every check, as the
// kubelet's MemoryPressureCondition setter reads the eviction manager's
// IsUnderMemoryPressure, with the kubelet's reasons and messages
// ("KubeletHasInsufficientMemory" / "kubelet has insufficient memory
// available", ...) and node events (NodeHasInsufficientMemory, ...). The
// node lifecycle controller turns them into the node's pressure taints.
// --eviction-hard is parsed once (package eviction/api); nodestatus reads
// its hard memory.available and nodefs.available thresholds, for the
// allocatable only. The eviction manager never writes the Node.
package nodestatus
