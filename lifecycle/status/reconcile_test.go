package status

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// The node lifecycle controller's MarkPodsNotReady (a node not Ready)
// overwrites Ready in the API; Reconcile hands the status last delivered
// to Notify again, on the API's resourceVersion (so that virtual-kubelet
// does not skip it as unchanged), so that it is written
// back, as the kubelet's needsReconcile does. On an update, an echo of an
// older delivery, or an API status that agrees, is left alone.
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
	// Notify has the pod; the round records the delivery after it
	// returns. Before that, Reconcile leaves the pod alone (its first
	// delivery writes it anyway).
	if err := m.WaitDelivered(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}

	api := func(rv string, ready v1.ConditionStatus, at time.Time) *v1.Pod {
		return withReady(first, rv, ready, at)
	}
	// The API agrees: nothing.
	if m.Reconcile(api("6", v1.ConditionTrue, smEpoch), false) {
		t.Error("Reconcile of an API status that agrees reported a write")
	}
	// An older delivery's echo (Ready False before the delivered True).
	if m.Reconcile(api("6", v1.ConditionFalse, smEpoch.Add(-time.Minute)), false) {
		t.Error("Reconcile of an older delivery's echo reported a write")
	}
	rec.expectNone(t)

	// The controller marks the pod not Ready later: written back.
	if !m.Reconcile(api("9", v1.ConditionFalse, smEpoch.Add(time.Minute)), false) {
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
	if m.Reconcile(smPod("other", v1.RestartPolicyAlways, "c"), true) {
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

// reconcileEnv is a manager driven by hand (deliver called by the test, no
// Run) with one pod delivered Ready True at smEpoch, and apiPod builds the
// API's copy of that pod with Ready of the given status, time and
// resourceVersion.
type reconcileEnv struct {
	m     *Manager
	rec   *smRecorder
	pod   *v1.Pod
	st    v1.PodStatus
	first *v1.Pod
}

// before, if set, is called at the start of each Notify.
func newReconcileEnv(t *testing.T, before func()) *reconcileEnv {
	t.Helper()
	e := &reconcileEnv{rec: newSMRecorder()}
	notify := func(p *v1.Pod) {
		if before != nil {
			before()
		}
		e.rec.notify(p)
	}
	var err error
	e.m, err = NewManager(ManagerConfig{Clock: clocktesting.NewFakeClock(smEpoch), Notify: notify})
	if err != nil {
		t.Fatal(err)
	}
	e.pod = smPod("r1", v1.RestartPolicyAlways, "c")
	e.pod.ResourceVersion = "5"
	t0 := metav1.NewTime(smEpoch)
	e.st = smStatus(v1.PodRunning, csRunning("c"))
	e.st.Conditions = []v1.PodCondition{
		{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: t0},
		{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: t0},
	}
	e.m.SetPodStatus(e.pod, e.st)
	e.first = e.deliverOne(t)
	return e
}

func (e *reconcileEnv) apiPod(rv string, ready v1.ConditionStatus, at time.Time) *v1.Pod {
	return withReady(e.first, rv, ready, at)
}

// withReady is the API's copy of delivered at resourceVersion rv, its
// Ready condition set to ready since at (another writer's, or an echo).
func withReady(delivered *v1.Pod, rv string, ready v1.ConditionStatus, at time.Time) *v1.Pod {
	p := delivered.DeepCopy()
	p.ResourceVersion = rv
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == v1.PodReady {
			p.Status.Conditions[i].Status = ready
			p.Status.Conditions[i].LastTransitionTime = metav1.NewTime(at)
		}
	}
	return p
}

// deliverOne runs one delivery round and returns the one pod it handed to
// Notify, failing if it handed none or more.
func (e *reconcileEnv) deliverOne(t *testing.T) *v1.Pod {
	t.Helper()
	got := e.deliveries()
	if len(got) != 1 {
		t.Fatalf("a delivery round handed %d pods to Notify, want 1", len(got))
	}
	return got[0]
}

// deliveries runs one delivery round and returns what it handed to Notify.
func (e *reconcileEnv) deliveries() []*v1.Pod {
	e.m.deliver(context.Background())
	var out []*v1.Pod
	for {
		select {
		case p := <-e.rec.ch:
			out = append(out, p)
		default:
			return out
		}
	}
}

// On the informer's periodic resync a Ready the API shows with an older
// time than the delivered one is written back too: virtual-kubelet gave up
// writing the delivery (queue.MaxRetries during a partition) after the
// controller's MarkPodsNotReady, or the controller's clock is behind the
// node's. No update brings that API status again, so without the resync it
// would stay. On an update it is taken for an echo of an older delivery.
// A difference nothing writes (virtual-kubelet skips a pod whose API phase
// is terminal) costs one Notify a resync, and nothing more: a redelivery
// causes no other.
func TestStatusManagerReconcilePeriodic(t *testing.T) {
	e := newReconcileEnv(t, nil)
	older := e.apiPod("7", v1.ConditionFalse, smEpoch.Add(-time.Minute))
	if e.m.Reconcile(older, false) {
		t.Fatal("Reconcile of an update showing an older Ready reported a write")
	}
	if got := e.deliveries(); len(got) != 0 {
		t.Fatalf("%d deliveries after an update's echo, want none", len(got))
	}
	if agree := e.apiPod("7", v1.ConditionTrue, smEpoch); e.m.Reconcile(agree, true) {
		t.Error("periodic Reconcile of an API status that agrees reported a write")
	}
	for resync := range 3 {
		if !e.m.Reconcile(older, true) {
			t.Fatalf("resync %d: periodic Reconcile did not write back a Ready older than the delivered one", resync)
		}
		again := e.deliverOne(t)
		if again.ResourceVersion != "7" {
			t.Errorf("resync %d: re-delivered on resourceVersion %q, want the API's 7", resync, again.ResourceVersion)
		}
		if c := podCondition(again.Status.Conditions, v1.PodReady); c == nil || c.Status != v1.ConditionTrue {
			t.Errorf("resync %d: re-delivered Ready %+v, want the delivered True", resync, c)
		}
		// Nothing wrote it (the API still shows False): no further
		// delivery until the next resync.
		if got := e.deliveries(); len(got) != 0 {
			t.Fatalf("resync %d: %d deliveries after the redelivery without a new Reconcile, want none", resync, len(got))
		}
	}
}

// The redelivery carries the API's resourceVersion even when SetPodStatus
// hands the engine's pod (an older resourceVersion) with an unchanged
// status between Reconcile and the delivery: otherwise the redelivered pod
// equals the one virtual-kubelet was last handed, and it skips it.
func TestStatusManagerReconcileKeepsResourceVersion(t *testing.T) {
	e := newReconcileEnv(t, nil)
	if !e.m.Reconcile(e.apiPod("9", v1.ConditionFalse, smEpoch.Add(time.Minute)), false) {
		t.Fatal("Reconcile did not write back a Ready the controller overwrote")
	}
	e.m.SetPodStatus(e.pod, e.st) // resourceVersion 5, status unchanged
	again := e.deliverOne(t)
	if again.ResourceVersion != "9" {
		t.Errorf("re-delivered on resourceVersion %q, want the API's 9", again.ResourceVersion)
	}
	// Once delivered, the engine's pod is delivered as it is again.
	st := *e.st.DeepCopy()
	st.ContainerStatuses[0].RestartCount = 1
	e.m.SetPodStatus(e.pod, st)
	if next := e.deliverOne(t); next.ResourceVersion != "5" {
		t.Errorf("next delivery on resourceVersion %q, want the engine's pod's 5", next.ResourceVersion)
	}
}

// A Reconcile while Notify hands over a redelivery, seeing another
// resourceVersion (the controller wrote again), is not lost when that
// delivery is recorded: the status is handed over once more, on the newer
// resourceVersion.
func TestStatusManagerReconcileDuringNotify(t *testing.T) {
	var during func()
	e := newReconcileEnv(t, func() {
		if during != nil {
			f := during
			during = nil
			f()
		}
	})
	if !e.m.Reconcile(e.apiPod("9", v1.ConditionFalse, smEpoch.Add(time.Minute)), false) {
		t.Fatal("Reconcile did not write back a Ready the controller overwrote")
	}
	during = func() {
		if !e.m.Reconcile(e.apiPod("11", v1.ConditionFalse, smEpoch.Add(2*time.Minute)), false) {
			t.Error("Reconcile during Notify did not report a write")
		}
	}
	if rv := e.deliverOne(t).ResourceVersion; rv != "9" {
		t.Errorf("first redelivery on resourceVersion %q, want 9", rv)
	}
	if rv := e.deliverOne(t).ResourceVersion; rv != "11" {
		t.Errorf("second redelivery on resourceVersion %q, want 11", rv)
	}
	if got := e.deliveries(); len(got) != 0 {
		t.Errorf("%d deliveries after both redeliveries, want none", len(got))
	}
}
