// Package devicemanager is crivk's device plugin manager, the kubelet's
// pkg/kubelet/cm/devicemanager with its plugin/v1beta1 server: device
// plugins (GPU, FPGA, test plugins) register on a unix socket, advertise
// their devices, and are asked for those devices when a pod requests the
// plugin's extended resource. The API is the kubelet's
// (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1), so an unchanged plugin
// written for the kubelet works with crivk.
//
// # Responsibility
//
// One Manager per node owns:
//
//   - the Registration gRPC server on <Dir>/kubelet.sock, Dir being
//     <root-dir>/device-plugins (the kubelet's
//     /var/lib/kubelet/device-plugins when crivk runs with
//     --root-dir=/var/lib/kubelet, as the node e2e suite expects); on start
//     every socket left in Dir is removed, as the kubelet's
//     CleanupPluginDirectory, since no plugin survives the agent's restart;
//   - one endpoint per resource name, its devices and their health;
//   - the devices allocated to each container of each pod, with the plugin's
//     AllocateResponse (envs, mounts, devices, annotations, CDI devices).
//
// # An endpoint's life
//
// A plugin calls Register(version, endpoint, resourceName). The manager
// checks the version ("v1beta1") and that the name is an extended resource,
// dials <Dir>/<endpoint> (10s), and calls GetDevicePluginOptions once; any
// failure is Register's error, in the kubelet's words ("failed to get
// device plugin options: ..."), and nothing of the plugin is kept. Then:
//
//	Register ──dial, options ok──> listing ──ListAndWatch ends──> stopped
//	                                 │  ▲                            │
//	   each response: the devices    │  └──── Register again ────────┤
//	   and their health replace      │        (a new endpoint)       │
//	   the resource's old ones ◄─────┘                               │
//	                                            5 minutes after the stop
//	                                            (endpointStopGracePeriod),
//	                                            at the next Capacity ──> deleted
//
// The states:
//
//   - listing: ListAndWatch is called once. Its stream is never retried: a
//     plugin whose stream ends (an error, or the plugin gone) must register
//     again, as with the kubelet.
//   - stopped: every device of the resource is unhealthy (allocatable 0,
//     capacity unchanged); allocations are kept; new allocations fail.
//   - deleted: the resource is forgotten, and Capacity reports it once among
//     the removed resources: the node keeps it with capacity 0, as the
//     kubelet does, so that it is told apart from a cluster-level resource.
//
// # Who calls what
//
//   - cmd/crivk: New (with the runtime, for the containers running at
//     start), then Start(ctx) before the engine: it reads the checkpoint
//     and serves the Registration socket until ctx ends, then disconnects
//     every plugin (Done is closed then).
//   - The node status loop (nodestatus.NodeProvider.SetDevicePlugins):
//     Capacity at every check, the kubelet's GetCapacity: capacity is the
//     count of all devices, allocatable of the healthy ones.
//   - The engine's admission (lifecycle.Config.Devices), with the pods that
//     hold devices (the engine's active pods and the API's unfinished pods
//     of the node, so that a restart does not free the devices of pods the
//     engine has not been given yet): Allocate, the kubelet's topology manager admission
//     with the "none" policy. Each init and app container in order gets its
//     devices, the plugin's Allocate is called for each container and
//     resource (GetPreferredAllocation first when the plugin advertises
//     it). Devices of pods no longer active are freed first, as the
//     kubelet's UpdateAllocatedDevices: a terminated pod's devices return
//     at the next admission. A failure is the pod's rejection with reason
//     UnexpectedAdmissionError and "Allocate failed due to <err>, which is
//     unexpected" (lifecycle/admit.go writes it).
//   - The runtime manager, right before CreateContainer (through the
//     engine's RuntimeHelper): ContainerOptions, the kubelet's
//     GetDeviceRunContainerOptions, which calls PreStartContainer when the
//     plugin asked for it and returns what the plugin's AllocateResponse
//     adds to the container's CRI config.
//
// # What it must never do
//
//   - Never import lifecycle, provider or nodestatus: they declare what they
//     need of it (lifecycle.Devices, a capacity function).
//   - Never retry a plugin's ListAndWatch, nor remove a resource before the
//     grace period: capacity must not flap when a plugin restarts.
//   - Never give a container an unhealthy device, nor one device to two
//     active pods.
//
// # The checkpoint
//
// <Dir>/kubelet_internal_checkpoint is the kubelet's file, in its format
// and with its checksum (package checkpoint): a checkpoint the kubelet
// wrote is read by crivk and the other way round. It is rewritten at each
// ListAndWatch response, each allocation, each freeing and each removal.
// Start reads it before serving: the allocations come back, and each
// registered resource comes back stopped with no device (capacity 0 until
// its plugin registers again, removed after the grace period otherwise).
// A container the runtime had running when Start ran, admitted again
// after the restart, keeps the devices it has and gets none allocated,
// whatever their health (the kubelet's isContainerAlreadyRunning), so a
// restart never rejects a running pod whose plugin has not registered yet.
//
// # Not done (the kubelet does)
//
// The topology manager's NUMA alignment (devices are checkpointed without
// a NUMA node), the PodResources API and the pods'
// allocatedResourcesStatus (ResourceHealthStatus) are absent, as are the
// device plugin metrics and health check. The kubelet's plugin-watcher
// registration of device plugins (type "DevicePlugin" on plugins_registry,
// package pluginmanager) has no handler: the plugin is told so; plugins
// register on kubelet.sock.
package devicemanager
