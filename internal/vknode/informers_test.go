package vknode

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
)

func managedPod(name, node string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "7",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": "b"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kubectl-create", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
					FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:containers":{}}}`)}},
				{Manager: "crivk", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Subresource: "status",
					FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:phase":{}}}`)}},
			}},
		Spec:   v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Image: "img"}}},
		Status: v1.PodStatus{Phase: v1.PodRunning},
	}
}

func TestDropManagedFields(t *testing.T) {
	withoutFields := func(p *v1.Pod) *v1.Pod { p = p.DeepCopy(); p.ManagedFields = nil; return p }
	tombstone := cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: managedPod("a", "n1")}
	for _, tc := range []struct {
		name string
		in   any
		want any
	}{
		{"pod with managed fields: only they go", managedPod("a", "n1"), withoutFields(managedPod("a", "n1"))},
		{"pod without: unchanged", withoutFields(managedPod("a", "n1")), withoutFields(managedPod("a", "n1"))},
		{"empty list: cleared to nil", &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "e", ManagedFields: []metav1.ManagedFieldsEntry{}}},
			&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "e"}}},
		{"tombstone: unchanged", tombstone, tombstone},
		{"not an object: unchanged", "ns/a", "ns/a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DropManagedFields(tc.in)
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// plainListWatch is the fake's pods client, which serves a list and a
// watch but not the watch-list semantics NewPodInformer asks of a real
// API server.
type plainListWatch struct{ corev1client.PodsGetter }

func (plainListWatch) IsWatchListSemanticsUnSupported() bool { return true }

// The pod informer caches, and hands its handlers, pods without their
// managedFields; the rest of the pod is as the API server sent it.
func TestPodInformerDropsManagedFields(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := fake.NewClientset(managedPod("a", "n1"))
	inf := NewPodInformer(plainListWatch{cs.CoreV1()}, "n1", 0)
	handed := make(chan *v1.Pod, 4)
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { handed <- obj.(*v1.Pod) },
		UpdateFunc: func(_, obj any) { handed <- obj.(*v1.Pod) },
	}); err != nil {
		t.Fatal(err)
	}
	go inf.Informer().RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		t.Fatal("pod informer did not sync")
	}
	// A pod bound later comes through the watch.
	if _, err := cs.CoreV1().Pods("ns").Create(ctx, managedPod("b", "n1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, err := inf.Lister().Pods("ns").Get("b")
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("pod b never cached: %v", err)
	}
	for _, name := range []string{"a", "b"} {
		got, err := inf.Lister().Pods("ns").Get(name)
		if err != nil {
			t.Fatal(err)
		}
		want := managedPod(name, "n1")
		want.ManagedFields = nil
		got = got.DeepCopy()
		// The fake's own resourceVersion and, through its watch, type meta.
		got.ResourceVersion, got.TypeMeta = want.ResourceVersion, want.TypeMeta
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("cached pod %s (-want +got):\n%s", name, d)
		}
	}
	for range 2 {
		select {
		case p := <-handed:
			if p.ManagedFields != nil {
				t.Errorf("pod %s handed with managedFields %v", p.Name, p.ManagedFields)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("handler not called for both pods")
		}
	}
}
