// Package status decides the API status of a pod: it generates the status
// from the runtime's state (Generate, the kubelet's generateAPIPodStatus)
// and publishes it through a versioned cache (Manager, the kubelet's status
// manager, with virtual-kubelet's pod notifier in place of the API client).
// It is the kubelet's pkg/kubelet/status.
//
// The caller (the engine's syncer, lifecycle/syncer.go) runs, per pod:
//
//  1. after every runtime read, st := Generate(Input{pod, previous status,
//     runtime status, waiting reasons, pod IPs, probe results, now}) and
//     m.SetPodStatus(pod, st), with pod.Status holding the API's copy;
//  2. once no container of the pod can run any more, m.TerminatePod(pod):
//     the status becomes final;
//  3. before the API object of a deleted pod is deleted, m.WaitDelivered;
//  4. once the API object is gone, m.RemovePod.
//
// and one goroutine runs m.Run(ctx), the only caller of Notify. The pod
// informer's handler (vknode.StatusReconciles, through
// Engine.ReconcileStatus) calls m.Reconcile(apiPod, periodic) for each
// update that changed a condition (periodic false) and at each resync
// (periodic true): the kubelet's needsReconcile, which hands the status
// last delivered to Notify again when another writer overwrote a condition
// the node owns (TestStatusManagerReconcile,
// TestStatusManagerReconcilePeriodic,
// TestStatusManagerReconcileKeepsResourceVersion).
//
// What it owns, one file each:
//
//   - generate.go: Generate, a pure function from Input to v1.PodStatus:
//     container statuses (probedState: started and ready from the probes'
//     settled results), then the phase (podPhase, the kubelet's getPhase;
//     after a kill with a status function, Input.Killed, the kubelet's
//     three-way merge: the containers' terminal phase wins, the kill's
//     reason only with its phase: TestGenerateStatusAfterKill), then the
//     conditions, in that order from the same input;
//   - podresources.go: the pod-level status.resources and
//     status.allocatedResources (the kubelet v1.37's
//     convertToAPIPodLevelResourcesStatus and PodRequests, for every pod):
//     the effective allocation until the API shows the pod Running, then
//     the pod cgroup's values the caller read (Input.PodCgroup);
//   - volumemounts.go: a container status' volumeMounts (from the spec
//     before the container exists, then kept, immutable) and user (the
//     runtime's, when it reports one);
//   - sidecars.go: how restartable init containers count for
//     initialization and for the phase;
//   - restartall.go: the in-place restart of all a pod's containers (the
//     restartPolicyRules action RestartAllContainers): the
//     AllContainersRestarting condition, and the restart counts and last
//     states carried over from the previous status once the runtime no
//     longer has the containers (TestGenerateStatusRestartAllContainers);
//   - conditions.go: the rules of the pod conditions, each written once:
//     which conditions the node owns (ownedConditions), that the others are
//     the API's (WithForeignConditions, also for the final status the
//     provider writes), that a condition whose status did not change keeps
//     its LastTransitionTime (withTransitionTimes), and that a pod in a
//     terminal phase is never ready (terminalReason: Generate writes Ready
//     and ContainersReady by it, the manager holds every status it caches to
//     it);
//   - manager.go: Manager, the one place that decides which status is
//     published; its diagram is above the type. The cache only moves
//     forward: a terminal phase is final, an illegal container transition
//     (a container that will not restart leaving Terminated) is refused,
//     StartTime is kept, statuses are normalized to what the API stores;
//     each change bumps a version that only goes up, and a burst of
//     changes to one pod is delivered once, with the newest status. A
//     terminal phase is delivered only once the pod could have no running
//     container (ManagerConfig.CouldHaveRunningContainers, the pod
//     workers' predicate; publishable, the kubelet's mergePodStatus):
//     until its termination completed the phase delivered stays the
//     previous one, so the API never shows a pod finished whose containers
//     or sandbox still run (PodReadyToStartContainers is False in its
//     first terminal status, as the kubelet's). Tests:
//     TestStatusManagerHoldsTerminalPhaseWhileContainersMayRun,
//     TestStatusManagerHeldPhaseFromTheAPI,
//     lifecycle's TestEngineTerminalPhaseOnlyOnceStopped.
//
// It must never talk to the Kubernetes API or the runtime: what leaves it
// goes through Notify, which receives deep copies from Run's one goroutine,
// never under the manager's lock. It imports cri only for the
// runtime status it reads and prober only for the probe result types; it
// must not import lifecycle.
package status
