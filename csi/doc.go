// Package csi is crivk's side of CSI driver registration: the kubelet's
// pkg/volume/csi RegistrationHandler with its store of registered drivers
// (csi_plugin.go) and the nodeinfomanager (pkg/volume/csi/nodeinfomanager)
// that publishes each driver's node information in the API. It is the
// handler of the plugin manager's "CSIPlugin" type: a CSI driver's
// node-driver-registrar announces the driver on <root-dir>/plugins_registry
// and this package takes it from there, so that the scheduler and the
// external provisioner and attacher see the driver on the node as on a
// kubelet's.
//
// # Responsibility
//
// One Drivers per node owns:
//
//   - the registry of the node's CSI drivers: name → endpoint (the
//     driver's CSI socket), the highest CSI version it supports, and what
//     its NodeGetInfo answered (node ID, max_volumes_per_node, accessible
//     topology). Get and List read it; the volume manager will dial the
//     endpoint for NodeStage/NodePublish (issue #47);
//   - the node's CSINode object (storage.k8s.io/v1, named as the node,
//     owned by the Node through an owner reference with its UID): one
//     entry per driver in spec.drivers (name, nodeID, topologyKeys sorted,
//     allocatable.count from max_volumes_per_node when it is positive,
//     truncated to 2^31-1) and the annotation
//     storage.alpha.kubernetes.io/migrated-plugins listing the seven in-tree
//     plugins the kubelet reports migrated;
//   - on the Node: the annotation csi.volume.kubernetes.io/nodeid (a JSON
//     map of driver name to node ID) and the driver's topology segments as
//     labels, written through a strategic-merge PATCH of nodes/status (the
//     kubelet's nodeutil.PatchNodeStatus), which virtual-kubelet's
//     three-way node status patch leaves alone.
//
// # A driver's registration (the plugin manager's calls)
//
//  1. ValidatePlugin: the versions must contain a 1.x (the highest 1.x is
//     the driver's version; 0.x and 2.x are refused), and no driver of the
//     name may be registered with that version or a higher one.
//  2. RegisterPlugin: validated again; the driver enters the registry with
//     its endpoint and version; NodeGetInfo on the endpoint (2 minutes at
//     most, the kubelet's csiTimeout); then the Node (nodeid annotation,
//     topology labels: a label already set to another value is an error,
//     "detected topology value collision") and the CSINode entry (the
//     CSINode created if missing; one owned by another Node, or by none,
//     is deleted and made again at the next try). A failure of either
//     call undoes the registration as DeRegisterPlugin does, and is the
//     registration's error (the registrar is told, the plugin manager
//     retries).
//  3. DeRegisterPlugin (the registration socket removed): the driver leaves
//     the registry, its CSINode entry and its nodeid annotation entry are
//     removed. The topology labels stay, as with the kubelet. As with the
//     kubelet, a driver is forgotten by name: the removal of an older
//     registration socket of a driver registered again through a newer one
//     forgets the newer one too.
//
// Every API write is a read-modify-write of the current object under one
// lock, tried up to four times, 10, 50 and 250ms apart, whatever the error
// (the kubelet's updateBackoff).
//
// # Who calls what
//
//   - internal/nodeagent: New, then the plugin manager's AddHandler for
//     "CSIPlugin" (pluginmanager.Handler).
//   - InitializeCSINode: the kubelet creates or adopts the CSINode at start
//     even without any driver (initializeCSINode: it waits for the API
//     server, then tries six times over about 140s, and exits if it
//     failed; its node stays NotReady with "CSINode is not yet
//     initialized" meanwhile). It is here, tested, and not called yet:
//     see "Not done".
//   - Get and List: the future CSI volume work.
//
// # What it must never do
//
//   - Import the plugin manager, the engine or the provider.
//   - Write another node's Node or CSINode, or a CSINode entry, annotation
//     entry or label of a driver it has not registered (but the topology
//     labels left by a driver it deregistered).
//
// # Not done (the kubelet does)
//
// InitializeCSINode at start and the node's readiness waiting for it; the
// periodic update of allocatable.count (MutableCSINodeAllocatableCount,
// GA: NodeGetInfo again every CSIDriver nodeAllocatableUpdatePeriodSeconds,
// and after a ResourceExhausted attach error); CSINode status
// (CSIVolumeHealth); the CSI metrics; everything a CSI volume needs
// (NodeStage, NodePublish, ...).
package csi
