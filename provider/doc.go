// Package provider is virtual-kubelet's PodLifecycleHandler over crivk's
// engine (lifecycle.Engine): it hands the pods virtual-kubelet's pod
// controller gives it to the engine, and the statuses the engine publishes
// back to the controller. It makes no decision of its own about a pod.
//
// virtual-kubelet's PodController (run by internal/vknode) watches the
// pods bound to this node and calls, per namespace/name key:
//
//	informer add/update ──> CreatePod / UpdatePod ──> Engine.UpdatePod
//	deletionTimestamp   ──> DeletePod             ──> Engine.Kill (KillUnknown
//	                                                  for a pod it never had)
//	its own grace-0 delete ──> podwriter.DeleteGuard ──> DeletePod (the same)
//	object gone         ──> GetPod + DeletePod    ──> Engine.Kill (a no-op,
//	                                                  or the clean-up of leftovers)
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
//	  (its force delete, at once for a          │ containers stopped
//	   pod not running or at the end of         v
//	   the grace period: DeletePod too,       terminated: final status,
//	   through podwriter.DeleteGuard)         volumes and cgroup gone,
//	UpdateStatus <──────NotifyPods──────────  API object deleted (podwriter:
//	                                          grace 0, UID precondition),
//	                                          runtime removed
//	object gone ────────DeletePod (again)──>  no-op / clean-up of leftovers
//	                                          finished ──> forgotten
//
// How the two state machines meet, and where crivk compensates for
// virtual-kubelet's behaviour so that kubelet semantics hold:
//
//   - Deletion. virtual-kubelet never removes a pod object itself: it
//     force-deletes (grace 0) at the end of the deletion grace period, and
//     at once for a pod marked for deletion whose API status shows no
//     running container, but its pod client is podwriter.DeleteGuard,
//     which turns each such delete into DeletePod. The object goes only
//     from the engine's OnTerminated (podwriter.DeleteOnTerminated), once
//     the containers are stopped, the volumes and cgroup are gone and the
//     final status is written: a pod that stops in one second is gone in
//     about one second, and never before its containers stopped. The
//     podwriter package states this promise and names every place that
//     keeps it.
//   - Identity. virtual-kubelet keys pods by namespace/name; the engine keys
//     them by UID, so a pod recreated under the same name is a new pod.
//   - Status ownership. virtual-kubelet writes the whole status the provider
//     hands it; NotifyPods replaces the conditions the node does not own
//     (PodScheduled, DisruptionTarget, readiness gates) with the informer's
//     current ones first (status.WithForeignConditions, the one rule),
//     so they are never rolled back.
//   - Pods of no API object. Runtime pods of no API pod (deleted while
//     crivk was down) are stopped and removed by the engine's housekeeping
//     once the pod informer has synced (lifecycle.Config.APIPods,
//     APIPodsSynced); a deleted pod the engine never had is handed to
//     Engine.KillUnknown.
//   - Terminal pods. virtual-kubelet stops tracking Succeeded/Failed pods
//     (it skips every status update of an object whose phase is terminal);
//     the engine keeps their stopped containers (and logs) until deletion,
//     as the kubelet does, and its status manager never lets a terminal
//     phase regress, nor publishes one before the pod's termination
//     completed (so the terminal status virtual-kubelet writes already
//     shows the sandbox stopped, PodReadyToStartContainers False). Later
//     status changes of such a pod are written by the terminal hook
//     NotifyPods calls first, podwriter.WriteTerminal.
//
// The engine's reader of the API objects pods reference (ConfigMaps,
// Secrets, Services) is not here: it is package apiobjects, which internal/nodeagent
// gives the engine directly. The handler reads only the node's pod
// informer (for other writers' conditions).
//
// What it must never do: delete a pod object or decide when one goes
// (podwriter does), decide what a pod runs or what its status is (the
// engine does), read API objects for the engine (apiobjects does), or hold
// the Node object or the node's HTTPS API, container logs included (the
// nodestatus and nodeapi packages).
package provider
