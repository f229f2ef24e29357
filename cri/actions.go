package cri

import (
	"fmt"
	"strings"

	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
)

// PodActions is the plan ComputePodActions makes for one sync of a pod and
// SyncPod carries out, in this order: kill, create sandbox, kill containers,
// start the next init container or the regular containers.
type PodActions struct {
	// KillPod stops every container and sandbox of the pod first (the
	// sandbox is gone or broken and a new one is needed).
	KillPod bool
	// CreateSandbox asks for a new sandbox with attempt number Attempt.
	CreateSandbox bool
	Attempt       uint32
	// SandboxID is the sandbox the containers go into when none is created.
	SandboxID string
	// NextInit is the index of the init container to start, or -1.
	NextInit int
	// ContainersToStart are indexes into pod.Spec.Containers.
	ContainersToStart []int
	// ContainersToKill maps runtime container IDs to the reason they are
	// stopped before being replaced.
	ContainersToKill map[string]string
	// SidecarsToStart are indexes into pod.Spec.InitContainers of
	// restartable init containers (sidecars) to start again after the pod
	// was initialized; they start before ContainersToStart.
	SidecarsToStart []int
	// InitFailed is set when an init container failed and the restart
	// policy forbids running it again: the pod has failed.
	InitFailed bool
	// EphemeralToStart are indexes into pod.Spec.EphemeralContainers that
	// never ran: started once in the running sandbox, before the init and
	// regular containers, never restarted.
	EphemeralToStart []int
}

// Empty reports whether the plan has nothing to do.
func (a PodActions) Empty() bool {
	return !a.KillPod && !a.CreateSandbox && a.NextInit < 0 && len(a.ContainersToStart) == 0 &&
		len(a.SidecarsToStart) == 0 && len(a.ContainersToKill) == 0 && len(a.EphemeralToStart) == 0
}

// String summarises the plan for logs.
func (a PodActions) String() string {
	var parts []string
	if a.KillPod {
		parts = append(parts, "kill-pod")
	}
	if a.CreateSandbox {
		parts = append(parts, fmt.Sprintf("create-sandbox(attempt %d)", a.Attempt))
	}
	if a.NextInit >= 0 {
		parts = append(parts, fmt.Sprintf("start-init[%d]", a.NextInit))
	}
	if len(a.ContainersToStart) > 0 {
		parts = append(parts, fmt.Sprintf("start%v", a.ContainersToStart))
	}
	if len(a.SidecarsToStart) > 0 {
		parts = append(parts, fmt.Sprintf("start-sidecars%v", a.SidecarsToStart))
	}
	if len(a.ContainersToKill) > 0 {
		parts = append(parts, fmt.Sprintf("kill(%d)", len(a.ContainersToKill)))
	}
	if len(a.EphemeralToStart) > 0 {
		parts = append(parts, fmt.Sprintf("start-ephemeral%v", a.EphemeralToStart))
	}
	if a.InitFailed {
		parts = append(parts, "init-failed")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// ShouldRestart applies restartPolicy to a container that exited with code.
func ShouldRestart(policy v1.RestartPolicy, exitCode int32) bool {
	switch policy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	default:
		return true
	}
}

// PlanInputs are what a plan needs besides the spec and the runtime's
// state: the probes' verdicts.
type PlanInputs struct {
	// Started reports whether the running container id passed its startup
	// probe; nil: every running container counts as started (no probes).
	Started func(containerID string) bool
}

// ComputePodActions decides what SyncPod must do to bring the runtime's
// state of a pod (status) to what its spec asks. It is pure: no I/O, no
// clock; back-off is applied when the plan is carried out.
// It stays one function, as the kubelet's computePodActions: the steps of
// the plan (sandbox, init sequence with sidecars, regular containers,
// kills) read top to bottom and share what is computed on the way; it is
// pure and covered step by step by TestComputePodActions's table.
func ComputePodActions(pod *v1.Pod, status *PodStatus, in PlanInputs) PodActions {
	a := PodActions{NextInit: -1, ContainersToKill: map[string]string{}}
	policy := pod.Spec.RestartPolicy

	var newest *SandboxStatus
	if len(status.Sandboxes) > 0 {
		newest = &status.Sandboxes[0]
	}
	if newest == nil || !newest.Ready {
		a.KillPod = newest != nil
		if newest != nil {
			a.Attempt = newest.Attempt + 1
		}
		// A pod that does not restart and already ran its containers is
		// not started again in a new sandbox.
		if policy == v1.RestartPolicyNever && newest != nil && len(status.Containers) > 0 {
			return a
		}
		a.CreateSandbox = true
		if len(pod.Spec.InitContainers) > 0 {
			a.NextInit = 0
			return a
		}
		ranBefore := false
		for i := range pod.Spec.Containers {
			c := status.Latest(pod.Spec.Containers[i].Name, ContainerTypeRegular)
			ranBefore = ranBefore || c != nil
			if c != nil && c.State == StateExited && c.ExitCode == 0 && policy != v1.RestartPolicyAlways {
				continue
			}
			a.ContainersToStart = append(a.ContainersToStart, i)
		}
		// Nothing left to run (every container of an OnFailure pod
		// succeeded): no new sandbox for it.
		if len(a.ContainersToStart) == 0 && ranBefore {
			a.CreateSandbox = false
		}
		return a
	}
	a.SandboxID = newest.ID
	// Ephemeral containers start once in the running sandbox, even before
	// the pod is initialized, and are never restarted (the kubelet's).
	for i := range pod.Spec.EphemeralContainers {
		if status.Latest(pod.Spec.EphemeralContainers[i].Name, ContainerTypeEphemeral) == nil {
			a.EphemeralToStart = append(a.EphemeralToStart, i)
		}
	}

	// The pod was initialized once a regular container was created: from
	// then on only sidecars of the init containers are (re)started.
	initialized := false
	for i := range pod.Spec.Containers {
		if status.Latest(pod.Spec.Containers[i].Name, ContainerTypeRegular) != nil {
			initialized = true
		}
	}

	// Init containers run one at a time, in order, each to completion; a
	// sidecar counts as done once it runs.
	for i := range pod.Spec.InitContainers {
		spec := &pod.Spec.InitContainers[i]
		c := status.Latest(spec.Name, ContainerTypeInit)
		if podutil.IsSidecar(spec) {
			if initialized {
				switch {
				case c == nil || c.State == StateExited:
					a.SidecarsToStart = append(a.SidecarsToStart, i)
				case c.State == StateRunning:
				default:
					a.ContainersToKill[c.ID] = fmt.Sprintf("sidecar %q is in state %s", c.Name, c.State)
					a.SidecarsToStart = append(a.SidecarsToStart, i)
				}
				continue
			}
			switch {
			case c == nil || c.State == StateExited:
				a.NextInit = i
				return a
			case c.State == StateRunning:
				// A sidecar with a startup probe counts as done once the
				// probe succeeded: until then nothing after it starts (the
				// kubelet's computeInitContainerActions).
				if spec.StartupProbe != nil && in.Started != nil && !in.Started(c.ID) {
					return a
				}
				continue
			default:
				a.ContainersToKill[c.ID] = fmt.Sprintf("sidecar %q is in state %s", c.Name, c.State)
				a.NextInit = i
				return a
			}
		}
		if initialized {
			continue
		}
		switch {
		case c == nil:
			a.NextInit = i
			return a
		case c.State == StateRunning:
			return a
		case c.State == StateExited && c.ExitCode == 0:
			continue
		case c.State == StateExited:
			if policy == v1.RestartPolicyNever {
				a.InitFailed = true
				return a
			}
			a.NextInit = i
			return a
		default: // created but never started, or unknown: replace it
			if policy == v1.RestartPolicyNever && c.State == StateUnknown {
				// The pod failed; its sandbox is stopped as a finished pod's.
				a.InitFailed = true
				return a
			}
			a.ContainersToKill[c.ID] = fmt.Sprintf("init container %q is in state %s", c.Name, c.State)
			a.NextInit = i
			return a
		}
	}

	for i := range pod.Spec.Containers {
		c := status.Latest(pod.Spec.Containers[i].Name, ContainerTypeRegular)
		switch {
		case c == nil:
			a.ContainersToStart = append(a.ContainersToStart, i)
		case c.State == StateRunning:
		case c.State == StateExited:
			if ShouldRestart(policy, c.ExitCode) {
				a.ContainersToStart = append(a.ContainersToStart, i)
			}
		default:
			// Created-but-not-started and unknown containers are always
			// replaced, whatever the policy (kubelet ShouldContainerBeRestarted).
			a.ContainersToKill[c.ID] = fmt.Sprintf("container %q is in state %s", c.Name, c.State)
			a.ContainersToStart = append(a.ContainersToStart, i)
		}
	}

	// Sidecars do not keep a pod alive: once no regular container runs or
	// is to start again (a pod that does not restart has finished), they
	// are stopped rather than restarted (the kubelet's computePodActions).
	if policy != v1.RestartPolicyAlways && len(pod.Spec.Containers) > 0 && len(a.ContainersToStart) == 0 {
		anyRunning := false
		for i := range pod.Spec.Containers {
			if c := status.Latest(pod.Spec.Containers[i].Name, ContainerTypeRegular); c != nil && c.State == StateRunning {
				anyRunning = true
			}
		}
		if !anyRunning {
			a.SidecarsToStart = nil
			for i := range pod.Spec.InitContainers {
				spec := &pod.Spec.InitContainers[i]
				if c := status.Latest(spec.Name, ContainerTypeInit); podutil.IsSidecar(spec) && c != nil && c.State == StateRunning {
					a.ContainersToKill[c.ID] = fmt.Sprintf("sidecar %q stops: the pod's containers have finished", c.Name)
				}
			}
		}
	}
	return a
}
