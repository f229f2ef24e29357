package podwriter

import (
	"context"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func podRV(uid, rv string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: types.UID("u" + uid), ResourceVersion: rv}}
}

// recordWrite is a status write of p that succeeded, as the guarded client
// makes it.
func recordWrite(w *StatusWrites, p *v1.Pod) {
	if end, ok := w.Begin(p.UID); ok {
		end(p)
	}
}

func TestStatusWrites(t *testing.T) {
	w := NewStatusWrites()
	recordWrite(w, podRV("1", "7"))
	recordWrite(w, podRV("1", "5")) // an older write's answer, late: kept out
	if got := w.Last("u1"); got == nil || got.ResourceVersion != "7" {
		t.Fatalf("last %v, want resourceVersion 7", got)
	}
	recordWrite(w, podRV("1", "9"))
	if got := w.Last("u1"); got.ResourceVersion != "9" {
		t.Errorf("last %s, want 9", got.ResourceVersion)
	}
	if w.IsFinal("u1") {
		t.Error("final before MarkFinal")
	}
	w.Finalize(context.Background(), "u1")
	w.Finalize(context.Background(), "u2")
	if !w.IsFinal("u1") || !w.IsFinal("u2") || w.Len() != 2 {
		t.Errorf("final u1 %v u2 %v, len %d", w.IsFinal("u1"), w.IsFinal("u2"), w.Len())
	}
	w.Forget("u1")
	w.Forget("u2")
	if w.Last("u1") != nil || w.IsFinal("u1") || w.Len() != 0 {
		t.Errorf("entries left after Forget: %d", w.Len())
	}
	var none *StatusWrites // a nil record records nothing and says nothing
	recordWrite(none, podRV("1", "1"))
	none.Finalize(context.Background(), "u1")
	if none.Last("u1") != nil || none.IsFinal("u1") {
		t.Error("a nil record answered")
	}

	for _, tc := range []struct {
		name string
		a, b *v1.Pod
		want string
	}{
		{"b newer", podRV("1", "5"), podRV("1", "6"), "6"},
		{"a newer", podRV("1", "6"), podRV("1", "5"), "6"},
		{"a nil", nil, podRV("1", "5"), "5"},
		{"b nil", podRV("1", "5"), nil, "5"},
		{"not numbers: a", podRV("1", "x"), podRV("1", "6"), "x"},
		{"another pod's: a", podRV("1", "5"), podRV("2", "9"), "5"},
	} {
		if got := newest(tc.a, tc.b); got.ResourceVersion != tc.want {
			t.Errorf("%s: newest %s, want %s", tc.name, got.ResourceVersion, tc.want)
		}
	}
}

// TestDeleteOnTerminatedUsesItsWrites: the informer's copy lags behind the
// status virtual-kubelet just wrote; the final status is written against
// that newer object (no conflict, no GET), or not at all when that write
// already carried it, and the pod is marked final while it is written and
// forgotten once its object is gone (the informer's DELETE).
func TestDeleteOnTerminatedUsesItsWrites(t *testing.T) {
	now := metav1.Now()
	meta := metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", DeletionTimestamp: &now, ResourceVersion: "6"}
	running, final := runningStatus(), killedStatus()
	for _, tc := range []struct {
		name        string
		writtenStat v1.PodStatus
		want        []string
	}{
		{"the last write showed containers running: final written on it", running, []string{"status@6", "delete"}},
		{"the last write carried the final status: only deleted", final, []string{"delete"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewSimpleClientset(&v1.Pod{ObjectMeta: meta, Status: tc.writtenStat})
			writes := NewStatusWrites()
			var calls []string
			client.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				calls = append(calls, "get")
				return false, nil, nil
			})
			client.PrependReactor("update", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				obj := a.(k8stesting.UpdateAction).GetObject().(*v1.Pod)
				calls = append(calls, "status@"+obj.ResourceVersion)
				if !writes.IsFinal("u1") {
					t.Error("the final status is written before the pod is marked final")
				}
				return false, nil, nil
			})
			client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				calls = append(calls, "delete")
				return false, nil, nil
			})
			lastWrite := &v1.Pod{ObjectMeta: meta, Status: tc.writtenStat}
			recordWrite(writes, lastWrite)
			staleMeta := meta
			staleMeta.ResourceVersion = "4"
			informer := listerOf(t, &v1.Pod{ObjectMeta: staleMeta, Status: running})
			if err := DeleteOnTerminated(client.CoreV1(), informer, writes)(context.Background(), &v1.Pod{ObjectMeta: meta, Status: final}); err != nil {
				t.Fatal(err)
			}
			if strings.Join(calls, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("calls %v, want %v", calls, tc.want)
			}
			// Still final until the informer sees the object go (a
			// finalizer may keep it after an accepted DELETE).
			if _, ok := writes.Begin("u1"); ok {
				t.Error("a status write after the DELETE was allowed before the object went")
			}
			ForgetDeleted(writes).OnDelete(&v1.Pod{ObjectMeta: meta})
			if writes.Len() != 0 {
				t.Errorf("the deleted pod is still recorded after the informer's DELETE")
			}
		})
	}
}

// Finalize waits for the writes in flight and returns their result; the
// writes that start after it are refused; a write that never ends holds
// it only until its context ends.
func TestStatusWritesFinalizeWaitsForWritesInFlight(t *testing.T) {
	w := NewStatusWrites()
	recordWrite(w, podRV("1", "5"))
	end1, ok := w.Begin("u1")
	if !ok {
		t.Fatal("a write before the pod is final was refused")
	}
	got := make(chan *v1.Pod)
	go func() { got <- w.Finalize(context.Background(), "u1") }()
	select {
	case p := <-got:
		t.Fatalf("Finalize returned %v while a write was in flight", p)
	case <-time.After(50 * time.Millisecond):
	}
	end1(podRV("1", "9"))
	select {
	case p := <-got:
		if p == nil || p.ResourceVersion != "9" {
			t.Fatalf("Finalize returned %v, want the write in flight's result (9)", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Finalize did not return after the write ended")
	}
	if _, ok := w.Begin("u1"); ok {
		t.Error("a write after Finalize was let through")
	}

	end2, ok := w.Begin("u2")
	if !ok {
		t.Fatal("u2 refused")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if p := w.Finalize(ctx, "u2"); p != nil {
		t.Errorf("Finalize of a pod never written returned %v", p)
	}
	end2(nil) // a failed write records nothing
	if w.Last("u2") != nil {
		t.Error("a failed write was recorded")
	}
}

// A write still in flight when the pod is forgotten (its object gone)
// records nothing when it ends, and does not end the count of a later
// write of the same UID; Forget releases a Finalize waiting for it.
func TestStatusWritesForgetDuringAWrite(t *testing.T) {
	w := NewStatusWrites()
	endA, _ := w.Begin("u1")
	done := make(chan *v1.Pod)
	go func() { done <- w.Finalize(context.Background(), "u1") }()
	// Forget once Finalize has marked the pod and is waiting.
	for deadline := time.Now().Add(5 * time.Second); !w.IsFinal("u1"); {
		if time.Now().After(deadline) {
			t.Fatal("Finalize did not mark the pod final")
		}
		goruntime.Gosched()
	}
	w.Forget("u1")
	select {
	case p := <-done:
		if p != nil {
			t.Errorf("Finalize of a forgotten pod returned %v", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Forget did not release Finalize")
	}
	endB, ok := w.Begin("u1") // final was forgotten with the rest
	if !ok {
		t.Fatal("a write after Forget was refused")
	}
	endA(podRV("1", "7"))
	if w.Last("u1") != nil {
		t.Error("the forgotten write was recorded")
	}
	got := make(chan *v1.Pod)
	go func() { got <- w.Finalize(context.Background(), "u1") }()
	select {
	case p := <-got:
		t.Fatalf("Finalize returned %v while the later write was in flight", p)
	case <-time.After(50 * time.Millisecond):
	}
	endB(podRV("1", "8"))
	if p := <-got; p == nil || p.ResourceVersion != "8" {
		t.Errorf("Finalize returned %v, want the later write (8)", p)
	}
	w.Forget("u1")
	if w.Len() != 0 {
		t.Errorf("%d pods left", w.Len())
	}
}

// A pod someone else deleted first (a forced delete, the pod GC) leaves
// nothing recorded.
func TestDeleteOnTerminatedForgetsAPodGoneAlready(t *testing.T) {
	now := metav1.Now()
	client := fake.NewSimpleClientset()
	writes := NewStatusWrites()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", DeletionTimestamp: &now}}
	if err := DeleteOnTerminated(client.CoreV1(), nil, writes)(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if writes.Len() != 0 || writes.IsFinal("u1") {
		t.Errorf("a pod deleted by someone else is still recorded (%d)", writes.Len())
	}
}
