// Package lifecycle is crivk's pod engine: for every pod UID bound to the
// node it decides what must happen and when, drives the runtime manager
// (package cri) and publishes the kubelet-shaped API status.
//
// This is the foundation version: one worker goroutine per pod UID, kicked
// by spec changes, deletion and the PLEG (pleg.go: one relist of the whole
// runtime per period, a pure (old, new) -> events diff), and resynced every
// Config.SyncInterval. The kubelet's full pod worker state machine and
// status manager come with the lifecycle-engine work; the status generation
// (status.go) and the PLEG event rules are already the kubelet's.
//
// A pod's worker goes through the states of WorkerState (state.go, with
// the diagram and the one table of allowed transitions): Syncing, Finished
// (phase Succeeded/Failed: sandbox stopped, containers kept for logs),
// Terminating (containers stopped with the effective grace period, retried
// with back-off until the runtime confirms; a shorter grace period cancels
// the attempt in flight through its context) and Terminated (final status
// published, sandbox and containers removed, Config.OnTerminated called so
// the provider deletes the API object, worker forgotten).
//
// Who calls what: the provider calls Engine.UpdatePod and Engine.Kill from
// virtual-kubelet's pod controller; the Engine calls the Runtime interface
// (implemented by *cri.Runtime) and hands every new status to the notify
// callback registered with Engine.NotifyPods. The engine never talks to the
// Kubernetes API itself.
package lifecycle
