// Package lifecycle is crivk's pod engine, the part of the kubelet between
// the pods the API assigns to the node and the runtime: per pod UID it
// decides what must happen and when, drives the runtime manager (package
// cri) and publishes the kubelet-shaped API status.
//
// The pieces, each owning its state, and who calls what. The engine's own
// files are in this package; the status (lifecycle/status) and the runtime
// view (lifecycle/pleg) are packages below it that never import it:
//
//	provider (virtual-kubelet) ──UpdatePod/Kill/KillUnknown──> Engine (engine.go)
//	                                 admission (admit.go) │  loop + housekeeping
//	                                                      v
//	                                 podManager (podmanager.go): desired pods,
//	                                 rejected pods, first sightings; no I/O
//	  pleg.PLEG ── relist every 1s ──> pleg.Cache                 │
//	        │            status newer than T  ^      │            v
//	        └── OnChange(uid) = Engine.Kick ──┼──────┼──> PodWorkers (podworkers.go)
//	                                          │      │     one goroutine per UID:
//	  WorkQueue (workqueue.go) <── requeue ───┼──────┼──── sync / terminating / terminated
//	        └── due pods, every 1s ──> Engine ┘      │            │ podSyncer
//	                                                 v            v
//	                      GetNewerThan(last sync) before    syncer (syncer.go)
//	                      each piece of work                 plan (cri.ComputePodActions:
//	                                                         probe verdicts and back-offs
//	                                                         are inputs), act (cri.Runtime),
//	                                                         read back at once into the
//	                                                         Cache, status.Generate
//	                                                              │ SetPodStatus / TerminatePod
//	                                                              v
//	                                      status.Manager: versioned, terminal
//	                                      phase final, illegal container
//	                                      transitions refused, coalesced delivery
//	                                                              │ Notify
//	                                                              v
//	                                      provider ──> virtual-kubelet ──> API server
//
// The syncer is also the runtime manager's RuntimeHelper (runoptions.go:
// environment from envvars.go, volume mounts, node mounts from
// node_mounts.go, pull secrets from pullsecrets.go) and owns the pod's
// volumes (volumes.go) and probe workers (probes.go: the prober's results
// are read by status generation and by the plan). Before a pod's sandbox
// is created its resource claims (DRA) are checked as the kubelet's DRA
// manager prepares them (dra.go): crivk prepares no claim (DRA plugins
// register, package dra, but nothing calls them yet), so a pod whose claim
// needs a driver is not started (FailedPrepareDynamicResources,
// ContainerCreating), never run without its device. The pod cgroups are kept
// by package cm, beside this one: the engine reaches them only through its
// PodCgroups interface and imports no cm.
//
// Allocations (package allocation, the kubelet's allocation manager) hold
// the resources each pod was admitted with: admission counts them, and the
// syncer runs the allocated pod. An in-place resize the spec asks for, of
// containers or of the pod-level resources, is decided at the pod's sync
// (admit_resize.go, under the admission lock; resize.go: PodResizePending
// Deferred, or allocated), then the plan resizes the containers and the
// pod cgroup and PodResizeInProgress follows the runtime's and the pod
// cgroup's values. The syncer reads the pod cgroup's values
// (PodCgroups.PodCgroupConfig) for the pod-level status.resources of a
// pod the API shows Running.
//
// Evictions (evict.go) go through the workers' kill path with a status
// function and wait for the containers to stop, as the kubelet's
// killPodNow: the eviction manager's (package eviction) and the critical
// pod admission's (preempt.go: a critical pod refused only for lack of
// resources is admitted after the kubelet's choice of lower-priority pods,
// admission.PodsToPreempt, is evicted with reason Preempting; UpdatePod
// blocks meanwhile, under the admission lock). As the kubelet's, the
// status function is laid over the status generated from the stopped
// containers (syncer.go SyncTerminatingPod): an evicted or preempted pod
// whose containers all exited 0 ends Succeeded, without the reason and
// message, with the DisruptionTarget condition. A kill not done within 1.5
// times the grace period (10 s at least) gets the ExceededGracePeriod
// event and the caller goes on.
//
// The PLEG (package pleg) relists every period and also at once when woken
// through its Wake channel (cmd/crivk feeds it containerd's task events);
// the period is the safety net. It reads a changed pod unless nothing of
// the pod died and an earlier read (the engine's own, after acting)
// already shows the states the relist listed. Volumes (package volume) are set up before a
// sync may start containers and torn down once the pod is terminated; probes
// (package prober) republish the status when a result changes and a failed
// liveness/startup probe kicks the pod, whose plan kills and restarts the
// container.
//
// A pod's life in the workers (the kubelet's; the full timeline with the
// predicates that hold at each point is drawn above PodWorkerState):
//
//	create ──> SyncPod (repeated) ──terminal phase / kill / deletion──>
//	SyncTerminatingPod (repeated until no container runs; a shorter grace
//	period cancels the attempt in flight) ──> SyncTerminatedPod (final
//	status; a deleted pod's containers and sandbox are removed and the
//	provider deletes the API object) ──> finished ──SyncKnownPods──> forgotten
//
// A pod that finished on its own (Succeeded/Failed) keeps its stopped
// containers, and so its logs, until it is deleted; Housekeeping then
// removes them. Runtime pods of no API pod (deleted while crivk was down)
// are stopped and removed through the runtime-pod path once the provider
// has synced the informer of the API's pods (Config.APIPods,
// APIPodsSynced).
//
// What the API says of a pod (Config.APIPod: the object of the same UID,
// or a static pod's mirror pod) is the basis of its first status after a
// crivk restart: containers that ran before it keep their started and
// ready flags until their probes settle (status.probedState, prober's
// RanBeforeStart). A static pod whose mirror is not known yet (the
// informer not synced) publishes no status for at most 30 s after the
// engine started (syncer.holdStaticStatus; TestEngineRestartKeepsStaticPodStartedAndReady).
//
// Requeue (completeWork): at once after a phase transition, after
// SyncInterval (with jitter) after a successful sync, after a second when
// the runtime's network is not ready or a container waits for a back-off,
// after BackOffPeriod on other errors. A sync that removed a pod's
// containers to restart them all in place (the restartPolicyRules action
// RestartAllContainers: the status' AllContainersRestarting condition is
// the plan's PlanInputs.RestartAllContainers) has the pod synced again as
// soon as it ends (syncer.requeue, Engine.Kick, the kubelet's), which
// starts it again from its first init container
// (TestEngineRestartAllContainers).
//
// The engine never talks to the Kubernetes API itself; it must never run
// two workers for one UID or two started pods of the same namespace/name.
// Its subpackages (status, pleg, prober, volume, admission) must never
// import it; they know the engine only through the callbacks it hands
// them.
package lifecycle
