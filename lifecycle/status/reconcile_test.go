package status

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The node lifecycle controller's MarkPodsNotReady (a node not Ready)
// overwrites Ready in the API; Reconcile hands the status last delivered
// to Notify again, on the API's resourceVersion, so that it is written
// back, as the kubelet's needsReconcile does. An echo of an older delivery,
// or an API status that agrees, is left alone.
func TestStatusManagerReconcile(t *testing.T) {
	m, rec, _ := newTestStatusManager(t)
	startRun(t, m)
	pod := smPod("r1", v1.RestartPolicyAlways, "c")
	pod.ResourceVersion = "5"
	t0 := metav1.NewTime(smEpoch)
	st := smStatus(v1.PodRunning, csRunning("c"))
	st.Conditions = []v1.PodCondition{
		{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: t0},
		{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: t0},
	}
	m.SetPodStatus(pod, st)
	first := rec.nextFor(t, pod.UID)
	if c := podCondition(first.Status.Conditions, v1.PodReady); c == nil || c.Status != v1.ConditionTrue {
		t.Fatalf("first delivery's Ready %+v, want True", c)
	}

	api := func(rv string, ready v1.ConditionStatus, at time.Time) *v1.Pod {
		p := first.DeepCopy()
		p.ResourceVersion = rv
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == v1.PodReady {
				p.Status.Conditions[i].Status = ready
				p.Status.Conditions[i].LastTransitionTime = metav1.NewTime(at)
			}
		}
		return p
	}
	// The API agrees: nothing.
	if m.Reconcile(api("6", v1.ConditionTrue, smEpoch)) {
		t.Error("Reconcile of an API status that agrees reported a write")
	}
	// An older delivery's echo (Ready False before the delivered True).
	if m.Reconcile(api("6", v1.ConditionFalse, smEpoch.Add(-time.Minute))) {
		t.Error("Reconcile of an older delivery's echo reported a write")
	}
	rec.expectNone(t)

	// The controller marks the pod not Ready later: written back.
	if !m.Reconcile(api("9", v1.ConditionFalse, smEpoch.Add(time.Minute))) {
		t.Fatal("Reconcile did not write back a Ready the controller overwrote")
	}
	again := rec.nextFor(t, pod.UID)
	if again.ResourceVersion != "9" {
		t.Errorf("re-delivered on resourceVersion %q, want the API's 9", again.ResourceVersion)
	}
	if c := podCondition(again.Status.Conditions, v1.PodReady); c == nil || c.Status != v1.ConditionTrue || !c.LastTransitionTime.Equal(&t0) {
		t.Errorf("re-delivered Ready %+v, want the delivered True of %s", c, t0)
	}
	// Once written back, the same status is not delivered again.
	m.SetPodStatus(pod, st)
	m.mu.Lock()
	m.dirty[pod.UID] = struct{}{}
	m.kick()
	m.mu.Unlock()
	if err := m.WaitDelivered(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	rec.expectNone(t)

	// A pod not cached is left alone.
	if m.Reconcile(smPod("other", v1.RestartPolicyAlways, "c")) {
		t.Error("Reconcile of a pod not cached reported a write")
	}
}

func podCondition(cs []v1.PodCondition, t v1.PodConditionType) *v1.PodCondition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}
