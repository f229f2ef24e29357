package cri

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
)

// PodActions is the plan ComputePodActions makes for one sync of a pod and
// SyncPod carries out, in this order: kill, or reset every container for
// an in-place restart of the pod (and nothing else), create sandbox, kill
// containers, remove dead instances, make the image volumes' images
// available, start the ephemeral containers, the sidecars, resize running
// containers in place, then the next init container or the regular
// containers. Every decision is in it, with its reason: SyncPod only
// executes it.
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
	// ContainersToKill maps runtime container IDs to the containers
	// stopped (before being replaced, or for good), each with its reason.
	ContainersToKill map[string]Kill
	// ContainersToRemove are dead instances removed before new ones are
	// created: of each container, those beyond the newest
	// max(PlanInputs.MaxDeadPerContainer, 1), with their log files (the
	// container GC's rule, gc.go; the kubelet's podContainerDeletor).
	ContainersToRemove []string
	// Waiting holds the containers the plan would start but holds back,
	// by name, with the kubelet's reason (CrashLoopBackOff while the
	// restart back-off runs, ImagePullBackOff while the pull back-off
	// does).
	Waiting map[string]Waiting
	// Restarts maps the containers started again to the exit of their
	// newest dead instance, from which the restart back-off counts (the
	// kubelet's doBackOff: SyncPod moves the back-off on from there).
	Restarts map[string]time.Time
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
	// ContainersToUpdate are the running containers resized in place,
	// per resource (cpu, memory), decreases first (resize.go).
	ContainersToUpdate map[v1.ResourceName][]ContainerUpdate
	// UpdatePodResources is set when a container is restarted for a
	// resize (its resizePolicy): the pod cgroup is resized as well.
	UpdatePodResources bool
	// UpdatePodLevelResources is set when the pod cgroup's values differ
	// from those of the (allocated) pod, a pod-level resize among them
	// (PlanInputs.PodCgroupResizing; the kubelet's
	// computePodLevelResourcesResizeAction): SyncPod resizes it, in order
	// around the containers' updates, also when no container changes.
	UpdatePodLevelResources bool
	// ImageVolumes are the pod's image volumes whose images SyncPod makes
	// available before it starts a container: all those whose pull
	// back-off does not run, and only when the plan starts a container
	// (imagevolumes.go).
	ImageVolumes []string
	// ContainersToReset are, when the pod restarts all its containers in
	// place (PlanInputs.RestartAllContainers), every instance of its init
	// and regular containers, stopped if need be and removed in this
	// order (restartall.go); such a plan has nothing else to do (when the
	// sandbox is not ready it has a new sandbox instead, and none of
	// these).
	ContainersToReset []Reset
}

// Kill is one container the plan stops, with why.
type Kill struct {
	Name string
	Type ContainerType
	// Reason says why, for logs.
	Reason string
	// Message is the Killing event's message; empty: the kubelet's
	// "Stopping container <name>".
	Message string
	// Grace is the grace period in seconds (a probe's
	// terminationGracePeriodSeconds overrides the pod's).
	Grace int64
	// PodEnds marks the kills that end the pod's run (its sidecars once
	// its containers finished; the kubelet's KillPod of computePodActions):
	// they stop together, in the termination order (KillPod's), not one
	// after the other.
	PodEnds bool
}

// Empty reports whether the plan has nothing to do and nothing to report
// (a container held back by a back-off is reported).
func (a PodActions) Empty() bool {
	return !a.KillPod && !a.CreateSandbox && a.NextInit < 0 && len(a.ContainersToStart) == 0 &&
		len(a.SidecarsToStart) == 0 && len(a.ContainersToKill) == 0 && len(a.EphemeralToStart) == 0 &&
		len(a.ContainersToRemove) == 0 && len(a.Waiting) == 0 && len(a.ContainersToUpdate) == 0 && !a.UpdatePodResources &&
		!a.UpdatePodLevelResources && len(a.ContainersToReset) == 0
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
	if len(a.ContainersToRemove) > 0 {
		parts = append(parts, fmt.Sprintf("remove(%d)", len(a.ContainersToRemove)))
	}
	if len(a.Waiting) > 0 {
		parts = append(parts, fmt.Sprintf("wait(%d)", len(a.Waiting)))
	}
	if len(a.EphemeralToStart) > 0 {
		parts = append(parts, fmt.Sprintf("start-ephemeral%v", a.EphemeralToStart))
	}
	if a.InitFailed {
		parts = append(parts, "init-failed")
	}
	if n := len(a.ContainersToUpdate[v1.ResourceCPU]) + len(a.ContainersToUpdate[v1.ResourceMemory]); n > 0 || a.UpdatePodResources {
		parts = append(parts, fmt.Sprintf("resize(%d)", n))
	}
	if a.UpdatePodLevelResources {
		parts = append(parts, "resize-pod-cgroup")
	}
	if len(a.ImageVolumes) > 0 {
		parts = append(parts, fmt.Sprintf("image-volumes(%d)", len(a.ImageVolumes)))
	}
	if len(a.ContainersToReset) > 0 {
		parts = append(parts, fmt.Sprintf("reset(%d)", len(a.ContainersToReset)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// PlanInputs are what a plan needs besides the spec and the runtime's
// state: the probes' verdicts and the back-offs, read-only.
type PlanInputs struct {
	// Started reports whether the running container id passed its startup
	// probe; nil: every running container counts as started (no probes).
	Started func(containerID string) bool
	// Failed reports which probe ("liveness" or "startup") the running
	// container id failed, if any; nil: none did. The plan kills such a
	// container (with the probe's grace) and starts it again if the
	// restart policy says so, as the kubelet's computePodActions.
	Failed func(containerID string) (probe string, failed bool)
	// BackOff is the state of the restart and pull back-offs now; nil:
	// nothing is held back.
	BackOff BackOffView
	// MaxDeadPerContainer is the container GC's MaxPerPodContainer
	// (--maximum-dead-containers-per-container): a sync leaves at most
	// max(it, 1) dead instances of each container, the newest.
	MaxDeadPerContainer int
	// PodCgroupResizing reports that the pod cgroup's CPU or memory
	// values differ from those the pod (allocated) asks for
	// (Runtime.PodCgroupResizing): a plan that keeps the sandbox and has
	// initialized the pod resizes it (UpdatePodLevelResources).
	PodCgroupResizing bool
	// RestartAllContainers: the pod's AllContainersRestarting condition
	// is True in the status generated for this sync (a container exited
	// with a code whose rule says RestartAllContainers, and some of the
	// pod's containers are still in the runtime). The plan is then the
	// in-place restart's alone (planRestartAll, restartall.go), as the
	// kubelet's computePodActions with its restartAllContainers argument.
	RestartAllContainers bool
}

// BackOffView is what a plan reads of the back-offs (BackOffs.View).
type BackOffView interface {
	// Restart reports whether the container key ("<pod uid>/<name>"),
	// whose newest dead instance exited at exitedAt, must still wait, and
	// the back-off's current length.
	Restart(key string, exitedAt time.Time) (time.Duration, bool)
	// Pull returns the last pull error of key while its pull back-off
	// runs.
	Pull(key string) (string, bool)
}

// BackOffKey is the key of a pod's container in the back-offs: the pod's
// UID, the container's name and a hash of the fields whose change resets
// the back-off, its image and resources, as the kubelet's GetBackoffKey
// (pkg/kubelet/kuberuntime/helpers.go), so that a container whose image is
// changed, or which is resized, starts with no back-off (the node e2e spec
// "should have their auto-restart back-off timer reset on image update").
func BackOffKey(pod *v1.Pod, name string) string {
	key := string(pod.UID) + "/" + name
	if c := specContainer(pod, name); c != nil {
		h := fnv.New64a()
		h.Write([]byte(c.Image + "/" + c.Resources.String()))
		key += "/" + strconv.FormatUint(h.Sum64(), 16)
	}
	return key
}

// specContainer is the pod's container, init container or ephemeral
// container of that name, nil if none.
func specContainer(pod *v1.Pod, name string) *v1.Container {
	var found *v1.Container
	podutil.AllContainers(pod, func(c *v1.Container) bool {
		if c.Name == name {
			found = c
		}
		return found == nil
	})
	return found
}

// ComputePodActions decides what SyncPod must do to bring the runtime's
// state of a pod (status) to what its spec asks, given the probes' verdicts
// and the back-offs (in). It is pure: no I/O, no clock.
// Its steps read top to bottom in the kubelet's computePodActions order
// (computePodActions); it is covered step by step by
// TestComputePodActions's table.
func ComputePodActions(pod *v1.Pod, status *PodStatus, in PlanInputs) PodActions {
	if in.RestartAllContainers {
		// Every instance goes: no dead ones to remove besides, no image
		// to make available before nothing starts.
		return planRestartAll(pod, status)
	}
	a := computePodActions(pod, status, in)
	a.ContainersToRemove = excessDead(status, in.MaxDeadPerContainer)
	a.ImageVolumes = planImageVolumes(pod, &a, in.BackOff)
	return a
}

// computePodActions is the plan but for the dead instances to remove, in
// the kubelet's order: a new sandbox with its first step, or, in the ready
// sandbox, the ephemeral containers, the init sequence with its sidecars,
// the regular containers and last the sidecars of a pod that has finished.
// Each step is a planner method that adds to the same plan.
func computePodActions(pod *v1.Pod, status *PodStatus, in PlanInputs) PodActions {
	a := PodActions{NextInit: -1, ContainersToKill: map[string]Kill{}}
	p := planner{pod: pod, status: status, in: in, a: &a}

	var newest *SandboxStatus
	if len(status.Sandboxes) > 0 {
		newest = &status.Sandboxes[0]
	}
	if status.SandboxNotReady() != "" {
		p.planNewSandbox(newest)
		return a
	}
	a.SandboxID = newest.ID
	p.planEphemeral()
	if !p.planInit() {
		return a
	}
	p.planRegular()
	p.stopSidecarsWhenFinished()
	// The kubelet's last step, once the pod is initialized: the pod
	// cgroup's own resize.
	a.UpdatePodLevelResources = in.PodCgroupResizing && !a.KillPod
	return a
}

// planNewSandbox plans a pod without a ready sandbox (newest, the latest
// one, nil if none): the old sandbox killed, a new one created with the
// first step of the pod (its first init container, else its regular
// containers), or nothing when the pod has finished.
func (p *planner) planNewSandbox(newest *SandboxStatus) {
	pod, status, a := p.pod, p.status, p.a
	a.KillPod = newest != nil
	if newest != nil {
		a.Attempt = newest.Attempt + 1
	}
	// A pod that does not restart and already ran its containers is
	// not started again in a new sandbox.
	if pod.Spec.RestartPolicy == v1.RestartPolicyNever && newest != nil && len(status.Containers) > 0 {
		return
	}
	a.CreateSandbox = true
	if len(pod.Spec.InitContainers) > 0 {
		// Every regular container ran once and succeeded (an
		// OnFailure pod): no new sandbox, no init sequence again.
		ranBefore, left := false, false
		for i := range pod.Spec.Containers {
			c := status.Latest(pod.Spec.Containers[i].Name, ContainerTypeRegular)
			ranBefore = ranBefore || c != nil
			left = left || !(c != nil && c.State == StateExited && c.ExitCode == 0 && podutil.RunsOnce(&pod.Spec.Containers[i], &pod.Spec))
		}
		if ranBefore && !left {
			a.CreateSandbox = false
			return
		}
		if p.start(pod.Spec.InitContainers[0].Name, ContainerTypeInit) {
			a.NextInit = 0
		}
		return
	}
	ranBefore := false
	for i := range pod.Spec.Containers {
		c := status.Latest(pod.Spec.Containers[i].Name, ContainerTypeRegular)
		ranBefore = ranBefore || c != nil
		// A container that runs once (OnFailure, its own policy or
		// else the pod's) and succeeded is not run again.
		if c != nil && c.State == StateExited && c.ExitCode == 0 && podutil.RunsOnce(&pod.Spec.Containers[i], &pod.Spec) {
			continue
		}
		if p.start(pod.Spec.Containers[i].Name, ContainerTypeRegular) {
			a.ContainersToStart = append(a.ContainersToStart, i)
		}
	}
	// Nothing left to run (every container of an OnFailure pod
	// succeeded): no new sandbox for it.
	if len(a.ContainersToStart) == 0 && len(a.Waiting) == 0 && ranBefore {
		a.CreateSandbox = false
	}
}

// planEphemeral starts the ephemeral containers that never ran: once, in
// the running sandbox, even before the pod is initialized, never
// restarted (the kubelet's).
func (p *planner) planEphemeral() {
	for i := range p.pod.Spec.EphemeralContainers {
		name := p.pod.Spec.EphemeralContainers[i].Name
		if p.status.Latest(name, ContainerTypeEphemeral) == nil && p.start(name, ContainerTypeEphemeral) {
			p.a.EphemeralToStart = append(p.a.EphemeralToStart, i)
		}
	}
}

// planInit plans the init sequence (initActions): which init containers
// start, as the sequence's next step or as sidecars started again. It
// reports whether the pod is initialized, i.e. whether the regular
// containers are looked at at all.
func (p *planner) planInit() bool {
	starts, initialized, failed := p.initActions()
	if failed {
		p.a.InitFailed = true
		return false
	}
	for k, i := range starts {
		if !p.start(p.pod.Spec.InitContainers[i].Name, ContainerTypeInit) {
			continue
		}
		// Before initialization the last one is the next step of the
		// sequence (a plain init container or a sidecar); the others,
		// and all of them once initialized, are sidecars started again.
		if !initialized && k == len(starts)-1 {
			p.a.NextInit = i
		} else {
			p.a.SidecarsToStart = append(p.a.SidecarsToStart, i)
		}
	}
	return initialized
}

// planRegular decides, for each regular container of an initialized pod,
// whether it is killed and whether it starts (again).
func (p *planner) planRegular() {
	pod, status, a := p.pod, p.status, p.a
	for i := range pod.Spec.Containers {
		spec := &pod.Spec.Containers[i]
		c := status.Latest(spec.Name, ContainerTypeRegular)
		restart := false
		switch {
		case c == nil:
			restart = true
		case c.State == StateRunning && p.killChanged(spec, c, fmt.Sprintf("Container %s definition changed, will be restarted", spec.Name)):
			// Its spec changed (the image): stopped and started again
			// whatever the restart policy (the kubelet's computePodActions).
			restart = true
		case c.State == StateRunning && p.killUnhealthy(spec, c, podutil.RestartableWithoutExitCode(spec, &pod.Spec)):
			// A container that failed its liveness or startup probe is
			// stopped, and started again unless its restartPolicy (else
			// the pod's) is Never: the rules need an exit code.
			restart = podutil.RestartableWithoutExitCode(spec, &pod.Spec)
		case c.State == StateRunning:
			// A running container is resized in place to its allocated
			// resources, or restarted when its resizePolicy says so
			// (resize.go).
			restart = p.resize(spec, c)
		case c.State == StateExited:
			// Its restartPolicyRules and restartPolicy, else the pod's.
			restart = podutil.ContainerShouldRestart(spec, &pod.Spec, c.ExitCode)
		default:
			// Created-but-not-started and unknown containers are always
			// replaced, whatever the policy (kubelet ShouldContainerBeRestarted).
			p.kill(c, fmt.Sprintf("container %q is in state %s", c.Name, c.State))
			restart = true
		}
		if restart && p.start(spec.Name, ContainerTypeRegular) {
			a.ContainersToStart = append(a.ContainersToStart, i)
		}
	}
}

// stopSidecarsWhenFinished: sidecars do not keep a pod alive. Once no
// regular container runs or is to start again (a pod that does not
// restart has finished, or its containers' own restartPolicy keeps them
// exited), they are stopped rather than restarted (the kubelet's
// computePodActions).
func (p *planner) stopSidecarsWhenFinished() {
	pod, status, a := p.pod, p.status, p.a
	if len(pod.Spec.Containers) == 0 || len(a.ContainersToStart) > 0 || p.waitingRegular() {
		return
	}
	for i := range pod.Spec.Containers {
		// A container killed by this plan still counts: the sidecars
		// stop after it, at the next sync.
		if c := status.Latest(pod.Spec.Containers[i].Name, ContainerTypeRegular); c != nil && c.State == StateRunning {
			return
		}
	}
	for _, i := range a.SidecarsToStart {
		p.unstart(pod.Spec.InitContainers[i].Name)
	}
	a.SidecarsToStart = nil
	for i := range pod.Spec.InitContainers {
		spec := &pod.Spec.InitContainers[i]
		if c := status.Latest(spec.Name, ContainerTypeInit); podutil.IsSidecar(spec) && c != nil && c.State == StateRunning {
			p.kill(c, fmt.Sprintf("sidecar %q stops: the pod's containers have finished", c.Name))
			k := a.ContainersToKill[c.ID]
			k.PodEnds = true
			a.ContainersToKill[c.ID] = k
		}
	}
}

// planner holds what ComputePodActions's steps share.
type planner struct {
	pod    *v1.Pod
	status *PodStatus
	in     PlanInputs
	a      *PodActions
}

// initActions is the init sequence as the kubelet's
// computeInitContainerActions decides it: the init containers to start,
// ascending; whether the pod is initialized (its regular containers are
// looked at); failed when an init container failed and may not run again.
// It plans the kills of the init containers it replaces. The start
// back-offs are the caller's (start).
//
// The pod counts as initialized from the start only while one of its
// regular containers' newest instance is created or running: an exited
// one may be of a sandbox gone since (a node reboot: every container
// exited, the old init containers purged by SyncPod), after which the
// init sequence runs again from the first. Otherwise the init containers
// are read from the last back, because finished ones may have been
// removed (the container GC): the newest one found decides.
//
//	none found (a new sandbox):          start init 0
//	plain, exited 0, not the last:       start the next one
//	sidecar running, started, not last:  start the next one (once)
//	plain or sidecar above, last:        initialized
//	plain running:                       wait for it
//	plain exited non-zero:               again, or failed (its restart rules)
//	sidecar exited:                      again, always
//	created or unknown:                  killed and started again (a plain
//	                                     unknown one fails the pod when it
//	                                     may not restart without an exit code)
//
// Below the newest one found, and everywhere once initialized, only the
// sidecars are looked at: an exited or missing one starts again, a running
// one is restarted when its spec changed, it failed a probe or its resize
// needs a restart.
//
// It stays one function: the table above is one walk from the last init
// container back, each row a branch of it, as the kubelet's
// computeInitContainerActions.
func (p *planner) initActions() (starts []int, initialized, failed bool) {
	spec := &p.pod.Spec
	if len(spec.InitContainers) == 0 {
		return nil, true, false
	}
	for i := range spec.Containers {
		c := p.status.Latest(spec.Containers[i].Name, ContainerTypeRegular)
		if c != nil && (c.State == StateCreated || c.State == StateRunning) {
			initialized = true
			break
		}
	}
	last := len(spec.InitContainers) - 1
	// seen: a later init container was found (or the pod initialized):
	// the ones before it have run.
	seen := initialized
	for i := last; i >= 0; i-- {
		ic := &spec.InitContainers[i]
		c := p.status.Latest(ic.Name, ContainerTypeInit)
		sidecar := podutil.IsSidecar(ic)
		if c == nil {
			// Removed (or never run) before a later one ran: only a
			// sidecar has to run again.
			if seen && sidecar {
				starts = append(starts, i)
			}
			continue
		}
		if seen && !sidecar {
			continue
		}
		switch {
		case c.State == StateRunning && !sidecar:
			// A plain init container runs to completion first.
		case c.State == StateRunning:
			// A running sidecar whose spec changed (its image), or that
			// failed its liveness or startup probe, is stopped and
			// started again. It counts as done once its startup probe
			// (if any) succeeded: until then nothing after it starts.
			started := ic.StartupProbe == nil || p.in.Started == nil || p.in.Started(c.ID)
			if p.in.Failed != nil {
				if what, f := p.in.Failed(c.ID); f && what == "startup" && ic.StartupProbe != nil {
					started = false
				}
			}
			restart := started && p.killChanged(ic, c, fmt.Sprintf("Init container %s definition changed", ic.Name))
			restart = restart || p.killUnhealthy(ic, c, true)
			// Resized in place, or restarted when its resizePolicy says
			// so (resize.go).
			restart = restart || p.resize(ic, c)
			if started {
				if i == last {
					initialized = true
				} else if !seen {
					starts = append(starts, i+1)
				}
			}
			if restart {
				starts = append(starts, i)
			}
		case c.State == StateExited && sidecar:
			starts = append(starts, i)
		case c.State == StateExited && c.ExitCode != 0:
			// Its restartPolicyRules and restartPolicy, else the pod's.
			if !podutil.ContainerShouldRestart(ic, spec, c.ExitCode) {
				return nil, false, true
			}
			starts = append(starts, i)
		case c.State == StateExited:
			if i == last {
				initialized = true
			} else {
				starts = append(starts, i+1)
			}
		default: // created but never started, or unknown: replace it
			if !sidecar && c.State == StateUnknown && !podutil.RestartableWithoutExitCode(ic, spec) {
				// The pod failed; its sandbox is stopped as a finished pod's.
				return nil, false, true
			}
			kind := "init container"
			if sidecar {
				kind = "sidecar"
			}
			p.kill(c, fmt.Sprintf("%s %q is in state %s", kind, c.Name, c.State))
			starts = append(starts, i)
		}
		seen = true
	}
	if !seen {
		starts = append(starts, 0)
	}
	slices.Reverse(starts)
	return starts, initialized, false
}

// kill stops c with the pod's grace period.
func (p *planner) kill(c *ContainerStatus, reason string) {
	p.a.ContainersToKill[c.ID] = Kill{Name: c.Name, Type: c.Type, Reason: reason, Grace: gracePeriod(p.pod, nil)}
}

// killChanged plans the kill of the running container c if the spec it
// was created from is not spec any more (HashContainer: the kubelet's
// containerChanged), with the kubelet's Killing message, and reports
// whether it did. A container created without the hash annotation is
// never taken for changed: restarting every container an older crivk
// started would be worse than missing an image change made meanwhile.
func (p *planner) killChanged(spec *v1.Container, c *ContainerStatus, msg string) bool {
	if !c.HasHash || c.Hash == HashContainer(spec) {
		return false
	}
	p.a.ContainersToKill[c.ID] = Kill{Name: c.Name, Type: c.Type, Reason: "definition changed", Message: msg, Grace: gracePeriod(p.pod, nil)}
	return true
}

// killUnhealthy plans the kill of the running container c if it failed
// its liveness or startup probe, with the kubelet's Killing message and
// the probe's grace override, and reports whether it did.
func (p *planner) killUnhealthy(spec *v1.Container, c *ContainerStatus, willRestart bool) bool {
	if p.in.Failed == nil {
		return false
	}
	what, failed := p.in.Failed(c.ID)
	var probe *v1.Probe
	switch {
	case !failed:
	case what == "liveness":
		probe = spec.LivenessProbe
	case what == "startup":
		probe = spec.StartupProbe
	}
	if probe == nil {
		return false
	}
	msg := fmt.Sprintf("Container %s failed %s probe", c.Name, what)
	switch {
	case c.Type == ContainerTypeInit:
		// A sidecar's, in the kubelet's words (computeInitContainerActions).
		msg = fmt.Sprintf("Init container %s failed %s probe", c.Name, what)
	case willRestart:
		msg += ", will be restarted"
	}
	p.a.ContainersToKill[c.ID] = Kill{Name: c.Name, Type: c.Type, Reason: "failed " + what + " probe",
		Message: msg, Grace: gracePeriod(p.pod, probe.TerminationGracePeriodSeconds)}
	return true
}

// start reports whether the named container may start now: not while its
// restart back-off runs (measured from the exit of its newest dead
// instance, as the kubelet's doBackOff), nor the pull back-off of an image
// volume it mounts, nor its own image's pull back-off, in the kubelet's
// order (doBackOff, toKubeContainerImageVolumes, then the container's
// EnsureImageExists); those are held back in Waiting. For a container that
// starts, a restart is recorded.
func (p *planner) start(name string, typ ContainerType) bool {
	key := BackOffKey(p.pod, name)
	var lastExit *ContainerStatus
	for i := range p.status.Containers { // newest first
		if c := &p.status.Containers[i]; c.Name == name && c.Type == typ && c.State == StateExited {
			lastExit = c
			break
		}
	}
	if bo := p.in.BackOff; bo != nil {
		if lastExit != nil && !lastExit.FinishedAt.IsZero() {
			if d, wait := bo.Restart(key, lastExit.FinishedAt); wait {
				p.hold(name, Waiting{Reason: ReasonCrashLoopBackOff,
					Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", d, name, p.pod.Name, p.pod.Namespace, p.pod.UID)})
				return false
			}
		}
		if w, wait := imageVolumeHold(p.pod, containerSpec(p.pod, name, typ), bo); wait {
			p.hold(name, w)
			return false
		}
		if last, wait := bo.Pull(key); wait {
			p.hold(name, Waiting{Reason: ReasonImagePullBackOff,
				Message: fmt.Sprintf("Back-off pulling image %q: %s", containerImage(p.pod, name, typ), last)})
			return false
		}
	}
	if lastExit != nil && !lastExit.FinishedAt.IsZero() {
		if p.a.Restarts == nil {
			p.a.Restarts = map[string]time.Time{}
		}
		p.a.Restarts[name] = lastExit.FinishedAt
	}
	return true
}

// unstart takes back what start recorded for a container the plan no
// longer starts.
func (p *planner) unstart(name string) {
	delete(p.a.Restarts, name)
}

func (p *planner) hold(name string, w Waiting) {
	if p.a.Waiting == nil {
		p.a.Waiting = map[string]Waiting{}
	}
	p.a.Waiting[name] = w
}

// waitingRegular reports whether a regular container is held back by a
// back-off (it is to start again, later).
func (p *planner) waitingRegular() bool {
	for i := range p.pod.Spec.Containers {
		if _, ok := p.a.Waiting[p.pod.Spec.Containers[i].Name]; ok {
			return true
		}
	}
	return false
}

// containerImage is the image of the named container of pod.
func containerImage(pod *v1.Pod, name string, typ ContainerType) string {
	if c := containerSpec(pod, name, typ); c != nil {
		return c.Image
	}
	return ""
}
