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
// eviction's grace period before any status says Failed; then it is
// published Failed, reason Evicted, with the message and the
// DisruptionTarget condition, its Evicted event recorded, and it stays (it
// is not deleted).
func TestEngineEvict(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	f := newEngineFixture(t, func(c *Config) { c.Recorder = rec })
	pod := enginePod("uid-1", "hog", v1.RestartPolicyAlways)
	f.startRunning(t, pod)
	if got := f.e.ActivePods(); len(got) != 1 || got[0].UID != "uid-1" {
		t.Fatalf("active pods %v, want the running one", got)
	}
	const msg = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
	done := make(chan error, 1)
	go func() {
		done <- f.e.Evict(context.Background(), pod, Eviction{Message: msg, GracePeriod: 1, DisruptionTarget: true,
			EventAnnotations: map[string]string{"starved_resource": "memory"}})
	}()
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
	f.eventually(t, "the evicted status", func() bool { return f.lastPhase("uid-1") == v1.PodFailed })

	killed := false
	for _, e := range f.rt.ops("uid-1", "KillPod", "notify", "OnTerminated") {
		switch {
		case e.op == "KillPod":
			killed = true
			if e.grace != 1 {
				t.Errorf("KillPod grace %d, want the eviction's 1", e.grace)
			}
		case e.op == "notify" && e.phase == v1.PodFailed && !killed:
			t.Errorf("published Failed before the containers were stopped")
		case e.op == "OnTerminated":
			t.Errorf("an evicted pod is not deleted, yet OnTerminated was called")
		}
	}
	got := f.lastPublished("uid-1")
	if got.Status.Reason != "Evicted" || got.Status.Message != msg {
		t.Errorf("status %s %q %q, want Failed Evicted %q", got.Status.Phase, got.Status.Reason, got.Status.Message, msg)
	}
	var dt *v1.PodCondition
	for i := range got.Status.Conditions {
		if got.Status.Conditions[i].Type == v1.DisruptionTarget {
			dt = &got.Status.Conditions[i]
		}
	}
	if dt == nil || dt.Status != v1.ConditionTrue || dt.Reason != "TerminationByKubelet" || dt.Message != msg || dt.LastTransitionTime.IsZero() {
		t.Errorf("DisruptionTarget %+v, want True TerminationByKubelet with the message", dt)
	}
	select {
	case ev := <-rec.Events:
		if !strings.HasPrefix(ev, "Warning Evicted "+msg) {
			t.Errorf("event %q, want the Warning Evicted with the message", ev)
		}
	default:
		t.Error("no Evicted event")
	}
	if f.e.Pod("uid-1") == nil {
		t.Error("the evicted pod was forgotten; it stays until deleted")
	}
	if got := f.e.ActivePods(); len(got) != 0 {
		t.Errorf("active pods %v, want none after the eviction", got)
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
