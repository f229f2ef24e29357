package podwriter

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// recordingPods records the deletes that reach the API.
type recordingPods struct {
	corev1client.PodInterface // nil: any other call panics
	deleted                   *[]string
}

func (r recordingPods) Delete(_ context.Context, name string, _ metav1.DeleteOptions) error {
	*r.deleted = append(*r.deleted, name)
	return nil
}

type recordingGetter struct{ deleted *[]string }

func (g recordingGetter) Pods(string) corev1client.PodInterface {
	return recordingPods{deleted: g.deleted}
}

func TestDeleteGuard(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"}}
	if err := indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	zero, thirty := int64(0), int64(30)
	for _, tc := range []struct {
		name       string
		pod        string
		opts       metav1.DeleteOptions
		apiDeletes int
		terminated types.UID
	}{
		{name: "force delete at grace expiry becomes crivk's termination", pod: "p",
			opts: metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: metav1.NewUIDPreconditions("u1")}, terminated: "u1"},
		{name: "force delete without precondition", pod: "p", opts: metav1.DeleteOptions{GracePeriodSeconds: &zero}, terminated: "u1"},
		{name: "a recreated pod is not this delete's", pod: "p",
			opts: metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: metav1.NewUIDPreconditions("u0")}},
		{name: "a pod gone from the informer", pod: "gone", opts: metav1.DeleteOptions{GracePeriodSeconds: &zero}},
		{name: "graceful delete passes", pod: "p", opts: metav1.DeleteOptions{GracePeriodSeconds: &thirty}, apiDeletes: 1},
		{name: "default grace passes", pod: "p", opts: metav1.DeleteOptions{}, apiDeletes: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var deleted []string
			var terminated []types.UID
			g := NewDeleteGuard(recordingGetter{deleted: &deleted}, corev1listers.NewPodLister(indexer),
				func(_ context.Context, p *v1.Pod) error {
					terminated = append(terminated, p.UID)
					return nil
				}, nil)
			if err := g.Pods("ns").Delete(context.Background(), tc.pod, tc.opts); err != nil {
				t.Fatal(err)
			}
			if len(deleted) != tc.apiDeletes {
				t.Errorf("deletes that reached the API: %v, want %d", deleted, tc.apiDeletes)
			}
			switch {
			case tc.terminated == "" && len(terminated) != 0:
				t.Errorf("terminated %v, want none", terminated)
			case tc.terminated != "" && (len(terminated) != 1 || terminated[0] != tc.terminated):
				t.Errorf("terminated %v, want %s", terminated, tc.terminated)
			}
		})
	}
}

// The guard records each status write that succeeds and drops the queued
// writes of a pod whose final status the deletion path writes; the
// informer's delete forgets the pod.
func TestDeleteGuardStatusWrites(t *testing.T) {
	client := fake.NewSimpleClientset(
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "ua", ResourceVersion: "3"}},
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", UID: "ub", ResourceVersion: "3"}})
	writes := NewStatusWrites()
	g := NewDeleteGuard(client.CoreV1(), nil, nil, writes)
	updates := 0
	client.PrependReactor("update", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		updates++
		obj := a.(k8stesting.UpdateAction).GetObject().(*v1.Pod).DeepCopy()
		obj.ResourceVersion = "4" // what the API server answers
		return true, obj, nil
	})
	running := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "ua", ResourceVersion: "3"},
		Status: v1.PodStatus{Phase: v1.PodRunning}}
	if _, err := g.Pods("ns").UpdateStatus(context.Background(), running, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if last := writes.Last("ua"); updates != 1 || last == nil || last.ResourceVersion != "4" || last.Status.Phase != v1.PodRunning {
		t.Fatalf("%d writes, recorded %v, want one write recorded at resourceVersion 4", updates, last)
	}
	writes.Finalize(context.Background(), "ub")
	stale := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", UID: "ub", ResourceVersion: "3"}}
	if _, err := g.Pods("ns").UpdateStatus(context.Background(), stale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if updates != 1 {
		t.Errorf("a write of a pod whose final status is written reached the API")
	}
	h := ForgetDeleted(writes)
	h.OnDelete(running)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/b", Obj: stale})
	if writes.Len() != 0 {
		t.Errorf("%d pods still recorded after their deletion", writes.Len())
	}
}
