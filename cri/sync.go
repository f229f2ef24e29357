package cri

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/crivk/crivk/podutil"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func isNotFound(err error) bool {
	return grpcstatus.Code(err) == codes.NotFound
}

// BackOff is the part of client-go's flowcontrol.Backoff that SyncPod uses.
type BackOff interface {
	IsInBackOffSince(id string, eventTime time.Time) bool
	IsInBackOffSinceUpdate(id string, eventTime time.Time) bool
	Next(id string, eventTime time.Time)
	Get(id string) time.Duration
	Reset(id string)
	GC()
}

// BackOffs holds the restart and image pull back-off of every container of
// the node. The caller owns it so that back-off outlives a single sync; keys
// are BackOffKey's "<pod uid>/<container>". A plan reads it through View;
// SyncPod moves it on from what happened.
//
// A container's restart machine (the kubelet's; 10 s doubling to 300 s,
// forgotten after 10 minutes of clean running):
//
//	       plan: start (never ran, exited and the restart policy says
//	       so, or killed for a failed liveness/startup probe; a sidecar
//	       always, an ephemeral container never again)
//	                       │
//	                       v
//	┌──── first start / back-off over ─────> Running ───exit───┐
//	│     (SyncPod: Next(T) doubles D)                         │
//	│                                                          │
//	│   ComputePodActions: newest dead instance exited at T    │
//	│   and View.Restart(T) -> Waiting CrashLoopBackOff        │
//	│   "back-off D restarting failed container=..." (nothing  │
//	│   started; the pod is looked at again every second)      │
//	└──────────────────────── Exited <─────────────────────────┘
//
// Image pulls have their own back-off (Pull): a failed pull makes
// ErrImagePull (SyncPod records it), then the plan holds the container in
// ImagePullBackOff "Back-off pulling image ..." until the back-off runs
// out.
type BackOffs struct {
	Restart BackOff
	Pull    BackOff

	mu      sync.Mutex
	pullErr map[string]string // last pull error per key, guarded by mu
}

// View returns the back-offs as a plan reads them at now.
func (b *BackOffs) View(now time.Time) BackOffView {
	return backOffView{b: b, now: now}
}

type backOffView struct {
	b   *BackOffs
	now time.Time
}

func (v backOffView) Restart(key string, exitedAt time.Time) (time.Duration, bool) {
	if !v.b.Restart.IsInBackOffSince(key, exitedAt) {
		return 0, false
	}
	return v.b.Restart.Get(key), true
}

func (v backOffView) Pull(key string) (string, bool) {
	v.b.mu.Lock()
	defer v.b.mu.Unlock()
	msg, ok := v.b.pullErr[key]
	if !ok || !v.b.Pull.IsInBackOffSinceUpdate(key, v.now) {
		return "", false
	}
	return msg, true
}

func (b *BackOffs) pullFailed(key string, now time.Time, msg string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pullErr == nil {
		b.pullErr = map[string]string{}
	}
	b.pullErr[key] = msg
	b.Pull.Next(key, now)
}

func (b *BackOffs) pullSucceeded(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.pullErr[key]; ok {
		delete(b.pullErr, key)
		b.Pull.Reset(key)
	}
}

// Forget drops every entry of a pod whose worker is gone.
func (b *BackOffs) Forget(pod *v1.Pod) {
	b.mu.Lock()
	defer b.mu.Unlock()
	podutil.AllContainers(pod, func(c *v1.Container) bool {
		k := BackOffKey(pod, c.Name)
		b.Restart.Reset(k)
		b.Pull.Reset(k)
		delete(b.pullErr, k)
		return true
	})
	for i := range pod.Spec.Volumes {
		if src := pod.Spec.Volumes[i].Image; src != nil {
			k := ImageVolumeBackOffKey(pod, src.Reference)
			b.Pull.Reset(k)
			delete(b.pullErr, k)
		}
	}
}

// GC drops the back-offs not updated for twice their maximum (the
// kubelet's crashLoopBackOff.GC in HandlePodCleanups): those of a
// container's earlier specs (the key holds the spec's hash, BackOffKey),
// which Forget no longer names.
func (b *BackOffs) GC() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.Restart.GC()
	b.Pull.GC()
	for k := range b.pullErr {
		if b.Pull.Get(k) == 0 {
			delete(b.pullErr, k)
		}
	}
}

// Waiting is why a container is not running after a sync, in the kubelet's
// words (reason is one of the Reason* constants).
type Waiting struct {
	Reason, Message string
}

// SyncResult reports what a SyncPod did and what failed.
type SyncResult struct {
	// SandboxErr is set when the sandbox could not be created; nothing else
	// was attempted.
	SandboxErr error
	// DNSWarning is set when the pod's DNS policy could not be honoured.
	DNSWarning DNSWarning
	// Waiting holds, per container name, why a container that the plan
	// wanted started is not running.
	Waiting map[string]Waiting
	// Started lists the containers started, with their image ID.
	Started []string
	// Pulls are the image pulls that succeeded, each from its start to its
	// end (the kubelet's pod startup latency tracker leaves them out of
	// the pod start SLI).
	Pulls []PullSpan
	// ResizeErr is set when the in-place resize failed (the kubelet's
	// ResizePodInPlace result); its text is the PodResizeInProgress
	// condition's Error message. It is also among Errs.
	ResizeErr error
	// Reset are the IDs of the container instances the in-place restart
	// of the pod removed (plan.ContainersToReset): once it removed any
	// without an error, the caller syncs the pod again at once, to start
	// it again (the kubelet's requeue after RestartAllContainers).
	Reset []string
	// Errs are the errors of individual steps, for logs.
	Errs []error
}

// Error joins the step errors.
func (r *SyncResult) Error() error {
	if r.SandboxErr != nil {
		return r.SandboxErr
	}
	return errors.Join(r.Errs...)
}

// minGracePeriod is the shortest grace the kubelet gives a container.
const minGracePeriod = int64(2)

// SyncPod carries out plan for pod, given the runtime status the plan was
// made from, in kuberuntime's SyncPod order, stopping where the kubelet
// stops: the old sandbox killed, or else the containers reset for an
// in-place restart of the pod (restartall.go: nothing follows them), the
// sandbox's config and the new sandbox, the planned kills and removals,
// the images of the image volumes (imagevolumes.go), the ephemeral
// containers and sidecars, the in-place resize, then the next init
// container or else the regular containers.
// Each step that may end the sync is a method returning whether the sync
// goes on.
func (r *Runtime) SyncPod(ctx context.Context, pod *v1.Pod, status *PodStatus, plan PodActions, backoff *BackOffs, now time.Time) *SyncResult {
	res := &SyncResult{Waiting: map[string]Waiting{}}
	for name, w := range plan.Waiting {
		res.Waiting[name] = w
	}
	if plan.KillPod && !r.killPodForPlan(ctx, pod, status, plan, res) {
		return res
	}
	if len(plan.ContainersToReset) > 0 {
		// The kubelet's step 3 of an in-place restart: its plan has
		// nothing else to do.
		r.resetContainers(ctx, pod, status, plan.ContainersToReset, res)
		return res
	}
	// The kubelet counts a user-namespaced pod's start where it creates
	// the sandbox, and an error when the sync's result has one, whatever
	// step it came from (a refused user namespace, a container that could
	// not be created).
	if plan.CreateSandbox && pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers && r.cfg.ObserveUserNamespacedStart != nil {
		defer func() { r.cfg.ObserveUserNamespacedStart(res.Error() != nil) }()
	}
	sbCfg, handler, ok := r.podSandboxConfig(ctx, pod, plan, sandboxAttempt(status, plan), res)
	if !ok {
		return res
	}
	sandboxID := plan.SandboxID
	podIPs := status.IPs()
	if plan.CreateSandbox {
		if sandboxID, podIPs, ok = r.createSandbox(ctx, pod, sbCfg, handler, res); !ok {
			return res
		}
	}
	r.killPlanned(ctx, pod, status, plan, podIPs, res)
	res.Errs = append(res.Errs, r.removeDead(ctx, status, plan.ContainersToRemove)...)
	for name, exitedAt := range plan.Restarts {
		backoff.Restart.Next(BackOffKey(pod, name), exitedAt)
	}
	// The kubelet's getImageVolumes: after the sandbox's config, before
	// the first container.
	vols := r.ensureImageVolumes(ctx, pod, plan.ImageVolumes, sbCfg, backoff, now, res)
	start := func(c *v1.Container, typ ContainerType) {
		r.startContainer(ctx, pod, c, typ, status, sandboxID, sbCfg, podIPs, vols, backoff, now, res)
	}
	for _, i := range plan.EphemeralToStart {
		start((*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon), ContainerTypeEphemeral)
	}
	for _, i := range plan.SidecarsToStart {
		start(&pod.Spec.InitContainers[i], ContainerTypeInit)
	}
	// The in-place resize (resize.go), the kubelet's step 7: after the init
	// containers, before the regular containers start, so that one
	// restarted for its resizePolicy starts in the resized pod cgroup.
	if len(plan.ContainersToUpdate) > 0 || plan.UpdatePodResources || plan.UpdatePodLevelResources {
		if err := r.resizePod(ctx, pod, plan); err != nil {
			res.ResizeErr = err
			res.Errs = append(res.Errs, fmt.Errorf("resizing pod %s in place: %w", RefOf(pod), err))
		}
	}
	if plan.NextInit >= 0 {
		start(&pod.Spec.InitContainers[plan.NextInit], ContainerTypeInit)
		return res
	}
	// Containers start in order, as the kubelet does, so that a failure of
	// one does not hold back the others.
	for _, i := range plan.ContainersToStart {
		start(&pod.Spec.Containers[i], ContainerTypeRegular)
	}
	return res
}

// killPodForPlan kills the whole pod (plan.KillPod) and, when a new sandbox
// replaces the old one, purges its init containers so the new sandbox runs
// the init sequence from the first (the kubelet's purgeInitContainers). It
// reports false when the kill failed: the sync stops there.
func (r *Runtime) killPodForPlan(ctx context.Context, pod *v1.Pod, status *PodStatus, plan PodActions, res *SyncResult) bool {
	if plan.CreateSandbox {
		// The only place this event is recorded (kuberuntime's SyncPod):
		// a plan that kills the pod to create a sandbox replaces one.
		r.event(pod, v1.EventTypeNormal, "SandboxChanged", "Pod sandbox changed, it will be killed and re-created.")
	}
	if err := r.KillPod(ctx, pod, status, gracePeriod(pod, nil)); err != nil {
		res.Errs = append(res.Errs, err)
		return false
	}
	if plan.CreateSandbox {
		res.Errs = append(res.Errs, r.purgeInitContainers(ctx, pod, status)...)
	}
	return true
}

// sandboxAttempt is the attempt of the sandbox the pod runs in: the plan's
// for a new one, else the running sandbox's own.
func sandboxAttempt(status *PodStatus, plan PodActions) uint32 {
	attempt := plan.Attempt
	if !plan.CreateSandbox {
		for _, sb := range status.Sandboxes {
			if sb.ID == plan.SandboxID {
				attempt = sb.Attempt
			}
		}
	}
	return attempt
}

// podSandboxConfig is the sandbox's config and runtime handler, in the
// kubelet's order (generatePodSandboxConfig): the DNS config first (its
// MissingClusterDNS warning is reported even when the pod is then
// refused), the hostname, then the RuntimeClass's handler and the user
// namespace (NamespacesForPod). An unknown RuntimeClass or a user
// namespace the runtime cannot give fails the sandbox
// (FailedCreatePodSandBox, in the kubelet's words: the error is not
// wrapped) and nothing runs: all of this comes before anything of the pod
// is created. The handler is looked up only when it matters: a running
// sandbox keeps the one it was made with. It reports false, with
// res.SandboxErr set, when the sync stops.
func (r *Runtime) podSandboxConfig(ctx context.Context, pod *v1.Pod, plan PodActions, attempt uint32, res *SyncResult) (*runtimeapi.PodSandboxConfig, string, bool) {
	sbCfg, warn, err := r.sandboxConfig(pod, attempt, nil)
	res.DNSWarning = warn
	if err != nil {
		res.SandboxErr = err
		return nil, "", false
	}
	handler := ""
	if plan.CreateSandbox {
		h, err := r.runtimeHandler(pod)
		if err != nil {
			res.SandboxErr = err
			return nil, "", false
		}
		handler = h
	}
	userns, err := r.userNamespace(ctx, pod, handler, plan.CreateSandbox)
	if err != nil {
		res.SandboxErr = err
		return nil, "", false
	}
	sbCfg.Linux = r.sandboxLinuxConfig(pod, userns)
	return sbCfg, handler, true
}

// createSandbox makes the pod's log directory and runs its new sandbox,
// returning the sandbox's ID and IPs (for the containers' environment,
// status.podIP, as the kubelet reads them right after creating it). It
// reports false, with res.SandboxErr set, when the sync stops.
func (r *Runtime) createSandbox(ctx context.Context, pod *v1.Pod, sbCfg *runtimeapi.PodSandboxConfig, handler string, res *SyncResult) (string, []string, bool) {
	if err := os.MkdirAll(sbCfg.LogDirectory, 0o755); err != nil {
		res.SandboxErr = fmt.Errorf("creating log directory of pod %s: %w", RefOf(pod), err)
		return "", nil, false
	}
	id, err := r.runPodSandbox(ctx, sbCfg, handler)
	if err != nil {
		// The runtime's error as it is: the event says "Failed to
		// create pod sandbox: <it>", as the kubelet's.
		res.SandboxErr = runtimeWords(err)
		return "", nil, false
	}
	var podIPs []string
	if st, err := r.rs.PodSandboxStatus(ctx, id, false); err == nil {
		if n := st.GetStatus().GetNetwork(); n != nil && n.Ip != "" {
			podIPs = append(podIPs, n.Ip)
			for _, ip := range n.AdditionalIps {
				podIPs = append(podIPs, ip.Ip)
			}
		}
	} else {
		res.Errs = append(res.Errs, fmt.Errorf("status of new sandbox %s of pod %s: %w", id, RefOf(pod), err))
	}
	return id, podIPs, true
}

// killPlanned stops the plan's ContainersToKill: one by one, except those
// that end the pod (its sidecars once its containers finished), which stop
// as the kubelet's KillPod stops them: at once, in the termination order.
func (r *Runtime) killPlanned(ctx context.Context, pod *v1.Pod, status *PodStatus, plan PodActions, podIPs []string, res *SyncResult) {
	var together []stopRequest
	for id, k := range plan.ContainersToKill {
		c := ContainerStatus{ID: id, Name: k.Name, Type: k.Type}
		for _, s := range status.Containers {
			if s.ID == id {
				c.State = s.State
			}
		}
		if k.PodEnds {
			together = append(together, stopRequest{c: c, grace: k.Grace, message: k.Message, why: k.Reason})
			continue
		}
		if err := r.stopContainer(ctx, pod, containerSpec(pod, k.Name, k.Type), id, c.State == StateRunning, podIPs, k.Grace, k.Message, nil); err != nil {
			res.Errs = append(res.Errs, fmt.Errorf("stopping container %q (%s) of pod %s (%s): %w", k.Name, id, RefOf(pod), k.Reason, err))
		}
	}
	if len(together) > 0 {
		if err := r.stopContainers(ctx, pod, RefOf(pod), together, podIPs); err != nil {
			res.Errs = append(res.Errs, err)
		}
	}
}

// nextAttempt is the attempt (and restart count) of the container's next
// instance: one more than the runtime's newest; when the runtime knows none,
// the pod's logs may (after a reboot or a purge of its containers), and the
// count goes on from them, as the kubelet's startContainer does.
func nextAttempt(ctx context.Context, ref PodRef, name string, typ ContainerType, status *PodStatus, sbCfg *runtimeapi.PodSandboxConfig) uint32 {
	if prev := status.Latest(name, typ); prev != nil {
		return prev.Attempt + 1
	}
	dir := sbCfg.GetLogDirectory()
	if dir == "" {
		return 0
	}
	n, err := AttemptFromLogDir(filepath.Join(dir, name))
	if err != nil {
		log.G(ctx).WithField("pod", ref).WithField("container", name).WithError(err).
			Info("Cannot calculate the restart count from the log directory; starting at 0")
	}
	return n
}

// It stays one function, as the kubelet's startContainer: image volumes,
// image, config, create, start and the postStart hook are the steps of one
// attempt, each failure recorded with its reason on the way. vols are the
// sync's image volumes (ensureImageVolumes).
func (r *Runtime) startContainer(ctx context.Context, pod *v1.Pod, c *v1.Container, typ ContainerType,
	status *PodStatus, sandboxID string, sbCfg *runtimeapi.PodSandboxConfig, podIPs []string,
	vols map[string]imageVolumePull, backoff *BackOffs, now time.Time, res *SyncResult) {
	ref := RefOf(pod)
	key := BackOffKey(pod, c.Name)
	attempt := nextAttempt(ctx, ref, c.Name, typ, status, sbCfg)
	// The kubelet fails late here (toKubeContainerImageVolumes, before the
	// container's own image): a container is not created without the
	// image volumes it mounts, and waits with their pull's reason.
	imageVolumes, err := containerImageVolumes(c, vols)
	if err != nil {
		var ie *ImageError
		if errors.As(err, &ie) {
			res.Waiting[c.Name] = Waiting{Reason: ie.Reason, Message: ie.Error()}
		}
		res.Errs = append(res.Errs, fmt.Errorf("container %q of pod %s: %w", c.Name, ref, err))
		return
	}
	imageRef, pulled, err := r.ensureImage(ctx, pod, c, sbCfg)
	if pulled != nil {
		res.Pulls = append(res.Pulls, *pulled)
	}
	if err != nil {
		var ie *ImageError
		if errors.As(err, &ie) {
			if ie.Reason == ReasonErrImagePull {
				backoff.pullFailed(key, now, ie.Reason+": "+ie.Error())
			}
			res.Waiting[c.Name] = Waiting{Reason: ie.Reason, Message: ie.Error()}
		}
		res.Errs = append(res.Errs, fmt.Errorf("image for container %q of pod %s: %w", c.Name, ref, err))
		return
	}
	backoff.pullSucceeded(key)

	var opts *RunContainerOptions
	if r.helper != nil {
		opts, err = r.helper.GenerateRunContainerOptions(ctx, pod, c, podIPs, imageVolumes)
		if err != nil {
			res.Waiting[c.Name] = Waiting{Reason: ReasonCreateConfigError, Message: err.Error()}
			res.Errs = append(res.Errs, fmt.Errorf("options of container %q of pod %s: %w", c.Name, ref, err))
			return
		}
	}
	if opts == nil {
		opts = &RunContainerOptions{}
	}
	if err := r.applyRecursiveReadOnly(ctx, pod, c, opts.Mounts); err != nil {
		res.Waiting[c.Name] = Waiting{Reason: ReasonCreateConfigError, Message: err.Error()}
		res.Errs = append(res.Errs, fmt.Errorf("options of container %q of pod %s: %w", c.Name, ref, err))
		return
	}
	r.applySELinuxRelabel(opts.Mounts)
	opts.MemoryCapacity = r.cfg.MemoryCapacity
	opts.Swap = r.cfg.Swap
	opts.OOMKillGroup = r.cfg.OOMKillGroup
	opts.SeccompProfileRoot = r.cfg.SeccompProfileRoot
	opts.Node = r.cfg.Node
	opts.UserNamespace = sbCfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions()
	if needsImageUser(pod, c) {
		// runAsNonRoot without runAsUser: the image's user decides, as the
		// kubelet reads it (getImageUser); unreadable, the start fails and
		// is retried rather than run unchecked.
		if opts.ImageUser, err = r.imageUser(ctx, c.Image); err != nil {
			res.Waiting[c.Name] = Waiting{Reason: ReasonCreateConfigError, Message: err.Error()}
			res.Errs = append(res.Errs, fmt.Errorf("image user of container %q of pod %s: %w", c.Name, ref, err))
			return
		}
	}
	cfg, err := ContainerConfig(pod, c, typ, attempt, imageRef, opts)
	if err != nil {
		res.Waiting[c.Name] = Waiting{Reason: ReasonCreateConfigError, Message: err.Error()}
		res.Errs = append(res.Errs, fmt.Errorf("config of container %q of pod %s: %w", c.Name, ref, err))
		return
	}
	if typ == ContainerTypeEphemeral {
		if err := targetNamespace(pod, c.Name, status, cfg); err != nil {
			res.Waiting[c.Name] = Waiting{Reason: ReasonCreateConfigError, Message: err.Error()}
			res.Errs = append(res.Errs, fmt.Errorf("config of container %q of pod %s: %w", c.Name, ref, err))
			return
		}
	}
	if err := os.MkdirAll(sbCfg.LogDirectory+"/"+c.Name, 0o755); err != nil {
		res.Waiting[c.Name] = Waiting{Reason: ReasonCreateContainerErr, Message: err.Error()}
		res.Errs = append(res.Errs, err)
		return
	}
	id, err := r.rs.CreateContainer(ctx, sandboxID, cfg, sbCfg)
	if err != nil {
		// The kubelet's message: the runtime's gRPC status message (a
		// missing seccomp profile: containerd's "failed to generate
		// seccomp spec opts: ...").
		res.Waiting[c.Name] = Waiting{Reason: ReasonCreateContainerErr, Message: runtimeMessage(err)}
		res.Errs = append(res.Errs, fmt.Errorf("creating container %q of pod %s: %w", c.Name, ref, err))
		return
	}
	r.containerEvent(pod, c, v1.EventTypeNormal, "Created", "Created container: "+c.Name)
	if err := r.rs.StartContainer(ctx, id); err != nil {
		res.Waiting[c.Name] = Waiting{Reason: ReasonRunContainerError, Message: runtimeMessage(err)}
		res.Errs = append(res.Errs, fmt.Errorf("starting container %q of pod %s: %w", c.Name, ref, err))
		return
	}
	r.containerEvent(pod, c, v1.EventTypeNormal, "Started", "Started container "+c.Name)
	r.linkContainerLog(ctx, sbCfg, cfg, id)
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		if msg, err := r.runHook(ctx, pod, c, id, podIPs, c.Lifecycle.PostStart); err != nil {
			r.containerEvent(pod, c, v1.EventTypeWarning, "FailedPostStartHook", msg)
			if kerr := r.stopContainer(ctx, pod, c, id, true, podIPs, gracePeriod(pod, nil), "FailedPostStartHook", nil); kerr != nil {
				res.Errs = append(res.Errs, fmt.Errorf("killing container %q of pod %s after its postStart hook failed: %w", c.Name, ref, kerr))
			}
			res.Waiting[c.Name] = Waiting{Reason: ReasonPostStartHookError, Message: msg}
			res.Errs = append(res.Errs, fmt.Errorf("postStart hook of container %q of pod %s: %w", c.Name, ref, err))
			return
		}
	}
	res.Started = append(res.Started, c.Name)
}

// reasonStartError is containerd's reason for a container whose
// StartContainer failed.
const reasonStartError = "StartError"

// RemoveInterrupted removes the containers of status that were made before
// this Runtime and never started: an agent killed between CreateContainer
// and StartContainer, or during StartContainer, leaves them.
// Planning from them would replace each with a new instance (the
// kubelet's ShouldContainerBeRestarted), which counts as a restart and
// keeps the never-run one as the "previous" instance; removed first, the
// same attempt is created again and started as if nothing happened. It
// reports whether anything was removed (the caller reads the status
// again).
func (r *Runtime) RemoveInterrupted(ctx context.Context, status *PodStatus) (bool, error) {
	removed := false
	for _, c := range status.Containers {
		if c.CreatedAt.IsZero() || !c.CreatedAt.Before(r.started) {
			continue
		}
		// Created and never started; or exited without ever starting
		// because its start failed: containerd fails a StartContainer whose
		// caller went away (reason StartError, exit code 128, no start
		// time), which is what killing the agent during that call does.
		interrupted := c.State == StateCreated ||
			(c.State == StateExited && c.StartedAt.IsZero() && c.Reason == reasonStartError)
		if !interrupted {
			continue
		}
		if err := r.removeContainer(ctx, c.ID, r.containerLogSymlink(status.Ref, c.Name, c.ID)); err != nil {
			return removed, fmt.Errorf("removing container %q (%s) of pod %s, created but never started by a previous agent: %w", c.Name, c.ID, status.Ref, err)
		}
		if c.LogPath != "" {
			_ = os.Remove(c.LogPath)
		}
		removed = true
	}
	return removed, nil
}

// removeContainer removes a container and, first, its log link (link, ""
// for none: logsymlink.go), as the kubelet's removeContainer: a link that
// cannot be removed keeps the container, so that the removal is tried
// again and no link outlives its container. Not found is done. A container
// whose removal containerd refuses because it still holds a task
// (FailedPrecondition: "cannot delete running task", a task its CRI plugin
// lost track of after an interrupted start) has that task killed and
// deleted through Config.DeleteTask, then is removed again.
func (r *Runtime) removeContainer(ctx context.Context, id, link string) error {
	if err := unlinkContainerLog(id, link); err != nil {
		return err
	}
	err := r.rs.RemoveContainer(ctx, id)
	if err == nil || isNotFound(err) {
		return nil
	}
	if r.cfg.DeleteTask == nil || grpcstatus.Code(err) != codes.FailedPrecondition {
		return err
	}
	if derr := r.cfg.DeleteTask(ctx, id); derr != nil {
		return errors.Join(err, derr)
	}
	if err := r.rs.RemoveContainer(ctx, id); err != nil && !isNotFound(err) {
		return err
	}
	return nil
}

// purgeInitContainers removes every instance of the pod's init
// containers (plain and sidecars) with their log files, once KillPod
// stopped them, before a new sandbox replaces the old one (the kubelet's
// purgeInitContainers). Left in place, the old instances would tell the
// next plan that the init sequence ran: ComputePodActions reads the init
// containers from the last back, and a node reboot leaves them all
// exited. Regular containers keep their dead instances (restart counts,
// previous logs).
func (r *Runtime) purgeInitContainers(ctx context.Context, pod *v1.Pod, status *PodStatus) []error {
	var ids []string
	for _, c := range status.Containers {
		if c.Type == ContainerTypeInit && containerSpec(pod, c.Name, ContainerTypeInit) != nil {
			ids = append(ids, c.ID)
		}
	}
	return r.removeDead(ctx, status, ids)
}

// removeDead removes the dead container instances ids of status (the
// plan's ContainersToRemove) with their log files (gc.go's rule).
func (r *Runtime) removeDead(ctx context.Context, status *PodStatus, ids []string) []error {
	var errs []error
	for _, id := range ids {
		for _, c := range status.Containers {
			if c.ID != id {
				continue
			}
			if err := r.removeDeadContainer(ctx, c.ID, c.LogPath, r.containerLogSymlink(status.Ref, c.Name, c.ID)); err != nil {
				errs = append(errs, fmt.Errorf("removing dead container %q (%s) of pod %s: %w", c.Name, c.ID, status.Ref, err))
			}
		}
	}
	return errs
}

// containerSpec returns the spec of the named container of pod, or nil.
func containerSpec(pod *v1.Pod, name string, typ ContainerType) *v1.Container {
	if pod == nil {
		return nil
	}
	if typ == ContainerTypeEphemeral {
		for i := range pod.Spec.EphemeralContainers {
			if pod.Spec.EphemeralContainers[i].Name == name {
				return (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
			}
		}
		return nil
	}
	list := pod.Spec.Containers
	if typ == ContainerTypeInit {
		list = pod.Spec.InitContainers
	}
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

// targetNamespace makes an ephemeral container with a target container
// share that container's process namespace (kubectl debug --target), as
// the kubelet does; the target must be running.
func targetNamespace(pod *v1.Pod, name string, status *PodStatus, cfg *runtimeapi.ContainerConfig) error {
	var target string
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			target = pod.Spec.EphemeralContainers[i].TargetContainerName
		}
	}
	if target == "" {
		return nil
	}
	c := status.Latest(target, ContainerTypeRegular)
	if c == nil {
		c = status.Latest(target, ContainerTypeInit)
	}
	if c == nil || c.State != StateRunning {
		return fmt.Errorf("target container %q of ephemeral container %q is not running", target, name)
	}
	ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if ns == nil {
		return fmt.Errorf("ephemeral container %q has no namespace options", name)
	}
	ns.Pid = runtimeapi.NamespaceMode_TARGET
	ns.TargetId = c.ID
	return nil
}

// gracePeriod is the grace the kubelet gives a pod's containers when it
// stops them: the override if given, else the deletion grace period, else
// the spec's (which the API server defaults to 30 s), never below
// minGracePeriod.
func gracePeriod(pod *v1.Pod, override *int64) int64 {
	g := minGracePeriod
	switch {
	case override != nil:
		g = *override
	case pod.DeletionGracePeriodSeconds != nil:
		g = *pod.DeletionGracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		g = *pod.Spec.TerminationGracePeriodSeconds
	}
	if g < minGracePeriod {
		g = minGracePeriod
	}
	return g
}

// KillPod stops every running container of the pod, each with its preStop
// hook then StopContainer within grace seconds, then stops its sandboxes.
// As the kubelet's killContainersWithSyncResult, every container is
// stopped at once (all preStop hooks start together); a pod's sidecars
// get their SIGTERM only after its regular containers and later sidecars
// stopped, within what is left of their grace period (termOrder), and
// never less than minGracePeriod before SIGKILL. pod may be nil (a pod
// only the runtime knows): no hooks run and nothing is ordered then. It
// removes nothing: logs and exit codes stay readable until RemovePod.
func (r *Runtime) KillPod(ctx context.Context, pod *v1.Pod, status *PodStatus, grace int64) error {
	var reqs []stopRequest
	for _, c := range status.Containers {
		if c.State != StateRunning && c.State != StateCreated && c.State != StateUnknown {
			continue
		}
		reqs = append(reqs, stopRequest{c: c, grace: grace})
	}
	if err := r.stopContainers(ctx, pod, status.Ref, reqs, status.IPs()); err != nil {
		return err
	}
	var errs []error
	for _, sb := range status.Sandboxes {
		if err := r.rs.StopPodSandbox(ctx, sb.ID); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("stopping sandbox %s of pod %s: %w", sb.ID, status.Ref, err))
		}
	}
	return errors.Join(errs...)
}

// RemovePod removes every container and sandbox of a killed pod and its log
// directory. The pod must have been killed first.
func (r *Runtime) RemovePod(ctx context.Context, status *PodStatus) error {
	var errs []error
	for _, c := range status.Containers {
		if err := r.removeContainer(ctx, c.ID, r.containerLogSymlink(status.Ref, c.Name, c.ID)); err != nil {
			errs = append(errs, fmt.Errorf("removing container %q (%s) of pod %s: %w", c.Name, c.ID, status.Ref, err))
		}
	}
	for _, sb := range status.Sandboxes {
		if err := r.rs.RemovePodSandbox(ctx, sb.ID); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("removing sandbox %s of pod %s: %w", sb.ID, status.Ref, err))
		}
	}
	if len(errs) == 0 {
		if err := os.RemoveAll(r.PodLogDir(status.Ref)); err != nil {
			errs = append(errs, fmt.Errorf("removing log directory of pod %s: %w", status.Ref, err))
		}
	}
	return errors.Join(errs...)
}

// runtimeWords is err worded as the runtime worded it (the gRPC status,
// "rpc error: code = ... desc = ..."), without the call and object crivk's
// client puts in front, for the events that quote it as the kubelet does.
// It still wraps err: errors.Is and status codes work on it.
func runtimeWords(err error) error {
	var ce *callError
	if !errors.As(err, &ce) {
		return err
	}
	return &runtimeError{err: err, text: ce.err.Error()}
}

type runtimeError struct {
	err  error
	text string
}

func (e *runtimeError) Error() string { return e.text }
func (e *runtimeError) Unwrap() error { return e.err }

// runtimeMessage is what the kubelet reports of a failed CreateContainer
// or StartContainer (grpcstatus.FromError(err).Message()): the message of
// the runtime's gRPC status, else the error's text.
func runtimeMessage(err error) string {
	var gs interface{ GRPCStatus() *grpcstatus.Status }
	if errors.As(err, &gs) && gs.GRPCStatus() != nil {
		return gs.GRPCStatus().Message()
	}
	return err.Error()
}
