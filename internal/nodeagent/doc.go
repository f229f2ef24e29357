// Package nodeagent assembles and runs crivk's node agent: from validated
// Settings (cmd/crivk's flags after --config) it builds each node's stack
// out of the product packages and runs it until its context ends. It is
// the kubelet's cmd/kubelet/app server.go RunKubelet and NewMainKubelet:
// wiring, in the one order the pieces depend on, and no rule of its own.
//
// # Who calls what
//
// cmd/crivk declares and parses the flags into a Settings, calls
// Settings.Validate (exit 2 on an error, before anything starts) and then
// Run, once. Nothing else calls this package.
//
// # The run phases, in order (Run, then runNodes)
//
//  1. Validate again; tracing and profiling (internal/debugserver),
//     logging, memory release (internal/memrelease), /healthz
//     (internal/healthz), answering from the start.
//  2. The nodes: fleet.Specs of the settings. A single node is a fleet of
//     one (Spec.Multi false), built by the same functions as each node of
//     --node-count (docs/scale.md).
//  3. The host: node IP, directories, crivk's OOM score (prepareHost).
//  4. Per node (newNode): its directories, API clients (clients.go: pods,
//     events and heartbeat apart), pod cgroup tree (package cm, bounded
//     by nodestatus.MachineCapacity less the reservations, by its portion
//     for a node of many), event recorder, metrics, and its NotReady
//     registration while the runtime is not up.
//  5. One runtime connection (cri.Await), refused for many nodes while it
//     holds a single-node crivk's sandboxes (fleet.RefuseUnlabelled); a
//     single node adopts them. RuntimeClasses (runtimeclass).
//  6. For many nodes only, what they share (startShared): one walk of the
//     runtime feeding each node's PLEG (pleg.Shared), woken by one
//     task-event stream, and one image collector.
//  7. Per node (startNode, startEngine): its runtime (the base itself for
//     a single node, cri.Runtime.ForNode for a node of many), Node object,
//     node API security, pod informer, then the engine and its loops: the
//     volumes, the node view, the eviction manager, static pods and mirror
//     pods, device plugins, the plugin manager (CSI and DRA drivers'
//     registration on plugins_registry, a single node's only), the
//     engine, the image credential provider plugins (registered once by
//     Settings.Validate, shared; each node's runtime asks them with its
//     own service account reads and the volumes' token cache), the PLEG
//     (a single node's woken by its own task-event stream), the node
//     provider, the garbage
//     collectors (gc.go), log rotation, the node API, the informer's
//     handlers; the read-only port; virtual-kubelet's node and pod
//     controllers (internal/vknode) with the deletion guard (podwriter).
//  8. Serve every node until ctx ends (nil: the pods are left running) or
//     one fails (its error; the others stop serving).
//
// # What it must never do
//
// Hold a product rule: the machine's capacity is nodestatus', the sources'
// readiness lifecycle's, the eviction thresholds eviction's, a node's
// share of the machine fleet's and nodestatus'. Parse flags (cmd/crivk
// does). Keep a node's state beyond wiring it, or let one node's stack
// read another's: what nodes share is built once, here, and handed to
// each.
package nodeagent
