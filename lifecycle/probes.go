package lifecycle

import (
	"context"
	"fmt"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/lifecycle/prober"
	"github.com/crivk/crivk/podutil"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ProbeRuntime is what probes need of the runtime (*cri.Runtime): exec
// probes run through ExecSync; a container that failed its liveness or
// startup probe is stopped with KillContainer (Killing event, preStop hook,
// then stop), then restarted by the next sync as any exited container
// (restart policy, back-off, restartCount).
type ProbeRuntime interface {
	prober.Execer
	KillContainer(ctx context.Context, pod *v1.Pod, c *v1.Container, containerID string, podIPs []string, grace int64, message string) error
}

var _ ProbeRuntime = (*cri.Runtime)(nil)

// probeResults is what status generation needs of the prober.
type probeResults interface {
	Result(t prober.ProbeType, containerID string) (prober.Result, bool)
}

// probeManager is what the engine needs of the prober (*prober.Manager).
type probeManager interface {
	probeResults
	AddPod(pod *v1.Pod)
	RemovePod(uid types.UID)
	StopLivenessAndStartup(uid types.UID)
}

var _ probeManager = (*prober.Manager)(nil)

// startProber makes the probe manager when the engine was given a probe
// runtime; without one nothing is probed.
func (e *Engine) startProber(ctx context.Context) error {
	if e.cfg.ProbeRuntime == nil {
		return nil
	}
	m, err := prober.NewManager(ctx, prober.Config{
		Exec:     e.cfg.ProbeRuntime,
		Status:   e.status.GetPodStatus,
		OnChange: e.onProbeResult,
		Recorder: e.cfg.Recorder,
		Metrics:  e.cfg.ProbeMetrics,
		Clock:    e.cfg.Clock,
	})
	if err != nil {
		return err
	}
	e.probes = m
	return nil
}

// probeResultsOrNil returns the prober as status generation sees it (nil
// interface when there is none).
func (e *Engine) probeResultsOrNil() probeResults {
	if e.probes == nil {
		return nil
	}
	return e.probes
}

// addProbes starts the workers of the pod's probes (idempotent).
func (e *Engine) addProbes(pod *v1.Pod) {
	if e.probes != nil {
		e.probes.AddPod(pod)
	}
}

// removeProbes stops the pod's probe workers (terminated or forgotten).
func (e *Engine) removeProbes(uid types.UID) {
	if e.probes != nil {
		e.probes.RemovePod(uid)
	}
}

// stopLivenessAndStartup stops the probes that could restart a container
// of a terminating pod; readiness goes on until the pod is terminated.
func (e *Engine) stopLivenessAndStartup(uid types.UID) {
	if e.probes != nil {
		e.probes.StopLivenessAndStartup(uid)
	}
}

// onProbeResult takes a probe result change to the pod status at once: a
// readiness or startup change republishes the status from the cached
// runtime state (also while the pod is terminating); a liveness or startup failure syncs the pod, whose sync
// kills the container. The pod's worker is kicked in every case, so that a
// status published concurrently from older results is corrected.
func (e *Engine) onProbeResult(u prober.Update) {
	if !(u.Result == prober.Failure && (u.Type == prober.Liveness || u.Type == prober.Startup)) {
		e.republish(u.PodUID)
	}
	e.Kick(u.PodUID)
}

// republish generates and publishes the pod's status from the cache.
func (e *Engine) republish(uid types.UID) {
	pod := e.desiredPod(uid)
	if pod == nil || e.workers.IsPodFinished(uid) {
		return
	}
	cur, ok := e.status.GetPodStatus(uid)
	if !ok || isTerminalPhase(cur.Phase) {
		return
	}
	if _, ok := e.cache.Modified(uid); !ok {
		// Nothing read of the pod yet (or the read failed): the kick
		// syncs it.
		return
	}
	st, err := e.cache.Get(uid)
	if err != nil {
		return
	}
	if e.cfg.APIPod != nil {
		if api := e.cfg.APIPod(pod.Namespace, pod.Name); api != nil && api.UID == pod.UID {
			p := pod.DeepCopy()
			p.Status = *api.Status.DeepCopy()
			pod = p
		}
	}
	// A terminating pod is still probed for readiness; generate as its
	// terminating sync does.
	e.status.SetPodStatus(pod, e.generate(pod, st, e.workers.IsPodTerminationRequested(uid) && pod.DeletionTimestamp != nil))
}

// killUnhealthy stops the running containers (sidecars included, which
// are always restarted) whose liveness or startup
// probe failed, with the probe's terminationGracePeriodSeconds when it has
// one, and reports whether it stopped any (the caller reads the runtime
// again and plans their restart as for any exited container).
func (e *Engine) killUnhealthy(ctx context.Context, pod *v1.Pod, st *cri.PodStatus) (bool, error) {
	if e.probes == nil {
		return false, nil
	}
	killed := false
	var errs []error
	type probed struct {
		c   *v1.Container
		typ cri.ContainerType
	}
	var containers []probed
	for i := range pod.Spec.InitContainers {
		if podutil.IsSidecar(&pod.Spec.InitContainers[i]) {
			containers = append(containers, probed{&pod.Spec.InitContainers[i], cri.ContainerTypeInit})
		}
	}
	for i := range pod.Spec.Containers {
		containers = append(containers, probed{&pod.Spec.Containers[i], cri.ContainerTypeRegular})
	}
	for _, pc := range containers {
		c := pc.c
		latest := st.Latest(c.Name, pc.typ)
		if latest == nil || latest.State != cri.StateRunning {
			continue
		}
		var probe *v1.Probe
		var what string
		if r, ok := e.probes.Result(prober.Liveness, latest.ID); ok && r == prober.Failure && c.LivenessProbe != nil {
			probe, what = c.LivenessProbe, "liveness"
		} else if r, ok := e.probes.Result(prober.Startup, latest.ID); ok && r == prober.Failure && c.StartupProbe != nil {
			probe, what = c.StartupProbe, "startup"
		}
		if probe == nil {
			continue
		}
		msg := fmt.Sprintf("Container %s failed %s probe", c.Name, what)
		if pc.typ == cri.ContainerTypeInit || cri.ShouldRestart(pod.Spec.RestartPolicy, 137) {
			msg += ", will be restarted"
		}
		grace := cri.GracePeriod(pod, probe.TerminationGracePeriodSeconds)
		log.G(ctx).WithField("pod", pod.Namespace+"/"+pod.Name).WithField("uid", pod.UID).WithField("container", c.Name).
			WithField("grace", grace).Info(msg)
		if err := e.cfg.ProbeRuntime.KillContainer(ctx, pod, c, latest.ID, st.IPs(), grace, msg); err != nil {
			errs = append(errs, fmt.Errorf("pod %s: container %s failed its %s probe: %w", cri.RefOf(pod), c.Name, what, err))
			continue
		}
		killed = true
	}
	if len(errs) > 0 {
		return killed, errs[0]
	}
	return killed, nil
}

// containerRef is the object reference of a pod's container in events
// (kubectl describe shows its field path under "From").
func containerRef(pod *v1.Pod, name string) *v1.ObjectReference {
	return &v1.ObjectReference{
		Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion,
		FieldPath:       fmt.Sprintf("spec.containers{%s}", name),
	}
}

// startupPassed reports whether container id passed its startup probe (a
// plan input: a sidecar gates what follows it until then); true without
// probes.
func (e *Engine) startupPassed(id string) bool {
	if e.probes == nil {
		return true
	}
	r, ok := e.probes.Result(prober.Startup, id)
	return ok && r == prober.Success
}
