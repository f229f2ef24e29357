package podwriter

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corev1listers "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// listerOf is a pod informer's view holding pods.
func listerOf(t *testing.T, pods ...*v1.Pod) corev1listers.PodLister {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range pods {
		if err := indexer.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	return corev1listers.NewPodLister(indexer)
}

// runningStatus is the status of a running pod of one container, c.
func runningStatus() v1.PodStatus {
	return v1.PodStatus{Phase: v1.PodRunning,
		ContainerStatuses: []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}}
}

// killedStatus is the final status of the same pod, its container killed.
func killedStatus() v1.PodStatus {
	return v1.PodStatus{Phase: v1.PodFailed,
		ContainerStatuses: []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 137}}}}}
}

func hasCondition(cs []v1.PodCondition, t v1.PodConditionType) bool {
	for _, c := range cs {
		if c.Type == t {
			return true
		}
	}
	return false
}

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
	running, final := runningStatus(), killedStatus()
	running.Conditions = []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue}, {Type: v1.PodReady, Status: v1.ConditionTrue}}
	final.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}
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

// TestDeleteOnTerminatedUsesTheCache: the informer's copy saves the GET. A
// copy showing the final status needs no write; a current one is written
// without a read; a stale one conflicts and the write is retried against a
// fresh GET, so the final status is never lost.
func TestDeleteOnTerminatedUsesTheCache(t *testing.T) {
	now := metav1.Now()
	meta := metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", DeletionTimestamp: &now, ResourceVersion: "5"}
	running, final := runningStatus(), killedStatus()
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
			if err := DeleteOnTerminated(client.CoreV1(), listerOf(t, cached), nil)(context.Background(), &v1.Pod{ObjectMeta: meta, Status: final}); err != nil {
				t.Fatal(err)
			}
			if strings.Join(calls, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("calls %v, want %v", calls, tc.want)
			}
		})
	}
}

// previousFinalConditions is the rule the final status write followed
// before it used status.WithForeignConditions: the final status's
// conditions, then each of the API's whose type the final status lacks.
func previousFinalConditions(api, final []v1.PodCondition) []v1.PodCondition {
	out := append([]v1.PodCondition(nil), final...)
	for _, c := range api {
		if !hasCondition(out, c.Type) {
			out = append(out, c)
		}
	}
	return out
}

// TestFinalConditions: the final status write keeps other writers'
// conditions by the one rule (status.WithForeignConditions), with the
// result the previous rule of its own gave for what the engine hands it:
// a final status whose node-owned conditions are all there (the engine
// generates Initialized, Ready, ContainersReady and
// PodReadyToStartContainers at every sync) and whose foreign conditions
// are the API's as of the pod's last sync.
//
// Where the rules differ, the API object is the newer word on another
// writer's condition and now wins: a foreign condition that changed in the
// API since the engine's last sync is not rolled back, nor one removed
// there brought back (PodScheduled and DisruptionTarget excepted, which
// the node may set itself), and a duplicate type is written once.
func TestFinalConditions(t *testing.T) {
	ready := func(s v1.ConditionStatus) v1.PodCondition { return v1.PodCondition{Type: v1.PodReady, Status: s} }
	cready := func(s v1.ConditionStatus) v1.PodCondition {
		return v1.PodCondition{Type: v1.ContainersReady, Status: s}
	}
	initialized := v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue}
	scheduled := v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue}
	disruption := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "EvictionByEvictionAPI"}
	gate := func(s v1.ConditionStatus) v1.PodCondition {
		return v1.PodCondition{Type: "example.com/gate", Status: s}
	}
	owned := []v1.PodCondition{initialized, ready(v1.ConditionFalse), cready(v1.ConditionFalse)}
	for _, tc := range []struct {
		name       string
		api, final []v1.PodCondition
		same       bool // the previous rule gave the same
		want       []v1.PodCondition
	}{
		{name: "no conditions", same: true},
		{name: "the API's Ready True is replaced by the final False",
			api: []v1.PodCondition{ready(v1.ConditionTrue)}, final: []v1.PodCondition{ready(v1.ConditionFalse)}, same: true,
			want: []v1.PodCondition{ready(v1.ConditionFalse)}},
		{name: "another writer's DisruptionTarget, not in the final status, is kept",
			api: []v1.PodCondition{disruption, ready(v1.ConditionTrue)}, final: []v1.PodCondition{ready(v1.ConditionFalse)}, same: true,
			want: []v1.PodCondition{ready(v1.ConditionFalse), disruption}},
		{name: "foreign conditions the final status has as the API has them",
			api:   []v1.PodCondition{scheduled, initialized, ready(v1.ConditionTrue), cready(v1.ConditionTrue), gate(v1.ConditionTrue)},
			final: append(append([]v1.PodCondition{scheduled}, owned...), gate(v1.ConditionTrue)), same: true,
			want: append(append([]v1.PodCondition{scheduled}, owned...), gate(v1.ConditionTrue))},
		{name: "the API's foreign conditions the final status lacks follow its own",
			api:   []v1.PodCondition{scheduled, initialized, gate(v1.ConditionTrue), ready(v1.ConditionTrue), cready(v1.ConditionTrue), disruption},
			final: owned, same: true,
			want: append(append([]v1.PodCondition{}, owned...), scheduled, gate(v1.ConditionTrue), disruption)},
		{name: "PodScheduled and DisruptionTarget the node set are kept while the API has none",
			final: []v1.PodCondition{scheduled, disruption, ready(v1.ConditionFalse)}, same: true,
			want: []v1.PodCondition{scheduled, disruption, ready(v1.ConditionFalse)}},

		{name: "a gate changed in the API since the last sync is not rolled back",
			api:   []v1.PodCondition{gate(v1.ConditionFalse), ready(v1.ConditionTrue)},
			final: []v1.PodCondition{gate(v1.ConditionTrue), ready(v1.ConditionFalse)},
			want:  []v1.PodCondition{gate(v1.ConditionFalse), ready(v1.ConditionFalse)}},
		{name: "a gate removed in the API since the last sync is not brought back",
			final: []v1.PodCondition{ready(v1.ConditionFalse), gate(v1.ConditionTrue)},
			want:  []v1.PodCondition{ready(v1.ConditionFalse)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := finalConditions(tc.api, tc.final)
			if len(got) != 0 || len(tc.want) != 0 {
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("final conditions\n got %v\nwant %v", got, tc.want)
				}
			}
			prev := previousFinalConditions(tc.api, tc.final)
			if same := reflect.DeepEqual(prev, got) || len(prev)+len(got) == 0; same != tc.same {
				t.Errorf("the previous rule gave %v (the same: %v, want %v)", prev, same, tc.same)
			}
		})
	}
}

// TestDeleteOnTerminatedFinalizerKeepsWritesRefused: a DELETE the API
// accepts while a finalizer keeps the object leaves the pod final, so a
// stale status write of virtual-kubelet's is still refused afterwards (it
// wrote Running over the final status once, the node e2e "Deleted pods
// handling" spec's failure); the informer's DELETE forgets it.
func TestDeleteOnTerminatedFinalizerKeepsWritesRefused(t *testing.T) {
	now := metav1.Now()
	meta := metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", DeletionTimestamp: &now, Finalizers: []string{"example.com/f"}}
	client := fake.NewSimpleClientset(&v1.Pod{ObjectMeta: meta, Status: runningStatus()})
	// The API keeps the object: the delete is accepted, nothing removed.
	client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, nil
	})
	writes := NewStatusWrites()
	if err := DeleteOnTerminated(client.CoreV1(), nil, writes)(context.Background(), &v1.Pod{ObjectMeta: meta, Status: killedStatus()}); err != nil {
		t.Fatal(err)
	}
	if _, ok := writes.Begin("u1"); ok {
		t.Fatal("a status write after the accepted DELETE of an object a finalizer keeps was allowed")
	}
	ForgetDeleted(writes).OnDelete(&v1.Pod{ObjectMeta: meta})
	end, ok := writes.Begin("u1")
	if !ok {
		t.Fatal("after the informer's DELETE the pod is still final")
	}
	end(nil)
}
