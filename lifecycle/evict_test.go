package lifecycle

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/crivk/crivk/lifecycle/admission"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// TestEngineEvict: the evicted pod's containers are stopped with the
// eviction's grace period before any status is terminal; then it is
// published with the DisruptionTarget condition when asked, its event
// recorded, and it stays (it is not deleted). Its phase is the kubelet's
// (SyncTerminatingPod applies the status function to the status it caches
// before the kill; generateAPIPodStatus after the kill takes the phase
// from the stopped containers when terminal and keeps the reason and
// message only when that phase is the function's): containers killed
// (137): Failed with the eviction's reason and message; containers that
// exit 0 when stopped (pause on SIGTERM): Succeeded, no reason, no
// message, the DisruptionTarget condition kept. No other terminal phase
// is ever published on the way.
func TestEngineEvict(t *testing.T) {
	const msg = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
	evicted := Eviction{Message: msg, GracePeriod: 1, DisruptionTarget: true,
		EventAnnotations: map[string]string{"starved_resource": "memory"}}
	// As preempt.go evicts a victim of a critical pod.
	preempted := Eviction{Reason: ReasonPreempting, Message: msgPreempted, PodGracePeriod: true,
		DisruptionTarget: true, ConditionMessage: msgPreemptedCondition}
	// An ephemeral-storage limit's eviction has no DisruptionTarget.
	noCondition := Eviction{Message: "Pod ephemeral local storage usage exceeds the total limit of containers 1Mi. ", GracePeriod: 1}
	for name, tc := range map[string]struct {
		ev                      Eviction
		killExit                int32
		wantGrace               int64
		wantPhase               v1.PodPhase
		wantReason, wantMessage string
		// wantCondition is the DisruptionTarget's message; "": none.
		wantCondition string
	}{
		"evicted, containers killed: Failed, Evicted": {
			ev: evicted, killExit: 137, wantGrace: 1,
			wantPhase: v1.PodFailed, wantReason: "Evicted", wantMessage: msg, wantCondition: msg,
		},
		"evicted, containers exit 0: Succeeded, no reason": {
			ev: evicted, killExit: 0, wantGrace: 1,
			wantPhase: v1.PodSucceeded, wantCondition: msg,
		},
		"evicted, a container exits 143: Failed, Evicted": {
			ev: evicted, killExit: 143, wantGrace: 1,
			wantPhase: v1.PodFailed, wantReason: "Evicted", wantMessage: msg, wantCondition: msg,
		},
		"evicted without DisruptionTarget, containers exit 0: Succeeded, no condition": {
			ev: noCondition, killExit: 0, wantGrace: 1, wantPhase: v1.PodSucceeded,
		},
		"evicted without DisruptionTarget, containers killed: Failed, Evicted": {
			ev: noCondition, killExit: 137, wantGrace: 1,
			wantPhase: v1.PodFailed, wantReason: "Evicted", wantMessage: noCondition.Message,
		},
		"preempted, containers killed: Failed, Preempting": {
			ev: preempted, killExit: 137, wantGrace: 17,
			wantPhase: v1.PodFailed, wantReason: "Preempting", wantMessage: msgPreempted, wantCondition: msgPreemptedCondition,
		},
		"preempted, containers exit 0: Succeeded, no reason": {
			ev: preempted, killExit: 0, wantGrace: 17,
			wantPhase: v1.PodSucceeded, wantCondition: msgPreemptedCondition,
		},
	} {
		t.Run(name, func(t *testing.T) {
			rec := record.NewFakeRecorder(10)
			f := newEngineFixture(t, func(c *Config) { c.Recorder = rec })
			f.rt.killExit = tc.killExit
			pod := enginePod("uid-1", "hog", v1.RestartPolicyAlways)
			f.startRunning(t, pod)
			if got := f.e.ActivePods(); len(got) != 1 || got[0].UID != "uid-1" {
				t.Fatalf("active pods %v, want the running one", got)
			}
			done := make(chan error, 1)
			go func() { done <- f.e.Evict(context.Background(), pod, tc.ev) }()
			f.eventually(t, "Evict to return", func() bool {
				select {
				case err := <-done:
					if err != nil {
						t.Errorf("Evict: %v", err)
					}
					return true
				default:
					return false
				}
			})
			f.eventually(t, "the worker to finish", func() bool { return f.e.PodCleanedUp("uid-1") })
			f.eventually(t, "the final status", func() bool { return f.lastPhase("uid-1") == tc.wantPhase })

			killed := false
			for _, e := range f.rt.ops("uid-1", "KillPod", "notify", "OnTerminated") {
				terminal := e.phase == v1.PodFailed || e.phase == v1.PodSucceeded
				switch {
				case e.op == "KillPod":
					killed = true
					if e.grace != tc.wantGrace {
						t.Errorf("KillPod grace %d, want %d", e.grace, tc.wantGrace)
					}
				case e.op == "notify" && terminal && !killed:
					t.Errorf("published %s before the containers were stopped", e.phase)
				case e.op == "notify" && terminal && e.phase != tc.wantPhase:
					t.Errorf("published %s on the way to %s", e.phase, tc.wantPhase)
				case e.op == "OnTerminated":
					t.Errorf("an evicted pod is not deleted, yet OnTerminated was called")
				}
			}
			got := f.lastPublished("uid-1")
			if got.Status.Reason != tc.wantReason || got.Status.Message != tc.wantMessage {
				t.Errorf("status %s %q %q, want %s %q %q", got.Status.Phase, got.Status.Reason, got.Status.Message,
					tc.wantPhase, tc.wantReason, tc.wantMessage)
			}
			var dt *v1.PodCondition
			for i := range got.Status.Conditions {
				if got.Status.Conditions[i].Type == v1.DisruptionTarget {
					dt = &got.Status.Conditions[i]
				}
			}
			switch {
			case tc.wantCondition == "" && dt != nil:
				t.Errorf("DisruptionTarget %+v, want none", dt)
			case tc.wantCondition != "" && (dt == nil || dt.Status != v1.ConditionTrue || dt.Reason != "TerminationByKubelet" ||
				dt.Message != tc.wantCondition || dt.LastTransitionTime.IsZero()):
				t.Errorf("DisruptionTarget %+v, want True TerminationByKubelet %q", dt, tc.wantCondition)
			}
			for _, c := range got.Status.Conditions {
				if (c.Type == v1.PodReady || c.Type == v1.ContainersReady) && c.Status != v1.ConditionFalse {
					t.Errorf("%s %s in a terminal status", c.Type, c.Status)
				}
			}
			reason := tc.ev.Reason
			if reason == "" {
				reason = "Evicted"
			}
			select {
			case ev := <-rec.Events:
				if !strings.HasPrefix(ev, "Warning "+reason+" "+tc.ev.Message) {
					t.Errorf("event %q, want the Warning %s with the message", ev, reason)
				}
			default:
				t.Errorf("no %s event", reason)
			}
			if f.e.Pod("uid-1") == nil {
				t.Error("the evicted pod was forgotten; it stays until deleted")
			}
			if got := f.e.ActivePods(); len(got) != 0 {
				t.Errorf("active pods %v, want none after the eviction", got)
			}
		})
	}
}

func TestEngineEvictUnknown(t *testing.T) {
	f := newEngineFixture(t)
	err := f.e.Evict(context.Background(), enginePod("nope", "x", v1.RestartPolicyAlways), Eviction{Message: "m"})
	if !errors.Is(err, ErrPodUnknown) {
		t.Errorf("Evict of an unknown pod: %v, want ErrPodUnknown", err)
	}
}

type refuseAll struct{}

func (refuseAll) Admit(*v1.Pod) admission.Result {
	return admission.Result{Reason: "Evicted", Message: "The node had condition: [DiskPressure]. "}
}

// TestEnginePressureAdmission: the pressure check comes first and refuses
// the pod with its reason and the kubelet's "Pod was rejected: " message.
func TestEnginePressureAdmission(t *testing.T) {
	f := newEngineFixture(t, func(c *Config) { c.Pressure = refuseAll{} })
	pod := enginePod("uid-1", "web", v1.RestartPolicyAlways)
	f.e.UpdatePod(context.Background(), pod)
	f.eventually(t, "the rejection", func() bool { return f.lastPhase("uid-1") == v1.PodFailed })
	got := f.lastPublished("uid-1")
	if got.Status.Reason != "Evicted" || got.Status.Message != "Pod was rejected: The node had condition: [DiskPressure]. " {
		t.Errorf("status %q %q", got.Status.Reason, got.Status.Message)
	}
	if n := f.rt.count("uid-1", "SyncPod"); n != 0 {
		t.Errorf("a refused pod was synced %d times", n)
	}
}
