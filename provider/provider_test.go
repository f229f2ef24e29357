package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corev1listers "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

func TestDeleteOnTerminated(t *testing.T) {
	now := metav1.Now()
	deleting := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", DeletionTimestamp: &now}}
	for _, tc := range []struct {
		name       string
		pod        *v1.Pod
		wantDelete bool
	}{
		{"deleted pod: object removed with grace 0 and UID precondition", deleting, true},
		{"pod not being deleted: left alone", &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewSimpleClientset(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}})
			var got *metav1.DeleteOptions
			client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				opts := a.(k8stesting.DeleteActionImpl).DeleteOptions
				got = &opts
				return false, nil, nil
			})
			if err := DeleteOnTerminated(client.CoreV1(), nil, nil)(context.Background(), tc.pod); err != nil {
				t.Fatal(err)
			}
			if !tc.wantDelete {
				if got != nil {
					t.Errorf("deleted a pod that is not being deleted")
				}
				return
			}
			if got == nil || got.GracePeriodSeconds == nil || *got.GracePeriodSeconds != 0 ||
				got.Preconditions == nil || got.Preconditions.UID == nil || *got.Preconditions.UID != "u1" {
				t.Fatalf("delete options %+v, want grace 0 and UID precondition u1", got)
			}
			// Already gone: not an error.
			if err := DeleteOnTerminated(client.CoreV1(), nil, nil)(context.Background(), tc.pod); err != nil {
				t.Errorf("second delete of a gone pod: %v", err)
			}
		})
	}
}

// TestDeleteOnTerminatedWritesFinalStatus: an API object still showing the
// pod Running gets the final status before it is deleted (the kubelet's
// order); one that shows it already is only deleted. Other writers'
// conditions stay.
func TestDeleteOnTerminatedWritesFinalStatus(t *testing.T) {
	now := metav1.Now()
	meta := metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", DeletionTimestamp: &now}
	running := v1.PodStatus{Phase: v1.PodRunning,
		Conditions:        []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue}, {Type: v1.PodReady, Status: v1.ConditionTrue}},
		ContainerStatuses: []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}}
	final := v1.PodStatus{Phase: v1.PodFailed,
		Conditions:        []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}},
		ContainerStatuses: []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 137}}}}}
	for _, tc := range []struct {
		name      string
		apiStatus v1.PodStatus
		wantWrite bool
	}{
		{"API shows Running: final status written first", running, true},
		{"API shows the final status: only deleted", final, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewSimpleClientset(&v1.Pod{ObjectMeta: meta, Status: tc.apiStatus})
			var order []string
			var written *v1.Pod
			client.PrependReactor("update", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() == "status" {
					order = append(order, "status")
					written = a.(k8stesting.UpdateAction).GetObject().(*v1.Pod)
				}
				return false, nil, nil
			})
			client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				order = append(order, "delete")
				return false, nil, nil
			})
			pod := &v1.Pod{ObjectMeta: meta, Status: final}
			if err := DeleteOnTerminated(client.CoreV1(), nil, nil)(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			want := []string{"delete"}
			if tc.wantWrite {
				want = []string{"status", "delete"}
			}
			if strings.Join(order, ",") != strings.Join(want, ",") {
				t.Fatalf("calls %v, want %v", order, want)
			}
			if !tc.wantWrite {
				return
			}
			if written.Status.Phase != v1.PodFailed || written.Status.ContainerStatuses[0].State.Terminated == nil {
				t.Errorf("written status %+v, want the final one", written.Status)
			}
			if !hasCondition(written.Status.Conditions, v1.DisruptionTarget) {
				t.Errorf("the DisruptionTarget condition of another writer was dropped: %+v", written.Status.Conditions)
			}
			for _, c := range written.Status.Conditions {
				if c.Type == v1.PodReady && c.Status != v1.ConditionFalse {
					t.Errorf("Ready %s, want the final status's False", c.Status)
				}
			}
		})
	}
}

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
	p := New(e, nil, "n1", t.TempDir(), nil)
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
	p := New(e, nil, "n1", t.TempDir(), corev1listers.NewPodLister(indexer))
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

// TestDeleteOnTerminatedUsesTheCache: the informer's copy saves the GET. A
// copy showing the final status needs no write; a current one is written
// without a read; a stale one conflicts and the write is retried against a
// fresh GET, so the final status is never lost.
func TestDeleteOnTerminatedUsesTheCache(t *testing.T) {
	now := metav1.Now()
	meta := metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", DeletionTimestamp: &now, ResourceVersion: "5"}
	running := v1.PodStatus{Phase: v1.PodRunning,
		ContainerStatuses: []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}}
	final := v1.PodStatus{Phase: v1.PodFailed,
		ContainerStatuses: []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 137}}}}}
	for _, tc := range []struct {
		name        string
		cachedRV    string
		cachedState v1.PodStatus
		want        []string
	}{
		{"cache shows the final status: only deleted", "5", final, []string{"delete"}},
		{"cache current: written without a read", "5", running, []string{"status@5", "delete"}},
		{"cache stale: conflict, then read and written", "4", running, []string{"status@4", "get", "status@5", "delete"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewSimpleClientset(&v1.Pod{ObjectMeta: meta, Status: running})
			var calls []string
			client.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				calls = append(calls, "get")
				return false, nil, nil
			})
			client.PrependReactor("update", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "status" {
					return false, nil, nil
				}
				obj := a.(k8stesting.UpdateAction).GetObject().(*v1.Pod)
				calls = append(calls, "status@"+obj.ResourceVersion)
				if obj.ResourceVersion != "5" {
					return true, nil, apierrors.NewConflict(v1.Resource("pods"), obj.Name, fmt.Errorf("the object has been modified"))
				}
				if obj.Status.Phase != v1.PodFailed {
					t.Errorf("written phase %s, want Failed", obj.Status.Phase)
				}
				return false, nil, nil
			})
			client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				calls = append(calls, "delete")
				return false, nil, nil
			})
			cachedMeta := meta
			cachedMeta.ResourceVersion = tc.cachedRV
			cached := &v1.Pod{ObjectMeta: cachedMeta, Status: tc.cachedState}
			lookup := func(namespace, name string) *v1.Pod {
				if namespace == "ns" && name == "p" {
					return cached
				}
				return nil
			}
			if err := DeleteOnTerminated(client.CoreV1(), lookup, nil)(context.Background(), &v1.Pod{ObjectMeta: meta, Status: final}); err != nil {
				t.Fatal(err)
			}
			if strings.Join(calls, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("calls %v, want %v", calls, tc.want)
			}
		})
	}
}
