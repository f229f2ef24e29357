package lifecycle

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestWorkerTransitions(t *testing.T) {
	all := []WorkerState{WorkerSyncing, WorkerFinished, WorkerTerminating, WorkerTerminated}
	allowed := map[[2]WorkerState]bool{
		{WorkerSyncing, WorkerFinished}:       true,
		{WorkerSyncing, WorkerTerminating}:    true,
		{WorkerFinished, WorkerTerminating}:   true,
		{WorkerTerminating, WorkerTerminated}: true,
	}
	for _, from := range all {
		for _, to := range all {
			t.Run(from.String()+"->"+to.String(), func(t *testing.T) {
				if got := canTransition(from, to); got != allowed[[2]WorkerState{from, to}] {
					t.Errorf("canTransition = %v", got)
				}
			})
		}
	}
	if WorkerState(9).String() != "WorkerState(9)" {
		t.Errorf("unknown state prints %q", WorkerState(9).String())
	}
}

func deletingPod(pod *v1.Pod, grace int64) *v1.Pod {
	p := pod.DeepCopy()
	p.DeletionGracePeriodSeconds = ptr.To(grace)
	return p
}

// A kill with a shorter grace period cancels the attempt in flight and starts
// again with it; a longer one does not.
func TestEngineKillGraceShortening(t *testing.T) {
	f := newEngineFixture(t)
	pod := enginePod("uid-1", "slow", v1.RestartPolicyAlways)
	f.startRunning(t, pod)
	f.rt.mu.Lock()
	f.rt.blockKillAbove = 10 // containers ignore SIGTERM: a long grace runs out its time
	f.rt.mu.Unlock()

	f.e.Kill(deletingPod(pod, 30))
	waitFor(t, "the first KillPod", func() bool { return f.rt.count("uid-1", "KillPod") == 1 })
	f.e.Kill(deletingPod(pod, 60)) // longer: ignored
	f.e.Kill(deletingPod(pod, 5))  // shorter: restarts
	waitFor(t, "the pod to be terminated", func() bool { return f.rt.count("uid-1", "OnTerminated") == 1 })

	var graces []int64
	for _, e := range f.rt.ops("uid-1", "KillPod") {
		graces = append(graces, e.grace)
	}
	if !reflect.DeepEqual(graces, []int64{30, 5}) {
		t.Errorf("KillPod grace periods %v, want [30 5]", graces)
	}
	if f.e.Pod("uid-1") != nil {
		t.Error("the terminated pod's worker is still known")
	}
}

// A pod killed while it is Finished goes on to Terminated.
func TestEngineKillFinishedPod(t *testing.T) {
	f := newEngineFixture(t)
	pod := enginePod("uid-1", "job", v1.RestartPolicyNever)
	f.startRunning(t, pod)
	f.rt.exit("uid-1", 0)
	f.tick(t, 1, syncInterval)
	waitFor(t, "Succeeded", func() bool { return f.rt.lastPhase("uid-1") == v1.PodSucceeded })
	f.e.Kill(deletingPod(pod, 3))
	waitFor(t, "the pod to be terminated", func() bool { return f.rt.count("uid-1", "OnTerminated") == 1 })
	if got := f.rt.ops("uid-1", "OnTerminated")[0].phase; got != v1.PodSucceeded {
		t.Errorf("terminated with phase %s, want Succeeded kept", got)
	}
}
