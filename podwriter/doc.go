// Package podwriter is the API half of crivk's pod status manager, and the
// one home of the promise users rely on most:
//
//	No pod object is deleted before its containers stop.
//
// A StatefulSet controller, a Deployment's rollout and every watcher take a
// pod object's disappearance for the end of its containers: a replacement
// under the same name starts at once. The kubelet's status manager keeps
// the promise by deleting the object itself (grace 0, UID precondition)
// once the containers are stopped and the final status is written, and by
// deleting it nowhere else (a user's forced delete is the user's choice). crivk runs under virtual-kubelet, whose pod
// controller deletes objects on its own (at the end of the grace period,
// and at once for a deleted pod whose API status shows no running
// container); this package takes those deletions away from it and makes
// the engine's the only one.
//
// # The deletion sequence
//
// Each step starts only after the one above it finished; the package or
// file that carries it out is on the right.
//
//	API: deletionTimestamp set (grace g)           the user, a controller
//	  │  virtual-kubelet's pod controller: DeletePod
//	  │  (its own grace-0 deletes: DeleteGuard, the same DeletePod)
//	  v
//	Engine.Kill / KillUnknown                       lifecycle/engine.go
//	  │  (a rejected pod, never run: straight to
//	  │   OnTerminated, lifecycle/admit.go)
//	  v
//	pod worker: terminating                         lifecycle/podworkers.go
//	  │  KillPod with the grace period, retried
//	  │  until the runtime reports nothing running   lifecycle/syncer.go SyncTerminatingPod
//	  v
//	containers stopped ──> pod worker: terminated    SyncTerminatedPod
//	  │  final status set in the status manager
//	  │  volumes unmounted, pod cgroup removed
//	  v
//	final status handed on (WaitDelivered, ≤ 5 s)    lifecycle/syncer.go removeDeleted
//	  │  OnTerminated = DeleteOnTerminated:          podwriter/final.go
//	  │    StatusWrites.Finalize (virtual-kubelet's
//	  │      stale status writes dropped from now on,
//	  │      its write in flight waited for)
//	  │    final status written unless the API
//	  │      object shows it already
//	  v
//	DELETE grace 0, UID precondition                 podwriter/final.go
//	  │
//	  v
//	stopped containers, sandbox, pod files removed   lifecycle/syncer.go removeDeleted
//	(meanwhile) informer DELETE ──> ForgetDeleted    podwriter/statuswrites.go
//
// A pod that finished on its own (Succeeded, Failed) keeps its stopped
// containers for their logs; once it is deleted, the engine's housekeeping
// runs removeDeleted for it (its containers stopped long ago).
//
// # Where it is enforced, and the test that proves each
//
//   - DeleteGuard (deleteguard.go) is the only pod client virtual-kubelet's
//     pod controller has: its grace-0 deletes become the engine's
//     termination (the provider's DeletePod), graceful ones pass; a
//     recreated pod (other UID) or one gone from the informer is left
//     alone. TestDeleteGuard. Its status writes are recorded, and dropped
//     once the pod's final status is being written:
//     TestDeleteGuardStatusWrites.
//   - DeleteOnTerminated (final.go) is the only place crivk removes a pod
//     object (`crivk uninstall drain` only marks pods for deletion, with
//     their grace period): it deletes only a pod with a deletionTimestamp,
//     with grace 0 and a UID precondition, after making sure the object
//     carries the final status; other writers' conditions are kept by
//     status.WithForeignConditions, the status manager's one rule.
//     TestDeleteOnTerminated, TestDeleteOnTerminatedWritesFinalStatus,
//     TestDeleteOnTerminatedUsesTheCache, TestDeleteOnTerminatedUsesItsWrites,
//     TestDeleteOnTerminatedForgetsAPodGoneAlready, TestFinalConditions.
//   - StatusWrites (statuswrites.go) makes the final write start from the
//     newest object known and wait for virtual-kubelet's write in flight, so
//     the deleted pod's last stored state is terminal:
//     TestStatusWrites, TestStatusWritesFinalizeWaitsForWritesInFlight,
//     TestStatusWritesForgetDuringAWrite. ForgetDeleted drops a pod's entries
//     when its object goes: TestDeleteGuardStatusWrites.
//   - lifecycle/syncer.go removeDeleted, called from SyncTerminatedPod and
//     housekeeping, calls OnTerminated only after KillPod succeeded and the
//     runtime showed nothing running, and removes the containers only after
//     it: TestEngineKill (KillPod, OnTerminated, RemovePod, with the
//     terminal phase), TestEngineKillRetriesUntilTheRuntimeStops (no
//     OnTerminated after a failed kill), TestEnginePodCgroups (KillPod,
//     RemoveCgroup, OnTerminated, RemovePod), TestEngineKillUnknown,
//     TestEngineFinishedPodIsStoppedAndKeptUntilDeleted. That the volumes
//     are unmounted before OnTerminated, and that it waits for the final
//     status to be handed on (WaitDelivered), no unit test asserts.
//   - lifecycle/admit.go deleteRejected deletes the object of a pod
//     admission rejected at once: it never reached the runtime.
//     TestEngineRejectsWhatDoesNotFit (no runtime call, OnTerminated once).
//   - The pod worker's termination (lifecycle/podworkers.go): a deletion
//     makes the worker terminate the pod with the effective grace period
//     before it counts as finished.
//     TestPodWorkerDeletionIsTerminationAndContentRemovable,
//     TestPodWorkerEffectiveGracePeriod, TestPodWorkerKillDuringSync,
//     TestPodWorkerGraceShortening.
//   - The wiring (cmd/crivk/main.go): DeleteGuard is internal/vknode's
//     Config.PodClient, DeleteOnTerminated the engine's
//     lifecycle.Config.OnTerminated, ForgetDeleted a handler of the pod
//     informer. No unit test; end to end, TestNoPodObjectBeforeContainersStop
//     (test/e2e/fault_test.go: 30 pods ignoring SIGTERM, sampled every
//     second), TestGracePeriod and TestDeletedPodsLastStateIsTerminal.
//
// # The status of a finished pod
//
// The package's second, smaller duty: the status changes of a pod whose
// API object is already terminal (Succeeded, Failed) reach the API.
// virtual-kubelet v1.13's pod controller skips every status update of such
// an object (shouldSkipPodStatusUpdate), while the kubelet's status manager
// keeps writing them as long as the pod exists; without this, a finished
// pod's PodReadyToStartContainers stayed True after its sandbox was
// stopped. WriteTerminal (terminal.go) is the one place that does it:
// the provider hands it every status before virtual-kubelet gets it
// (provider.New's terminal hook, wired in cmd/crivk/main.go), and it
// writes with UpdateStatus only a terminal status over an object known
// terminal with the same phase (a terminal phase is never changed; a
// write that would is refused), only when the object differs, with other
// writers' conditions kept (status.WithForeignConditions), conflicts
// retried against a fresh GET, and the write recorded in StatusWrites
// (dropped once the deletion path owns the pod's status). A status
// handed while virtual-kubelet's write of the terminal phase is in flight
// waits for that write first (StatusWrites.Settled). Every other status,
// that of every running pod, goes through virtual-kubelet only.
// TestWriteTerminal, TestWriteTerminalAfterVirtualKubeletsWrite,
// TestProviderNotifyCallsTheTerminalHook (provider).
//
// The common case, a pod that ends on its own, no longer needs it: the
// engine's status manager delivers a terminal phase only once the pod's
// termination completed (lifecycle/status, the kubelet's mergePodStatus),
// so virtual-kubelet's write of the terminal phase already carries the
// stopped sandbox (PodReadyToStartContainers False). Before that the
// phase was published while the sandbox still ran, virtual-kubelet wrote
// it with the condition True, and the API showed that state until this
// hook's write some 100-200 ms later (what TestFieldsKubelet read). A
// status handed in the microseconds after virtual-kubelet's worker read
// the previous one but before its write began can still be lost here.
//
// # What it must never do
//
// Remove a pod object anywhere but in DeleteOnTerminated, or there without
// the UID precondition; decide that a pod's containers are stopped (the
// engine does, and calls OnTerminated); let virtual-kubelet's queued
// status writes follow a pod's final status; write a status past
// virtual-kubelet anywhere but in DeleteOnTerminated and WriteTerminal,
// or change a terminal phase. It imports lifecycle for the
// one condition rule and nothing above it (provider, internal/vknode,
// cmd/crivk).
package podwriter
