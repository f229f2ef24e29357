// Package fleet derives the nodes of a multi-node crivk, one process
// serving --node-count nodes over one containerd (docs/scale.md), from the
// process' settings: each node's name, node API ports, root, pod log and
// cgroup directories, kubeconfig and registration labels and taints
// (Specs), and its weight in the split of the machine (--node-shares,
// ParseShares: Spec.Weight of Spec.TotalWeight, 1 of N by default), which
// the caller turns into its nodestatus.Portion: its Node's capacity and
// allocatable, its kubepods bound and its eviction manager's share of the
// machine's memory.
//
// The caller (internal/nodeagent) runs, once per process, what the nodes share
// (logging, /healthz, profiling, the CRI connection as the base
// cri.Runtime, the one walk of the runtime that feeds every node's PLEG,
// lifecycle/pleg.Shared, with the task-event stream that wakes it, and the
// image collector) and then, for each Spec, one node's stack over
// cri.Runtime.ForNode(Spec.RuntimeNode()): API clients with the node's
// identity, its pod cgroup tree, its Node object and Lease, its pod
// informer, engine and node API. A count of 1 is a single-node crivk: its
// one Spec is the settings unchanged and its runtime the base itself
// (Spec.Multi false), so it behaves exactly as before.
//
// What each node owns and the rules that keep nodes apart:
//
//   - names <stem>-0 … <stem>-<N-1>, each a valid Node name;
//   - node API port --port+i, read-only port --read-only-port+i (when on):
//     the two ranges and the /healthz port never overlap, nor leave 1-65535;
//   - root dir <root-dir>/nodes/<name> (pod directories, volumes,
//     allocated_pods_state, pki/ and, with --bootstrap-kubeconfig, the
//     node's kubeconfig), pod log dir <pod-log-dir>/<name>, cgroup root
//     <cgroup-root>/<name>: no two nodes share a directory that one
//     node's housekeeping cleans;
//   - weights: one per node (--node-shares' count is --node-count), each
//     from 1 to MaxWeight; the parts are rounded down, so they never add
//     up to more than the machine (nodestatus.Portion);
//   - labels and taints deep-copied: nothing one node's stack changes is
//     seen by another (TestSpecsShareNoMutableState).
//
// It also holds the one admission rule the nodes of one machine share:
// host ports (HostPorts). A node's engine is built with its view
// (HostPorts.Node, as lifecycle.Config.Host) and, once built, the view
// watches the engine's holding pods (NodePorts.Watch). The view's lock is
// host-wide: every node's admission decision and its insertion of the
// admitted pod are serialised, so two nodes cannot both take a port; a pod
// whose hostPort (or hostNetwork containerPort) a pod of another node holds
// is refused with the kubelet's NodePorts reason, the message naming the
// other node and pod (TestHostPortsAdmit, TestHostPortsOneLock; on the
// cluster TestFleetThreeNodes). The process' own TCP listeners (every
// node's API and read-only port, /healthz, the profiling server: Listeners,
// HostPorts.Listening) are held by crivk itself on their bind addresses: a
// pod asking for one is refused the same way, the message naming the
// listener (TestHostPortsOwnListeners). A single-node crivk has no
// HostPorts and refuses neither, as the kubelet does not refuse its own
// ports.
//
// RefuseUnlabelled is the fleet's one rule about the runtime: many nodes
// refuse a runtime that holds crivk sandboxes with no node label (a
// single-node crivk's), which a fleet of one adopts (TestRefuseUnlabelled).
//
// The package does no I/O and starts nothing. It must never hold a node's
// loop, keep a record of pods (what a node holds is read from its engine at
// each decision) or decide about a pod anything but what the machine's
// sharing imposes.
package fleet
