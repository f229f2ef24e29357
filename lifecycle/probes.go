package lifecycle

import (
	"context"
	"fmt"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/lifecycle/prober"
	"github.com/crivk/crivk/lifecycle/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ProbeRuntime is what probes need of the runtime (*cri.Runtime): exec
// probes run through ExecSync. A container that failed its liveness or
// startup probe is stopped and restarted by the pod's next sync: the
// verdict is a plan input (failedProbe), the plan kills it with the
// kubelet's Killing message and the probe's grace, then starts it again as
// any exited container (restart policy, back-off, restartCount).
type ProbeRuntime interface {
	prober.Execer
}

var _ ProbeRuntime = (*cri.Runtime)(nil)

// probeManager is what the engine needs of the prober (*prober.Manager).
type probeManager interface {
	status.ProbeResults
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
	e.sync.probes = m
	return nil
}

// probeResultsOrNil returns the prober as status generation sees it (nil
// interface when there is none).
func (s *syncer) probeResultsOrNil() status.ProbeResults {
	if s.probes == nil {
		return nil
	}
	return s.probes
}

// addProbes starts the workers of the pod's probes (idempotent).
func (s *syncer) addProbes(pod *v1.Pod) {
	if s.probes != nil {
		s.probes.AddPod(pod)
	}
}

// removeProbes stops the pod's probe workers (terminated or forgotten).
func (s *syncer) removeProbes(uid types.UID) {
	if s.probes != nil {
		s.probes.RemovePod(uid)
	}
}

// stopLivenessAndStartup stops the probes that could restart a container
// of a terminating pod; readiness goes on until the pod is terminated.
func (s *syncer) stopLivenessAndStartup(uid types.UID) {
	if s.probes != nil {
		s.probes.StopLivenessAndStartup(uid)
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
	pod := e.pods.pod(uid)
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
	pod = e.sync.withAPIStatus(pod)
	// A terminating pod is still probed for readiness; generate as its
	// terminating sync does.
	e.status.SetPodStatus(pod, e.sync.generate(pod, st, e.workers.IsPodTerminationRequested(uid) && pod.DeletionTimestamp != nil))
}

// failedProbe reports which probe (liveness or startup) the running
// container id failed, a plan input (cri.PlanInputs.Failed); the plan
// checks that the container has that probe.
func (s *syncer) failedProbe(id string) (string, bool) {
	if s.probes == nil {
		return "", false
	}
	if r, ok := s.probes.Result(prober.Liveness, id); ok && r == prober.Failure {
		return "liveness", true
	}
	if r, ok := s.probes.Result(prober.Startup, id); ok && r == prober.Failure {
		return "startup", true
	}
	return "", false
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
func (s *syncer) startupPassed(id string) bool {
	if s.probes == nil {
		return true
	}
	r, ok := s.probes.Result(prober.Startup, id)
	return ok && r == prober.Success
}
