// Package cri is crivk's runtime manager: it turns a pod spec plus what the
// container runtime reports into CRI calls, the way the kubelet's
// pkg/kubelet/kuberuntime does, and reads the runtime's state back as a
// PodStatus.
//
// It owns no pod state. Everything it knows about a pod it reads back from
// the runtime through the labels and annotations it puts on sandboxes and
// containers (the same keys the kubelet uses, so crictl and other tooling
// show crivk's pods as they show the kubelet's).
//
// The caller (package lifecycle) runs this loop per pod:
//
//	status := rt.GetPodStatus(ctx, uid, name, ns)   // read
//	plan   := ComputePodActions(pod, status, ...)   // pure: decide
//	result := rt.SyncPod(ctx, pod, status, plan)    // act, per-step results
//	...
//	rt.KillPod(ctx, pod, status, grace)            // on termination
//
// ComputePodActions is a pure function and is table-tested. SyncPod and
// KillPod only carry out what they are told and report per-step errors; they
// never decide policy (restart, back-off, phase) on their own. Back-off
// state belongs to the caller and is passed in.
//
// Connect talks to the runtime through crivk's own CRI client (remote.go):
// the runtime and image services over one gRPC connection, with the
// kubelet's per-call deadlines (Config.RequestTimeout, the kubelet's
// --runtime-request-timeout) and response checks. Container logs are read
// by the subpackage crilog.
//
// What this package must never do: talk to the Kubernetes API, keep a map of
// pods, or block on anything but the runtime.
package cri
