// Package podwriter writes pod objects' terminal statuses and removes pod
// objects: it is the API half of crivk's pod status manager, the part that
// writes past virtual-kubelet. Its one responsibility is also the promise
// users rely on most, and this file is that promise's home:
//
//	No pod object is removed before its containers have stopped and its
//	volumes and cgroup are gone.
//
// A StatefulSet controller, a Deployment's rollout and every watcher take a
// pod object's disappearance for the end of its containers: a replacement
// under the same name starts at once. The kubelet's status manager keeps
// the promise by deleting the object itself (grace 0, UID precondition)
// once the containers are stopped and the final status is written, and by
// deleting it nowhere else (a user's forced delete is the user's choice).
// crivk runs under virtual-kubelet, whose pod controller deletes objects on
// its own (at the end of the grace period, and at once for a deleted pod
// whose API status shows no running container); this package takes those
// deletions away from it and makes the engine's the only one.
//
// # The deletion sequence
//
// Each step starts only after the one above it finished; the function that
// carries it out, and holds the check, is on the right.
//
//	API: deletionTimestamp set (grace g)                the user, a controller,
//	  │  virtual-kubelet's pod controller:              crivk uninstall drain
//	  │  DeletePod (its own grace-0 deletes:
//	  │  DeleteGuard, the same DeletePod)               podwriter/deleteguard.go
//	  v
//	Engine.Kill / KillUnknown                           lifecycle/engine.go
//	  │  (a rejected pod, never run: straight to
//	  │   OnTerminated, deleteRejected)                 lifecycle/admit.go
//	  v
//	pod worker: terminating                             lifecycle/podworkers.go
//	  │  KillPod with the grace period, then the
//	  │  runtime read again: an error while any         lifecycle/syncer.go
//	  │  container runs; the worker retries               SyncTerminatingPod
//	  v
//	containers stopped ──> pod worker: terminated         SyncTerminatedPod
//	  │  final status set in the status manager
//	  │  volumes unmounted, pod cgroup removed
//	  │  (an error stops here; the worker retries)
//	  v
//	final status handed on (WaitDelivered, ≤ 5 s)       lifecycle/syncer.go
//	  │  a pod desired again (no deletionTimestamp)       removeDeleted
//	  │  is left alone
//	  │  OnTerminated = staticpods.OnTerminated         staticpods/
//	  │  (a static pod stops here), then                  engine.go
//	  │  DeleteOnTerminated:                            podwriter/final.go
//	  │    StatusWrites.Finalize (virtual-kubelet's
//	  │      stale status writes dropped from now on,
//	  │      its write in flight waited for)
//	  │    final status written unless the API
//	  │      object shows it already
//	  v
//	DELETE grace 0, UID precondition                    podwriter/final.go
//	  │
//	  v
//	stopped containers, sandbox, pod files removed      lifecycle/syncer.go
//	                                                      removeDeleted
//	(meanwhile) informer DELETE ──> ForgetDeleted       podwriter/statuswrites.go
//
// A pod that finished on its own (Succeeded, Failed) went through
// SyncTerminatedPod when it finished (its volumes and cgroup went then) and
// keeps its stopped containers for their logs; once it is deleted, the
// engine's Housekeeping runs removeDeleted for it.
//
// # Every place that deletes a pod object or guards such a deletion
//
// Found with `grep -rn 'Pods(.*).Delete\|\.Delete(ctx' --include=*.go`;
// each with the test that proves it. A new delete of a pod object belongs
// in this list, or nowhere.
//
// Deleting:
//
//   - podwriter/final.go DeleteOnTerminated: the only place crivk removes
//     the object of a pod it ran from the API. It deletes only a pod with a
//     deletionTimestamp, with grace 0 and a UID precondition, after making
//     sure the object carries the final status; other writers' conditions
//     are kept by status.WithForeignConditions, the status manager's one
//     rule. It decides nothing about the containers: the engine calls it
//     (lifecycle.Config.OnTerminated) only at the end of the sequence above.
//     TestDeleteOnTerminated, TestDeleteOnTerminatedWritesFinalStatus,
//     TestDeleteOnTerminatedUsesTheCache, TestDeleteOnTerminatedUsesItsWrites,
//     TestDeleteOnTerminatedForgetsAPodGoneAlready, TestFinalConditions.
//   - staticpods/mirror.go Mirrors.deleteMirror (called by
//     Reconcile and syncMirror): mirror pods, deleted with grace 0 and a
//     UID precondition, as the kubelet's DeleteMirrorPod. This is safe
//     because a mirror pod has no containers of its own: it is the API's
//     copy of a static pod, which the engine runs from its manifest under
//     another UID, so removing the mirror never stops or starts a container
//     (staticpods.Apart turns every kill of a mirror pod, DeleteGuard's
//     included, into a kick of the mirror client). A mirror of no static
//     pod (its manifest removed) goes only once no static pod of its name
//     is terminating (Source.Terminating, cleared by the static pod's
//     OnTerminated, i.e. after its containers stopped and its volumes and
//     cgroup went); a mirror of another hash (the manifest changed) stays
//     while the old static pod terminates; no mirror is taken for an
//     orphan before the manifests were first read. The one exception to
//     the promise, the kubelet's too: a mirror marked for deletion while
//     its static pod runs is deleted and created again at once, and the
//     static pod's containers go on running under the new mirror (the
//     manifest, not the API, owns them). TestMirrors (marked; gone; another
//     hash; manifest removed), TestApart, TestMirrorsNeverTouchOtherPods,
//     TestMirrorsKeepMirrorsUntilTheManifestsWereRead. Source keeps its
//     record of terminating static pods in memory; after a restart with
//     the manifest removed or changed while crivk was down, the old
//     mirror stays while the runtime still runs its pod (a running
//     container or ready sandbox of its hash UID, MirrorConfig.Running)
//     and goes once housekeeping stopped them as runtime orphans:
//     TestMirrorsKeepMirrorsWhileTheRuntimeRunsTheirPod, and on the
//     cluster TestStaticPodRemovedWhileDownKeepsMirrorUntilStopped
//     (test/e2e, kill -9). The volumes and cgroup of such an orphan go
//     after its containers, and the mirror does not wait for them.
//   - internal/subcmd/uninstall/uninstall.go uninstaller.drain (`crivk uninstall
//     drain`): deletes each pod of the release's nodes with its own grace
//     period and a UID precondition, which only marks the object; the
//     removal is then DeleteOnTerminated's, through the sequence above.
//     TestDrain, TestDrainTimesOut. No unit test asserts that the delete is
//     graceful (the fake clientset removes the object at once).
//   - Not the agent: test/bench and test/benchfleet delete pods as a user
//     would, force-delete the pods of a stopped agent between lanes
//     (test/bench/isolation.go), and test/bench/rawapi.go is the raw-CRI
//     baseline that the benchmark compares crivk with. Nothing in crivk's
//     binary runs them.
//
// Guarding:
//
//   - The DeleteGuard each node's stack is built with
//     (podwriter/deleteguard.go guardedPods.Delete; NewDeleteGuard is
//     internal/vknode's Config.PodClient, built once per node, single or
//     one of a fleet, by internal/nodeagent's startNode (fleet.go)) is
//     the only pod client virtual-kubelet's pod controller has: its grace-0
//     deletes become the engine's termination (the provider's DeletePod),
//     graceful ones pass (they only mark); a recreated pod (other UID) or
//     one gone from the informer is left alone. TestDeleteGuard. Its status
//     writes are recorded, and dropped once the pod's final status is being
//     written: TestDeleteGuardStatusWrites.
//   - lifecycle/syncer.go SyncTerminatingPod: after KillPod it reads the
//     runtime again and fails while any container of the pod runs, so the
//     pod worker retries and never reaches terminated (and OnTerminated)
//     with a container running. TestEngineKill (KillPod, OnTerminated,
//     RemovePod, with the terminal phase), TestEngineKillRetriesUntilTheRuntimeStops
//     (no OnTerminated after a failed kill), TestEngineKillUnknown. That a
//     kill which returns no error but leaves a container running is
//     retried, no unit test asserts.
//   - lifecycle/syncer.go SyncTerminatedPod: unmounts the volumes and
//     removes the pod cgroup, and calls removeDeleted only when both
//     succeeded. TestEnginePodCgroups (KillPod, RemoveCgroup, OnTerminated,
//     RemovePod). That the volumes are unmounted before OnTerminated, no
//     unit test asserts.
//   - lifecycle/syncer.go removeDeleted checks nothing about the
//     containers: it is called only from SyncTerminatedPod and Housekeeping.
//     It waits for the final status to be handed on (WaitDelivered, at most
//     finalStatusTimeout; no unit test asserts the wait), skips a pod
//     desired again, calls OnTerminated, and only then removes the stopped
//     containers and sandbox.
//   - lifecycle/engine.go Housekeeping runs removeDeleted only for a
//     deleted pod whose worker has finished (IsPodFinished: its
//     SyncTerminatedPod ran). TestEngineFinishedPodIsStoppedAndKeptUntilDeleted
//     (containers kept until the deletion, then RemovePod and OnTerminated
//     once). That it skips a deleted pod still terminating, no unit test
//     asserts.
//   - lifecycle/admit.go deleteRejected: a pod admission rejected never
//     reached the runtime (no container, volume or cgroup); its OnTerminated
//     is called as soon as it is deleted. TestEngineRejectsWhatDoesNotFit
//     (no runtime call, OnTerminated once).
//   - lifecycle/podworkers.go, the pod worker's termination: a deletion
//     makes the worker terminate the pod with the effective grace period
//     before it counts as finished.
//     TestPodWorkerDeletionIsTerminationAndContentRemovable,
//     TestPodWorkerEffectiveGracePeriod, TestPodWorkerKillDuringSync,
//     TestPodWorkerGraceShortening.
//   - Static pods (staticpods/engine.go OnTerminated, wrapping
//     DeleteOnTerminated): a static pod's object in the API is its mirror,
//     under another UID, so it bypasses the deletion path (the UID
//     precondition would refuse anyway). What guards it is the same engine
//     sequence up to OnTerminated (its containers stopped, volumes and
//     cgroup gone), after which its end is recorded (Source.Terminated) and
//     the mirror client may delete its mirror (above). TestOnTerminated.
//   - The eviction path deletes nothing: eviction/manager.go evict and
//     lifecycle/preempt.go call lifecycle/evict.go Engine.Evict, which stops
//     the pod and publishes it Failed (or Succeeded); the object stays, as
//     the kubelet's, until someone deletes it, and the sequence above
//     removes it then. TestEngineEvict (no OnTerminated for an evicted pod).
//   - The wiring: the DeleteGuard above; DeleteOnTerminated, inside
//     staticpods.OnTerminated, is the engine's lifecycle.Config.OnTerminated;
//     ForgetDeleted is a handler of the pod informer (all in
//     internal/nodeagent, engine.go). No unit test; end to end, TestNoPodObjectBeforeContainersStop
//     (test/e2e/fault_test.go: 30 pods ignoring SIGTERM, sampled every
//     second), TestGracePeriod and TestDeletedPodsLastStateIsTerminal.
//
// StatusWrites (statuswrites.go) makes the final write start from the
// newest object known and wait for virtual-kubelet's write in flight, so a
// deleted pod's last stored state is terminal: TestStatusWrites,
// TestStatusWritesFinalizeWaitsForWritesInFlight,
// TestStatusWritesForgetDuringAWrite. ForgetDeleted drops a pod's entries
// when its object goes: TestDeleteGuardStatusWrites; an accepted DELETE
// does not (a finalizer may keep the object, and virtual-kubelet's stale
// writes must stay refused while it does):
// TestDeleteOnTerminatedFinalizerKeepsWritesRefused.
//
// # The status of a finished pod
//
// The other terminal statuses it writes, with no deletion: the status
// changes of a pod whose API object is already terminal (Succeeded, Failed)
// reach the API. virtual-kubelet v1.13's pod controller skips every status
// update of such an object (shouldSkipPodStatusUpdate), while the kubelet's
// status manager keeps writing them as long as the pod exists; without
// this, a finished pod's PodReadyToStartContainers stayed True after its
// sandbox was stopped. WriteTerminal (terminal.go) is the one place that
// does it: the provider hands it every status before virtual-kubelet gets
// it (provider.New's terminal hook, wired in internal/nodeagent/engine.go), and it
// writes with UpdateStatus only a terminal status over an object known
// terminal with the same phase (a terminal phase is never changed; a write
// that would is refused), only when the object differs, with other writers'
// conditions kept (status.WithForeignConditions), conflicts retried against
// a fresh GET, and the write recorded in StatusWrites (dropped once the
// deletion path owns the pod's status). A status handed while
// virtual-kubelet's write of the terminal phase is in flight waits for that
// write first (StatusWrites.Settled). Every other status, that of every
// running pod, goes through virtual-kubelet only.
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
// the UID precondition (mirror pods are staticpods' and have no
// containers); decide that a pod's containers are stopped (the engine
// does, and calls OnTerminated); let virtual-kubelet's queued status
// writes follow a pod's final status; write a status past virtual-kubelet
// anywhere but in DeleteOnTerminated and WriteTerminal, or change a
// terminal phase. It imports lifecycle for the one condition rule and
// nothing above it (provider, internal/vknode, internal/nodeagent, cmd/crivk).
package podwriter
