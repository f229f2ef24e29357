package allocation

import (
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func pod(uid string, gen int64, containers ...v1.Container) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: uid, Namespace: "ns", Generation: gen},
		Spec: v1.PodSpec{Containers: containers}}
}

func ctr(name, cpu, mem string) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: testutil.Resources(cpu, mem), Limits: testutil.Resources(cpu, mem)}}
}

// TestDecide: the kubelet v1.37's rules, admission alone: a resize it
// refuses is Deferred with its message, also beyond the node's
// allocatable (no longer Infeasible since v1.36, #136043), and a
// pod-level resize is asked of it as a container's is.
func TestDecide(t *testing.T) {
	admitAll := func(*v1.Pod, []*v1.Pod) (bool, string, string) { return true, "", "" }
	outOfCPU := func(p *v1.Pod, others []*v1.Pod) (bool, string, string) {
		return false, "OutOfcpu", fmt.Sprintf("Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000 (%d others)", len(others))
	}
	var seen *v1.ResourceRequirements
	podLevelSeen := func(p *v1.Pod, _ []*v1.Pod) (bool, string, string) {
		seen = p.Spec.Resources
		return true, "", ""
	}
	withPodLevel := pod("p", 2, v1.Container{Name: "a"})
	withPodLevel.Spec.Resources = &v1.ResourceRequirements{Requests: testutil.Resources("1", "1Gi"), Limits: testutil.Resources("1", "1Gi")}
	for name, tc := range map[string]struct {
		pod   *v1.Pod
		admit Admitter
		want  Decision
	}{
		"fits": {pod: pod("p", 2, ctr("a", "1", "1Gi")), admit: admitAll, want: Decision{Allocate: true}},
		"more CPU than the node has: admission's verdict, Deferred": {pod: pod("p", 2, ctr("a", "3", "1Gi")), admit: outOfCPU,
			want: Decision{Reason: "Deferred", Message: "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000 (1 others)"}},
		"fits the node, not beside the others: Deferred with admission's message": {pod: pod("p", 2, ctr("a", "1500m", "1Gi")), admit: outOfCPU,
			want: Decision{Reason: "Deferred", Message: "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000 (1 others)"}},
		"pod-level resources: admitted as they are": {pod: withPodLevel, admit: podLevelSeen, want: Decision{Allocate: true}},
	} {
		t.Run(name, func(t *testing.T) {
			others := []*v1.Pod{pod("o", 1, ctr("x", "1", "1Gi")), tc.pod}
			if got := Decide(tc.pod, others, tc.admit); got != tc.want {
				t.Errorf("Decide = %+v, want %+v", got, tc.want)
			}
		})
	}
	if seen != withPodLevel.Spec.Resources {
		t.Errorf("admission saw pod-level resources %v, want the spec's", seen)
	}
}

type event struct{ kind, reason, msg string }

type recorder struct{ events []event }

func (r *recorder) Eventf(_ runtime.Object, kind, reason, format string, args ...interface{}) {
	r.events = append(r.events, event{kind, reason, fmt.Sprintf(format, args...)})
}

// TestHandleResize walks a pod through a resize: admitted with its spec,
// a resize admission refuses (Deferred, one event per generation), one
// that fits (allocated, PodResizeInProgress, ResizeStarted), and a spec
// back to the allocation (pending cleared).
func TestHandleResize(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), CheckpointFile)
	m, err := New(Config{Path: path, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	none := func() []*v1.Pod { return nil }
	outOfCPU := func(*v1.Pod, []*v1.Pod) (bool, string, string) {
		return false, "OutOfcpu", "Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000"
	}
	p := pod("p", 1, ctr("a", "500m", "1Gi"))
	if err := m.Allocate(p); err != nil {
		t.Fatal(err)
	}
	cond := func(typ v1.PodConditionType) *v1.PodCondition {
		for _, c := range m.Conditions(p.UID) {
			if c.Type == typ {
				return &c
			}
		}
		return nil
	}

	// Too much CPU: the allocated pod is run, Deferred.
	huge := pod("p", 2, ctr("a", "3", "1Gi"))
	got, err := m.HandleResize(huge, none, outOfCPU, rec)
	if err != nil || !reflect.DeepEqual(got.Spec.Containers[0].Resources, p.Spec.Containers[0].Resources) {
		t.Fatalf("deferred resize: ran %v (%v), want the allocation", got.Spec.Containers[0].Resources, err)
	}
	c := cond(v1.PodResizePending)
	if c == nil || c.Reason != "Deferred" || c.Message != "Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000" || c.ObservedGeneration != 2 {
		t.Fatalf("PodResizePending %+v", c)
	}
	wantEvent := event{"Warning", "ResizeDeferred", `Pod resize Deferred: {"containers":[{"name":"a","resources":{"limits":{"cpu":"3","memory":"1Gi"},"requests":{"cpu":"3","memory":"1Gi"}}}],"generation":2,"error":"Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000"}`}
	if len(rec.events) != 1 || rec.events[0] != wantEvent {
		t.Fatalf("events %+v, want %+v", rec.events, wantEvent)
	}
	// Again, same generation: no second event.
	clk.Step(time.Second)
	if _, err := m.HandleResize(huge, none, outOfCPU, rec); err != nil || len(rec.events) != 1 {
		t.Fatalf("retry of the same generation: %v, %d events", err, len(rec.events))
	}

	// A resize that fits: allocated, in progress, ResizeStarted.
	fits := pod("p", 3, ctr("a", "1", "1Gi"))
	got, err = m.HandleResize(fits, func() []*v1.Pod { return []*v1.Pod{pod("o", 1, ctr("x", "500m", "1Gi"))} },
		func(*v1.Pod, []*v1.Pod) (bool, string, string) { return true, "", "" }, rec)
	if err != nil || got != fits {
		t.Fatalf("fitting resize: ran %v (%v), want the spec", got.Spec.Containers[0].Resources, err)
	}
	if cond(v1.PodResizePending) != nil {
		t.Errorf("PodResizePending still set after the resize was allocated")
	}
	if c := cond(v1.PodResizeInProgress); c == nil || c.ObservedGeneration != 3 || c.Reason != "" {
		t.Errorf("PodResizeInProgress %+v, want one of generation 3 without a reason", c)
	}
	wantEvent = event{"Normal", "ResizeStarted", `Pod resize started: {"containers":[{"name":"a","resources":{"limits":{"cpu":"1","memory":"1Gi"},"requests":{"cpu":"1","memory":"1Gi"}}}],"generation":3}`}
	if last := rec.events[len(rec.events)-1]; last != wantEvent {
		t.Errorf("event %+v, want %+v", last, wantEvent)
	}

	// The checkpoint has it: a new manager (a restart) runs the resized pod.
	m2, err := New(Config{Path: path, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := m2.Allocated(p); !ok || a.Spec.Containers[0].Resources.Limits.Cpu().String() != "1" {
		t.Errorf("after a restart: allocation %v (%v), want 1 CPU", a.Spec.Containers[0].Resources, ok)
	}

	// In progress until told otherwise; an error keeps the generation.
	if g, changed := m.SetInProgress(p.UID, "Error", "boom", 4); g != 3 || !changed {
		t.Errorf("SetInProgress(Error) = %d %v, want generation 3, changed", g, changed)
	}
	if g, changed := m.SetInProgress(p.UID, "", "", 4); g != 3 || changed {
		t.Errorf("SetInProgress again = %d %v, want generation 3, unchanged (reason kept)", g, changed)
	}
	if g, ok := m.ClearInProgress(p.UID); !ok || g != 3 {
		t.Errorf("ClearInProgress = %d %v", g, ok)
	}

	// Forgotten: the checkpoint no longer has it.
	if err := m.Remove(p.UID); err != nil {
		t.Fatal(err)
	}
	m3, _ := New(Config{Path: path})
	if _, ok := m3.Allocated(p); ok {
		t.Errorf("allocation still checkpointed after Remove")
	}
}

// TestBackfill takes the resize conditions back from the API's status once.
func TestBackfill(t *testing.T) {
	m, _ := New(Config{})
	p := pod("p", 5)
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: "Deferred", Message: "m", ObservedGeneration: 5},
		{Type: v1.PodReady, Status: v1.ConditionTrue}}
	m.Backfill(p)
	got := m.Conditions(p.UID)
	if len(got) != 1 || got[0].Reason != "Deferred" || got[0].ObservedGeneration != 5 {
		t.Fatalf("backfilled %+v", got)
	}
	m.ClearPending(p.UID)
	m.Backfill(p)
	if got := m.Conditions(p.UID); len(got) != 0 {
		t.Errorf("backfilled twice: %+v", got)
	}
}

// TestMessages are the kubelet's events/resize_test.go expectations.
func TestMessages(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	p := pod("p", 2)
	p.Spec.InitContainers = []v1.Container{{Name: "c0", RestartPolicy: &always, Resources: v1.ResourceRequirements{
		Requests: testutil.Resources("100m", ""), Limits: testutil.Resources("200m", "")}}}
	p.Spec.Containers = []v1.Container{
		{Name: "c1", Resources: v1.ResourceRequirements{Requests: testutil.Resources("", "100"), Limits: testutil.Resources("", "200")}},
		{Name: "c2", Resources: v1.ResourceRequirements{Requests: testutil.Resources("200m", "100")}},
	}
	want := `Pod resize started: {"initContainers":[{"name":"c0","resources":{"limits":{"cpu":"200m"},"requests":{"cpu":"100m"}}}],"containers":[{"name":"c1","resources":{"limits":{"memory":"200"},"requests":{"memory":"100"}}},{"name":"c2","resources":{"requests":{"cpu":"200m","memory":"100"}}}],"generation":2}`
	if got := StartedMessage(p, 2); got != want {
		t.Errorf("StartedMessage\n got %s\nwant %s", got, want)
	}
	if got := CompletedMessage(pod("q", 1, v1.Container{Name: "c0"}), 1); got != `Pod resize completed: {"containers":[{"name":"c0","resources":{}}],"generation":1}` {
		t.Errorf("CompletedMessage %s", got)
	}
}

// TestHandleResizePodLevel: a resize of spec.resources alone is one to
// decide (the kubelet's UpdatePodFromAllocation with
// InPlacePodLevelResourcesVerticalScaling on): until it is allocated the
// pod runs with its allocated pod-level resources; once it is, the
// allocation is the spec's, checkpointed; a pod-level allocation of none
// replaces a spec that adds some.
func TestHandleResizePodLevel(t *testing.T) {
	path := filepath.Join(t.TempDir(), CheckpointFile)
	m, err := New(Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	none := func() []*v1.Pod { return nil }
	refuse := func(*v1.Pod, []*v1.Pod) (bool, string, string) { return false, "OutOfmemory", "no room" }
	admit := func(*v1.Pod, []*v1.Pod) (bool, string, string) { return true, "", "" }
	podLevel := func(gen int64, cpu, mem string) *v1.Pod {
		p := pod("p", gen, v1.Container{Name: "a"})
		p.Spec.Resources = &v1.ResourceRequirements{Requests: testutil.Resources(cpu, mem), Limits: testutil.Resources(cpu, mem)}
		return p
	}
	orig := podLevel(1, "100m", "100Mi")
	if err := m.Allocate(orig); err != nil {
		t.Fatal(err)
	}
	if a, ok := m.Allocated(orig); !ok || a != orig {
		t.Fatalf("Allocated of the spec as allocated = %v %v, want the pod itself", a, ok)
	}

	bigger := podLevel(2, "200m", "100Mi")
	got, err := m.HandleResize(bigger, none, refuse, rec)
	if err != nil || got.Spec.Resources.Limits.Cpu().MilliValue() != 100 || got.Spec.Containers[0].Name != "a" {
		t.Fatalf("deferred pod-level resize: ran %v (%v), want the allocated 100m", got.Spec.Resources, err)
	}
	if bigger.Spec.Resources.Limits.Cpu().MilliValue() != 200 {
		t.Fatalf("the spec was changed: %v", bigger.Spec.Resources)
	}
	if cs := m.Conditions(orig.UID); len(cs) != 1 || cs[0].Type != v1.PodResizePending || cs[0].Reason != "Deferred" {
		t.Fatalf("conditions %+v, want PodResizePending Deferred", cs)
	}

	got, err = m.HandleResize(bigger, none, admit, rec)
	if err != nil || got != bigger {
		t.Fatalf("allocated pod-level resize: ran %v (%v), want the spec", got.Spec.Resources, err)
	}
	want := event{"Normal", "ResizeStarted", `Pod resize started: {"containers":[{"name":"a","resources":{}}],"generation":2}`}
	if last := rec.events[len(rec.events)-1]; last != want {
		t.Errorf("event %+v, want %+v (the kubelet's summary names no pod-level resources)", last, want)
	}
	m2, err := New(Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := m2.Allocated(orig); !ok || a.Spec.Resources.Limits.Cpu().MilliValue() != 200 {
		t.Errorf("after a restart: pod-level allocation %v (%v), want 200m", a.Spec.Resources, ok)
	}

	// A pod admitted without pod-level resources whose spec now has some.
	plain := pod("q", 1, ctr("a", "100m", "100Mi"))
	if err := m.Allocate(plain); err != nil {
		t.Fatal(err)
	}
	added := plain.DeepCopy()
	added.Generation = 2
	added.Spec.Resources = &v1.ResourceRequirements{Limits: testutil.Resources("1", "")}
	if a, _ := m.Allocated(added); a == added || a.Spec.Resources != nil {
		t.Errorf("Allocated of a spec adding pod-level resources: %v, want none (the allocation)", a.Spec.Resources)
	}
}
