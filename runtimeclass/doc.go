// Package runtimeclass resolves a pod's spec.runtimeClassName to the CRI
// runtime handler of that RuntimeClass, from a cache of the cluster's
// RuntimeClass objects: the kubelet's pkg/kubelet/runtimeclass Manager.
//
// Who calls what: cmd/crivk calls Start once with the node's API client,
// before the first pod is synced, and hands the Manager to the runtime
// manager (cri.Runtime.SetRuntimeClasses), which calls LookupRuntimeHandler
// each time it creates a sandbox for a pod that names a RuntimeClass. The
// Manager owns one informer on node.k8s.io/v1 RuntimeClasses (list and
// watch, no resync); the Node authorizer grants nodes get, list and watch
// on them.
//
// What it promises: a pod naming a RuntimeClass is never given the
// default handler. An unknown class is the API's NotFound error
// (`runtimeclass.node.k8s.io "<name>" not found`), the text of the
// kubelet's FailedCreatePodSandBox event; before the cache has synced (or
// while the node may not list RuntimeClasses) every lookup fails, and the
// pod's sandbox is retried at its next sync.
//
// What it must never do: fall back to a default handler, write to the API,
// or block a lookup on the network.
package runtimeclass
