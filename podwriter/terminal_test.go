package podwriter

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// succeededPod is a finished pod of one container, c, with the node's
// PodReadyToStartContainers condition set to ready and a readiness gate
// another writer set.
func succeededPod(ready v1.ConditionStatus) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", ResourceVersion: "5"},
		Status: v1.PodStatus{Phase: v1.PodSucceeded,
			Conditions: []v1.PodCondition{
				{Type: v1.PodReadyToStartContainers, Status: ready},
				{Type: "example.com/gate", Status: v1.ConditionTrue},
			},
			ContainerStatuses: []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}}}}}
}

// TestWriteTerminal: the status changes of a pod whose API object is
// terminal are written directly (virtual-kubelet skips them), and only
// those.
func TestWriteTerminal(t *testing.T) {
	notReady := succeededPod(v1.ConditionFalse)
	notReady.Status.Conditions = notReady.Status.Conditions[:1] // the engine's: no gate
	failed := notReady.DeepCopy()
	failed.Status.Phase = v1.PodFailed
	running := notReady.DeepCopy()
	running.Status.Phase = v1.PodRunning
	runningAPI := succeededPod(v1.ConditionTrue)
	runningAPI.Status.Phase = v1.PodRunning
	for _, tc := range []struct {
		name      string
		api       *v1.Pod // the object, in the API and the informer; nil: none
		inCache   bool    // the informer holds api
		status    *v1.Pod // handed by the engine
		conflicts int     // UpdateStatus answers 409 so many times first
		final     bool    // the deletion path owns the pod's status
		wantWrite bool
	}{
		{name: "Succeeded pod, PodReadyToStartContainers turns False: written", api: succeededPod(v1.ConditionTrue), inCache: true, status: notReady, wantWrite: true},
		{name: "written after conflicts, against a fresh GET", api: succeededPod(v1.ConditionTrue), inCache: true, status: notReady, conflicts: 2, wantWrite: true},
		{name: "same status: nothing to write", api: func() *v1.Pod { p := succeededPod(v1.ConditionFalse); return p }(), inCache: true, status: notReady},
		{name: "terminal phase would change: refused", api: succeededPod(v1.ConditionTrue), inCache: true, status: failed},
		{name: "non-terminal status: virtual-kubelet's", api: runningAPI, inCache: true, status: running},
		{name: "API object not terminal yet: virtual-kubelet's", api: runningAPI, inCache: true, status: notReady},
		{name: "pod gone from the informer: nothing", status: notReady},
		{name: "pod gone from the API (NotFound): no error", api: succeededPod(v1.ConditionTrue), inCache: true, status: notReady},
		{name: "deletion path writes the final status: left to it", api: succeededPod(v1.ConditionTrue), inCache: true, status: notReady, final: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			gone := tc.name == "pod gone from the API (NotFound): no error"
			if tc.api != nil && !gone {
				objs = append(objs, tc.api.DeepCopy())
			}
			client := fake.NewSimpleClientset(objs...)
			conflicts, updates := tc.conflicts, 0
			client.PrependReactor("update", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "status" {
					return false, nil, nil
				}
				updates++
				if conflicts > 0 {
					conflicts--
					return true, nil, apierrors.NewConflict(v1.Resource("pods"), "p", fmt.Errorf("the object has been modified"))
				}
				return false, nil, nil
			})
			lister := listerOf(t)
			if tc.inCache {
				lister = listerOf(t, tc.api)
			}
			writes := NewStatusWrites()
			if tc.final {
				writes.Finalize(context.Background(), "u1")
			}
			WriteTerminal(client.CoreV1(), lister, writes)(context.Background(), tc.status.DeepCopy())

			wantUpdates := 0
			if tc.wantWrite {
				wantUpdates = tc.conflicts + 1
			}
			if gone {
				wantUpdates = 1 // tried once, NotFound
			}
			if updates != wantUpdates {
				t.Fatalf("%d status updates, want %d", updates, wantUpdates)
			}
			if !tc.wantWrite || gone {
				return
			}
			got, err := client.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.Phase != v1.PodSucceeded {
				t.Errorf("phase %s, want Succeeded", got.Status.Phase)
			}
			if !hasCondition(got.Status.Conditions, "example.com/gate") {
				t.Errorf("other writer's condition lost: %v", got.Status.Conditions)
			}
			for _, c := range got.Status.Conditions {
				if c.Type == v1.PodReadyToStartContainers && c.Status != v1.ConditionFalse {
					t.Errorf("PodReadyToStartContainers %s, want False", c.Status)
				}
			}
			if last := writes.Last("u1"); last == nil || last.Status.Phase != v1.PodSucceeded {
				t.Errorf("write not recorded in StatusWrites: %v", last)
			}
		})
	}
}

// TestWriteTerminalAfterVirtualKubeletsWrite: the informer still shows the
// pod Running, but virtual-kubelet's write of Succeeded landed (recorded)
// or is in flight: virtual-kubelet will skip the next status, so it is
// written directly, from the object that write returned.
func TestWriteTerminalAfterVirtualKubeletsWrite(t *testing.T) {
	for _, inFlight := range []bool{false, true} {
		t.Run(fmt.Sprintf("in flight %v", inFlight), func(t *testing.T) {
			api := succeededPod(v1.ConditionTrue)
			client := fake.NewSimpleClientset(api.DeepCopy())
			informer := api.DeepCopy()
			informer.ResourceVersion = "4"
			informer.Status.Phase = v1.PodRunning
			writes := NewStatusWrites()
			end, ok := writes.Begin(api.UID)
			if !ok {
				t.Fatal("Begin refused")
			}
			done := make(chan struct{})
			status := succeededPod(v1.ConditionFalse)
			status.Status.Conditions = status.Status.Conditions[:1]
			write := func() {
				WriteTerminal(client.CoreV1(), listerOf(t, informer), writes)(context.Background(), status)
				close(done)
			}
			if inFlight {
				go write()
				end(api.DeepCopy())
			} else {
				end(api.DeepCopy())
				write()
			}
			<-done
			got, err := client.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.Conditions[0].Status != v1.ConditionFalse || !hasCondition(got.Status.Conditions, "example.com/gate") {
				t.Errorf("conditions %v, want PodReadyToStartContainers False and the gate", got.Status.Conditions)
			}
		})
	}
}
