// Package dra is crivk's registry of DRA drivers' kubelet plugins: the
// registration half of the kubelet's DRAPluginManager
// (pkg/kubelet/cm/dra/plugin). It is the plugin manager's handler of the
// "DRAPlugin" type: a DRA driver's kubelet plugin (built on
// k8s.io/dynamic-resource-allocation/kubeletplugin) announces itself on
// <root-dir>/plugins_registry under the driver's name, with its gRPC
// endpoint and, as its "supported versions", the gRPC services it serves
// ("v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth", ...).
//
// # Responsibility
//
// One Plugins per node owns, for each driver name, its registered plugins
// in the order they registered (a driver may have several, during a
// rolling update): endpoint, the DRAPlugin service chosen, the optional
// health service chosen. Nothing else: no connection is made, no call is
// sent.
//
//   - ValidatePlugin and RegisterPlugin: the services must name one the
//     kubelet v1.37 speaks, "v1.DRAPlugin" or "v1beta1.DRAPlugin"; the
//     first of the plugin's list that is one is chosen (the kubelet's
//     validateSupportedServices); the health service is the kubelet's
//     first of "v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth" the
//     plugin lists, or none. RegisterPlugin also refuses an endpoint
//     already registered for the driver ("endpoint ... already
//     registered for DRA driver plugin ...").
//   - DeRegisterPlugin forgets the plugin of that driver and endpoint.
//   - Get is what the DRA work will ask (lifecycle's resource claim
//     preparation declares the interface it needs): the most recently
//     registered plugin of the driver, or the kubelet's errors "DRA driver
//     name is empty" and "DRA driver <name> is not registered" (ErrNotRegistered).
//
// # Who calls what
//
//   - internal/nodeagent: New, then the plugin manager's AddHandler for
//     "DRAPlugin" (pluginmanager.Handler).
//   - Get: nobody yet (issue #48: lifecycle/dra.go fails a claim that needs
//     a driver with "DRA driver <name> is not registered").
//
// # What it must never do
//
// Import the plugin manager, the engine or the provider; dial a plugin or
// write to the API.
//
// # Not done (the kubelet does)
//
// The gRPC connection to each plugin and the preference for a connected
// one in Get; NodePrepareResources/NodeUnprepareResources; the health
// stream; the deletion of the node's ResourceSlices at start and of a
// driver's when none of its plugins has been connected for the wiping
// delay (30s).
package dra
