// Package pluginmanager is crivk's plugin manager, the kubelet's
// pkg/kubelet/pluginmanager: one watcher of <root-dir>/plugins_registry
// through which node plugins (CSI drivers, DRA drivers) announce
// themselves, and the registration protocol of
// k8s.io/kubelet/pkg/apis/pluginregistration/v1 spoken to each, so that an
// unchanged node-driver-registrar, or a DRA driver built on
// k8s.io/dynamic-resource-allocation/kubeletplugin, registers with crivk
// as with the kubelet.
//
// # Responsibility
//
// One Manager per node owns:
//
//   - the watch of Dir (<root-dir>/plugins_registry, created 0750 by
//     Start): every unix socket in it or in any of its subdirectories,
//     whatever the depth, is a plugin's registration socket; other files are
//     ignored, and so is a created file or directory whose name starts with
//     "." (the kubelet's rule, applied to what is created after Start; the
//     first walk watches every subdirectory and only skips dot-named
//     sockets). Nothing in Dir is removed at start: as the kubelet's,
//     a socket left by a plugin that is gone is dialled, and retried, until
//     it goes (the device plugin directory is cleaned, this one is not);
//   - the desired state (each socket seen, with a generation that is new
//     each time the socket is created) and the actual state (each socket
//     registered, with the generation, handler, plugin name and endpoint
//     it was registered with), in state.go, with no I/O;
//   - the reconciler: at each Period (1s, the kubelet's loopSleepDuration)
//     and at each change, the pure plan (state.go's plan) of what to
//     deregister, then what to register, carried out by at most one
//     operation per socket at a time, with the kubelet's exponential
//     back-off after a failure (0.5s, doubling, at most 2m2s, per socket
//     path).
//
// The handlers are the consumers': a Handler per plugin type, the
// GetInfo answer's "type" ("CSIPlugin" for package csi, "DRAPlugin" for
// package dra). The manager never interprets a plugin's name, endpoint or
// versions: the handler validates and keeps them.
//
// # A plugin socket's life
//
//	socket created ──> desired (a new generation) ──> registering ──ok──> registered
//	                        ▲                            │                   │
//	                        │                          error         socket removed,
//	                        │                            ▼           or created again
//	                        │                 failed: back-off, then         │
//	                        │                 registering again while        ▼
//	                        └──── still desired ───── desired ◄──── deregistering
//
// registering is one operation (register.go), the kubelet's
// GenerateRegisterPluginFunc, in its order and with its error words:
//
//  1. dial the socket (10s), GetInfo (1s);
//  2. the handler of the info's type; none: NotifyRegistrationStatus(false,
//     "RegisterPlugin error -- no handler registered for plugin type: ...");
//  3. the endpoint is the socket itself when the plugin gives none;
//     ValidatePlugin; an error: NotifyRegistrationStatus(false,
//     "RegisterPlugin error -- plugin validation failed with err: ...");
//  4. the plugin enters the actual state, then RegisterPlugin; an error:
//     it leaves the actual state and NotifyRegistrationStatus(false,
//     "RegisterPlugin error -- plugin registration failed with err: ...");
//  5. NotifyRegistrationStatus(true, ""); an error: it leaves the actual
//     state and DeRegisterPlugin is called.
//
// Any failure is the operation's error: the socket waits for its back-off
// and is registered again from step 1 while it is desired (a plugin that
// was told it failed usually exits and removes its socket first).
// deregistering (the socket removed, or created again: its generation
// changed) takes the plugin out of the actual state and calls
// DeRegisterPlugin with the name and endpoint it registered with; a
// socket created again is then registered anew. A handler therefore sees,
// for one socket, Validate, Register, DeRegister in that order, never two
// calls at once.
//
// # Who calls what
//
//   - internal/nodeagent: New, AddHandler for each plugin type, then
//     Start(ctx) once; Start returns once the directory is watched and
//     walked (an error: nothing is watched, the kubelet logs it and runs
//     on without plugins). The loops stop when ctx ends; Done is closed
//     then. Registered plugins are not deregistered at the end: a
//     restarted agent walks the directory and registers them again, and
//     what the handlers wrote (CSINode) stays meanwhile, as with the
//     kubelet.
//   - The handlers (csi.Drivers, dra.Plugins) are called only from the
//     operations' goroutines, never under the manager's locks.
//
// # What it must never do
//
//   - Import a handler's package: nodeagent hands them in as Handler.
//   - Remove or create anything in Dir but Dir itself: the sockets are
//     the plugins'.
//   - Run two operations for one socket at once, or call a handler for a
//     plugin the reconciler has not planned.
//
// # Not done (the kubelet does)
//
// The metric plugin_manager_total_plugins; the "DevicePlugin" type
// (device plugins register on devicemanager's kubelet.sock only); the
// Windows path handling.
package pluginmanager
