// Package provider adapts virtual-kubelet's interfaces to crivk's engine.
//
// virtual-kubelet's PodController watches the pods bound to this node and
// calls, per namespace/name key:
//
//	informer add/update ──> CreatePod / UpdatePod ──> lifecycle.Engine.UpdatePod
//	deletionTimestamp   ──> DeletePod             ──> lifecycle.Engine.Kill
//	object gone         ──> GetPod + DeletePod    ──> Engine.Kill (clean up)
//	Engine status       ──> NotifyPods callback   ──> PodController UpdateStatus
//
// The two state machines side by side: virtual-kubelet's, per
// namespace/name key, on the left; the engine's pod worker, per UID, on the
// right (lifecycle.PodWorkerState).
//
//	virtual-kubelet PodController          lifecycle.PodWorkers
//	─────────────────────────────          ────────────────────
//	pod bound, not in provider ──CreatePod──> create: SyncPod ...
//	spec changed ────────────────UpdatePod──> update: SyncPod
//	                                            │ terminal phase
//	                                            v
//	deletionTimestamp set ───────DeletePod──> kill ──> terminating (grace)
//	  (force delete after grace:                │ containers stopped
//	   backstop only)                           v
//	                                          terminated: final status,
//	UpdateStatus <──────NotifyPods──────────  runtime removed, API object
//	                                          deleted (grace 0, UID precondition)
//	object gone ────────DeletePod (again)──>  no-op / clean-up of leftovers
//	                                          finished ──> forgotten
//
// How the two state machines meet, and where crivk compensates for
// virtual-kubelet's behaviour so that kubelet semantics hold:
//
//   - Final deletion. The kubelet's status manager deletes a pod object (grace
//     0, UID precondition) once its containers are stopped and its final status
//     was written. virtual-kubelet instead force-deletes after the full
//     deletion grace period, whatever the containers did. The provider deletes
//     the object itself from Engine's OnTerminated, so a pod that stops in one
//     second is gone in about one second, and never before its containers
//     stopped. virtual-kubelet's delayed force delete remains as a backstop.
//   - Identity. virtual-kubelet keys pods by namespace/name; the engine keys
//     them by UID, so a pod recreated under the same name is a new pod.
//   - Status ownership. virtual-kubelet writes the whole status the provider
//     hands it; NotifyPods replaces the conditions the node does not own
//     (PodScheduled, DisruptionTarget, readiness gates) with the informer's
//     current ones first, so they are never rolled back.
//   - Force delete of non-running pods. virtual-kubelet deletes a pod object
//     marked for deletion at once when no container runs, before calling
//     DeletePod; the engine cleans the runtime right after (Kill from the
//     object-gone path). Runtime pods of no API pod (deleted while crivk was
//     down) are stopped and removed by the engine's housekeeping once the
//     pod informer has synced (lifecycle.Config.APIPods, APIPodsSynced).
//   - Terminal pods. virtual-kubelet stops tracking Succeeded/Failed pods;
//     the engine keeps their stopped containers (and logs) until deletion,
//     as the kubelet does, and its status manager never lets a terminal
//     phase regress.
//
// The NodeProvider (node.go) reports the node's conditions from the
// runtime's own readiness (CRI Status) and is pinged by the node controller.
// Container logs are served from the CRI log files (logs.go).
//
// Objects (objects.go) is the engine's lifecycle.Objects with least
// privilege: the ConfigMaps and Secrets pods reference are read by name and
// kept current by one watch per object (field selector on the name); a
// change syncs the referencing pods at once (Engine.Kick), so mounted files
// follow within about a second. cmd/crivk runs virtual-kubelet's
// controllers without their cluster-wide ConfigMap/Secret/Service informers
// (docs/rbac.md).
package provider
