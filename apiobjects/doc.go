// Package apiobjects is the engine's reader of the API objects pods
// reference, with least privilege: Reader is the lifecycle.Objects (and
// the volume plugins' object source) that internal/nodeagent gives the engine. It
// reads only what the node's pods ask for, as the Node authorizer allows a
// node to, and never a cluster-wide list of ConfigMaps or Secrets.
//
//   - ConfigMaps and Secrets (objects.go, the kubelet's watch-based
//     ConfigMap/Secret manager): the first Get of an object starts one
//     watch restricted to it (a field selector on metadata.name) and reads
//     it directly; later Gets are served from that watch's store once it
//     synced. A change seen by a watch syncs the pods of the namespace that
//     reference the object at once (SetKick: Engine.Kick), so mounted files
//     and the next container's environment follow within about a second. A
//     watch that no pod of the node references any more is stopped within
//     about 10 s (the kubelet stops it with the last referencing pod), and
//     one no Get used for idleTimeout in any case.
//   - Services (services.go): one list-and-watch of every Service, as the
//     kubelet's Service informer (the Node authorizer grants a node list
//     and watch of all Services); the service-link variables of each
//     container start read it instead of listing the API server. Before the
//     first list a start waits for it at most servicesSyncTimeout, then
//     fails with the kubelet's error and is retried.
//   - Service account tokens (RequestToken): the TokenRequest API, for
//     projected service account token volumes.
//   - PersistentVolumeClaims and PersistentVolumes (storage.go): a GET at
//     every call, as the kubelet's volume manager reads them, for the
//     claims (persistentVolumeClaim and generic ephemeral volumes) of the
//     node's pods and the volumes bound to them.
//
// The caller's loop: New, then Run(ctx) in its own goroutine (it runs the
// Service informer and stops idle watches until ctx ends, then stops every
// watch), and SetKick once the engine exists. virtual-kubelet's
// controllers run without their cluster-wide ConfigMap/Secret/Service
// informers (internal/vknode's idle informers, docs/rbac.md): this package
// is the only reader of those objects.
//
// What it must never do: write any API object, list or watch ConfigMaps or
// Secrets beyond the one object asked for, or decide anything about a pod
// (the engine does; a change here only kicks a pod's sync). It imports
// lifecycle for the interface it implements and nothing above it
// (provider, internal/vknode, internal/nodeagent).
package apiobjects
