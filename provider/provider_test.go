package provider

import (
	"context"
	"testing"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// fakeEngine records what the provider asks of the engine.
type fakeEngine struct {
	known   map[string]*v1.Pod // by namespace/name
	updated []string
	killed  []string
	unknown []string
	notify  func(*v1.Pod)
}

func (f *fakeEngine) UpdatePod(_ context.Context, pod *v1.Pod) {
	f.updated = append(f.updated, pod.Name)
}

func (f *fakeEngine) Kill(_ context.Context, pod *v1.Pod) bool {
	if _, ok := f.known[pod.Namespace+"/"+pod.Name]; !ok {
		return false
	}
	f.killed = append(f.killed, pod.Name)
	return true
}

func (f *fakeEngine) KillUnknown(_ context.Context, pod *v1.Pod) {
	f.unknown = append(f.unknown, pod.Name)
}
func (f *fakeEngine) PodByName(ns, name string) *v1.Pod { return f.known[ns+"/"+name] }
func (f *fakeEngine) Pods() []*v1.Pod                   { return nil }
func (f *fakeEngine) NotifyPods(cb func(*v1.Pod))       { f.notify = cb }

func TestProviderHandsPodsToTheEngine(t *testing.T) {
	running := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1"}, Status: v1.PodStatus{Phase: v1.PodRunning}}
	e := &fakeEngine{known: map[string]*v1.Pod{"ns/web": running}}
	p := New(e, nil, nil)
	ctx := context.Background()
	if err := p.CreatePod(ctx, running); err != nil || len(e.updated) != 1 {
		t.Fatalf("CreatePod: %v, engine updates %v", err, e.updated)
	}
	if err := p.UpdatePod(ctx, running); err != nil || len(e.updated) != 2 {
		t.Fatalf("UpdatePod: %v, engine updates %v", err, e.updated)
	}
	if err := p.DeletePod(ctx, running); err != nil || len(e.killed) != 1 || len(e.unknown) != 0 {
		t.Errorf("DeletePod of a known pod: %v, killed %v, unknown %v", err, e.killed, e.unknown)
	}
	stranger := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ghost", UID: "u2"}}
	if err := p.DeletePod(ctx, stranger); err != nil || len(e.unknown) != 1 {
		t.Errorf("DeletePod of an unknown pod: %v, unknown %v", err, e.unknown)
	}
	if got, err := p.GetPod(ctx, "ns", "web"); err != nil || got.UID != "u1" {
		t.Errorf("GetPod: %v %v", got, err)
	}
	if _, err := p.GetPod(ctx, "ns", "ghost"); !errdefs.IsNotFound(err) {
		t.Errorf("GetPod of an unknown pod: %v, want NotFound", err)
	}
	if st, err := p.GetPodStatus(ctx, "ns", "web"); err != nil || st.Phase != v1.PodRunning {
		t.Errorf("GetPodStatus: %v %v", st, err)
	}
}

// TestProviderNotifyKeepsOtherWritersConditions: a status the engine
// publishes reaches virtual-kubelet with the API's conditions that the
// node does not own (a readiness gate), not rolled back.
func TestProviderNotifyKeepsOtherWritersConditions(t *testing.T) {
	e := &fakeEngine{}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	api := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1"},
		Status: v1.PodStatus{Conditions: []v1.PodCondition{{Type: "example.com/gate", Status: v1.ConditionTrue}}}}
	if err := indexer.Add(api); err != nil {
		t.Fatal(err)
	}
	p := New(e, corev1listers.NewPodLister(indexer), nil)
	var got []*v1.Pod
	p.NotifyPods(context.Background(), func(pod *v1.Pod) { got = append(got, pod) })
	ours := api.DeepCopy()
	ours.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	e.notify(ours)
	if len(got) != 1 || len(got[0].Status.Conditions) != 2 {
		t.Fatalf("handed on %v, want Ready and the API's gate", got)
	}
	if ours.Status.Conditions[0].Type != v1.PodReady || len(ours.Status.Conditions) != 1 {
		t.Error("the engine's copy was modified")
	}
}

// TestProviderNotifyCallsTheTerminalHook: every status goes through the
// terminal hook (podwriter.WriteTerminal decides) and then to
// virtual-kubelet, in that order.
func TestProviderNotifyCallsTheTerminalHook(t *testing.T) {
	e := &fakeEngine{}
	var calls []string
	p := New(e, nil, func(_ context.Context, pod *v1.Pod) { calls = append(calls, "terminal "+string(pod.Status.Phase)) })
	p.NotifyPods(context.Background(), func(pod *v1.Pod) { calls = append(calls, "vk "+string(pod.Status.Phase)) })
	e.notify(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1"}, Status: v1.PodStatus{Phase: v1.PodSucceeded}})
	if want := []string{"terminal Succeeded", "vk Succeeded"}; len(calls) != 2 || calls[0] != want[0] || calls[1] != want[1] {
		t.Errorf("calls %v, want %v", calls, want)
	}
}

// TestProviderStampsTheAPISource: as the kubelet's pod config, every pod
// from the API reaches the engine with kubernetes.io/config.source "api",
// so an API pod claiming "file" (the node e2e suite's critical pod) is not
// run as a static pod; mirror pods keep their annotations; the caller's
// object is never modified.
func TestProviderStampsTheAPISource(t *testing.T) {
	var got []*v1.Pod
	e := &recordingEngine{fakeEngine: fakeEngine{known: map[string]*v1.Pod{}}, got: &got}
	p := New(e, nil, nil)
	ctx := context.Background()
	claimsFile := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "critical", UID: "u1",
		Annotations: map[string]string{"kubernetes.io/config.source": "file"}}}
	plain := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain", UID: "u2"}}
	mirror := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "static-node", UID: "u3",
		Annotations: map[string]string{"kubernetes.io/config.source": "file", "kubernetes.io/config.mirror": "h"}}}
	for _, pod := range []*v1.Pod{claimsFile, plain, mirror} {
		if err := p.CreatePod(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.DeletePod(ctx, claimsFile); err != nil {
		t.Fatal(err)
	}
	want := []string{"api", "api", "file", "api"}
	for i, pod := range got {
		if src := pod.Annotations["kubernetes.io/config.source"]; src != want[i] {
			t.Errorf("pod %d (%s) reached the engine with config.source %q, want %q", i, pod.Name, src, want[i])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("engine got %d pods, want %d", len(got), len(want))
	}
	if claimsFile.Annotations["kubernetes.io/config.source"] != "file" || plain.Annotations != nil {
		t.Errorf("the caller's pods were modified: %v, %v", claimsFile.Annotations, plain.Annotations)
	}
}

// recordingEngine records every pod the provider hands on.
type recordingEngine struct {
	fakeEngine
	got *[]*v1.Pod
}

func (r *recordingEngine) UpdatePod(ctx context.Context, pod *v1.Pod) {
	*r.got = append(*r.got, pod)
}

func (r *recordingEngine) Kill(ctx context.Context, pod *v1.Pod) bool {
	*r.got = append(*r.got, pod)
	return true
}
