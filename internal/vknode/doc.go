// Package vknode is crivk's adapter to virtual-kubelet: it runs
// virtual-kubelet's node controller (the Node object and its Lease) and pod
// controller (the pods bound to this node, handed to a
// node.PodLifecycleHandler) the way virtual-kubelet's nodeutil.Node does,
// with the differences a node agent needs. It serves nothing: the node
// API's servers and mux are package nodeapi's.
//
// # Why not nodeutil.Node
//
// nodeutil.NewNode lists and watches every ConfigMap, Secret and Service of
// the cluster, which a node agent must not need (docs/rbac.md), and links
// k8s.io/apiserver's admission plugins, CEL and etcd client into the binary
// (a third of it, docs/benchmarks.md). Node builds the two controllers from
// the typed core client alone: the pod controller is told to skip its own
// environment resolution (crivk resolves environments in the engine and
// reads referenced objects one by one, apiobjects.Reader) and is given idle
// ConfigMap, Secret and Service informers that are never started
// (informers.go).
//
// # What the caller does
//
//  1. NewPodInformer: the node's pod informer (only pods bound to this node,
//     the kubelet's field selector). The caller reads its Lister before
//     the node runs (the engine, the provider, the objects) and adds its own
//     handlers to its Informer (ReadinessGateKicks, the status record's
//     podwriter.ForgetDeleted). Node runs it; nobody else does.
//  2. New(Config): the node, with the clients it writes through. The pod
//     controller writes pods through Config.PodClient only; crivk hands it
//     podwriter.DeleteGuard, so no removal of virtual-kubelet's takes a pod
//     object before its containers stop. This package makes no deletion
//     decision of its own.
//  3. Run until ctx ends; WaitReady returns once both controllers run.
//
// # What it changes in virtual-kubelet's behaviour, and where
//
//   - node.go: the node controller's GET before each status PATCH is served
//     from the watched node (viewedNodes), as the kubelet's first try reads
//     its node lister; the node status is written every report period
//     (--node-status-report-frequency), not every minute.
//   - filter.go: informer updates virtual-kubelet's pod controller would do
//     nothing with (mostly crivk's own status writes) are kept from it, so
//     its go-cmp comparisons do not run for them. The filter's invariant is
//     drawn above vkUpdateFilter; it only saves work, never decides.
//   - ratelimit.go: the pod controller's queues retry with an exponential
//     back-off per item but do not delay first attempts behind a shared
//     10/s bucket (the kubelet has no such queue).
//   - recorder.go: the pod controller's Provider*Success events, which a
//     kubelet never records, are dropped.
//   - informers.go: the pod informer caches pods without
//     metadata.managedFields (DropManagedFields, as the kube-scheduler's pod
//     informer), so every copy of a pod virtual-kubelet and crivk keep is
//     smaller, and virtual-kubelet's go-cmp comparison of whole pods
//     (podsEffectivelyEqual, on every deletion and spec change) costs a
//     tenth (BenchmarkVKUpdateDecision). Nothing in crivk reads them.
//   - readinessgates.go: a change of a readiness gate's condition by
//     another writer syncs the pod at once (virtual-kubelet hands the
//     provider spec changes only); StatusReconciles hands the pods whose
//     conditions another writer changed, and every pod at each resync of
//     the informer, to the status manager's Reconcile, which has the
//     status last delivered written again where it was overwritten
//     (virtual-kubelet writes a status only when the provider's changes).
//   - podresources.go: a change of a pod's pod-level resources
//     (spec.resources, the resize subresource's pod-level in-place resize)
//     is handed to the provider's UpdatePod, as virtual-kubelet hands the
//     changes of the fields it compares; virtual-kubelet compares no
//     spec.resources.
//
// # What it must never do
//
// Hold pod logic: it does not decide when a pod starts, stops or goes (the
// engine, lifecycle, and podwriter do), nor what status a pod has. It does
// not list or watch cluster-wide objects. It does not import
// k8s.io/kubernetes or virtual-kubelet's nodeutil.
package vknode
