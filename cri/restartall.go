package cri

import (
	"context"
	"fmt"
	"slices"

	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
)

// The in-place restart of a whole pod: the restartPolicyRules action
// RestartAllContainers (RestartAllContainersOnContainerExits, beta and on
// in the kubelet v1.36 and v1.37; its computePodActions, getContainersToReset
// and SyncPod). A container whose exit matches such a rule (the source)
// restarts every init, sidecar and regular container of the pod, in the
// same sandbox, from the first init container. Ephemeral containers are
// left alone. The decision is lifecycle/status's AllContainersRestarting
// condition, which the plan reads (PlanInputs.RestartAllContainers):
//
//	a source exits ──> status: AllContainersRestarting True
//	                   (RestartAllContainersStarted)
//	                     │ plan: ContainersToReset, nothing else
//	                     v
//	SyncPod: each instance of every init and regular container, the
//	  targets (exited without such a rule, or not exited) first, the
//	  sources last; one not exited is killed with no grace (Killing
//	  "killing", StopContainer with the minimum grace), then removed,
//	  its log file kept (the next attempt counts on from it, nextAttempt)
//	                     │ the caller syncs again at once
//	                     v
//	status: none of the pod's containers left -> the condition False;
//	  each container Waiting, its last state Terminated, reason
//	  RestartingAllContainers
//	                     │ plan as ever: no container found, so the
//	                     v init sequence from the first, no back-off
//	the pod runs again; restart counts one more than before
//
// A removal that fails stops the sync there (the kubelet's); the next
// sync plans the reset again while the condition stays True.

// Reset is one container instance the in-place restart of the pod removes.
type Reset struct {
	ID   string
	Name string
	Type ContainerType
	// Kill: the instance has not exited; it is stopped first, with no
	// grace period (the kubelet's override 0, which the runtime gets
	// raised to minGracePeriod) and no preStop hook.
	Kill bool
}

// killMessageRestartAll is the Killing event's message for a container
// stopped by the in-place restart (the kubelet's killContainer message
// "killing", reason RestartAllContainers).
const killMessageRestartAll = "killing"

// planRestartAll is the plan of a pod whose AllContainersRestarting
// condition is True (the kubelet's computePodActions returns it before
// anything else): every instance of its init and regular containers to
// reset. When its newest sandbox is gone or not ready, the pod is killed
// and a new sandbox made instead, in which nothing starts yet and nothing
// is reset: the kubelet resets only in a sandbox it keeps, the next sync
// does (the condition stays True while a container is left).
func planRestartAll(pod *v1.Pod, status *PodStatus) PodActions {
	a := PodActions{NextInit: -1, ContainersToKill: map[string]Kill{}}
	var newest *SandboxStatus
	if len(status.Sandboxes) > 0 {
		newest = &status.Sandboxes[0]
	}
	if status.SandboxNotReady() != "" {
		a.KillPod, a.CreateSandbox = newest != nil, true
		if newest != nil {
			a.Attempt = newest.Attempt + 1
		}
		return a
	}
	a.SandboxID = newest.ID
	a.ContainersToReset = containersToReset(pod, status)
	return a
}

// containersToReset lists every instance (of every sandbox) of the pod's
// init and regular containers in the kubelet's order of removal: the
// regular targets, the init targets, then the regular sources and the
// init sources, where a source is an instance that exited with a code
// whose rule says RestartAllContainers and a target any other (the
// kubelet's getContainersToReset), each list in spec order, newest
// instance first.
func containersToReset(pod *v1.Pod, status *PodStatus) []Reset {
	split := func(specs []v1.Container, typ ContainerType) (sources, targets []Reset) {
		for i := range specs {
			for _, c := range status.Containers {
				if c.Name != specs[i].Name || c.Type != typ {
					continue
				}
				r := Reset{ID: c.ID, Name: c.Name, Type: typ}
				switch {
				case c.State != StateExited:
					r.Kill = true
					targets = append(targets, r)
				case podutil.RestartsAllContainers(&specs[i], c.ExitCode):
					sources = append(sources, r)
				default:
					targets = append(targets, r)
				}
			}
		}
		return sources, targets
	}
	initSources, initTargets := split(pod.Spec.InitContainers, ContainerTypeInit)
	sources, targets := split(pod.Spec.Containers, ContainerTypeRegular)
	return slices.Concat(targets, initTargets, sources, initSources)
}

// resetContainers carries out the plan's ContainersToReset in order: each
// instance not exited is stopped with no grace, then removed with its log
// link, its log file kept (the kubelet's removeContainer with keepLogs:
// the pod's logs go with the pod). It stops at the first failure, as the
// kubelet's SyncPod; the IDs it removed go to res.Reset.
func (r *Runtime) resetContainers(ctx context.Context, pod *v1.Pod, status *PodStatus, resets []Reset, res *SyncResult) {
	for _, c := range resets {
		if c.Kill {
			running := false
			for _, s := range status.Containers {
				if s.ID == c.ID {
					running = s.State == StateRunning
				}
			}
			if err := r.stopContainer(ctx, pod, containerSpec(pod, c.Name, c.Type), c.ID, running, status.IPs(), 0, killMessageRestartAll, nil); err != nil {
				res.Errs = append(res.Errs, fmt.Errorf("stopping container %q (%s) of pod %s to restart all its containers: %w", c.Name, c.ID, RefOf(pod), err))
				return
			}
		}
		if err := r.removeContainer(ctx, c.ID, r.containerLogSymlink(status.Ref, c.Name, c.ID)); err != nil {
			res.Errs = append(res.Errs, fmt.Errorf("removing container %q (%s) of pod %s to restart all its containers: %w", c.Name, c.ID, RefOf(pod), err))
			return
		}
		res.Reset = append(res.Reset, c.ID)
	}
}
