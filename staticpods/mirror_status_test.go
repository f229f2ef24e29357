package staticpods

import (
	"context"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// TestMirrorStatusWrittenBack: a status crivk wrote to a mirror pod is not
// written again while the lister shows the object that write replaced (a
// lagging informer) or made; once another writer changed it (the node
// lifecycle controller's MarkPodsNotReady), it is written back, as the
// kubelet's status manager writes a static pod's cached status back to its
// mirror pod (needsReconcile through the mirror's UID).
func TestMirrorStatusWrittenBack(t *testing.T) {
	static, err := decodeManifest([]byte(manifest), "/etc/m/web.yaml", "n1", seen)
	if err != nil {
		t.Fatal(err)
	}
	e := newMirrorEnv(t, static)
	// The fake API keeps no resourceVersions; give every write a new one.
	rv := 0
	e.client.PrependReactor("*", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if o, ok := a.(interface{ GetObject() runtime.Object }); ok && (a.GetVerb() == "create" || a.GetVerb() == "update") {
			rv++
			o.GetObject().(*v1.Pod).ResourceVersion = strconv.Itoa(rv)
		}
		return false, nil, nil
	})
	statusWrites := func() int {
		n := 0
		for _, a := range e.client.Actions() {
			if a.GetVerb() == "update" && a.GetSubresource() == "status" {
				n++
			}
		}
		return n
	}
	ready := func(p *v1.Pod) v1.ConditionStatus {
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady {
				return c.Status
			}
		}
		return ""
	}
	e.reconcile(t) // creates the mirror
	running := static.DeepCopy()
	running.Status = v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}}
	e.m.SetStatus(running)

	// Written once; the lister not yet showing the write (it shows the
	// object the write replaced) causes no second write, nor does the
	// lister showing it.
	for i := range 2 {
		if err := e.m.Reconcile(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := statusWrites(); n != 1 {
			t.Fatalf("reconcile %d with a lagging lister: %d status writes, want 1", i, n)
		}
	}
	e.refresh(t)
	e.reconcile(t)
	if n := statusWrites(); n != 1 {
		t.Fatalf("%d status writes once the lister shows the write, want 1", n)
	}

	// The controller marks the pod not Ready: written back.
	mirror := e.get(t, "web-n1")
	mirror.Status.Conditions[0].Status = v1.ConditionFalse
	if _, err := e.client.CoreV1().Pods("default").UpdateStatus(context.Background(), mirror, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.refresh(t)
	before := statusWrites()
	e.reconcile(t)
	if got := ready(e.get(t, "web-n1")); got != v1.ConditionTrue {
		t.Errorf("mirror pod's Ready %q after the controller's mark and a reconcile, want True written back", got)
	}
	if n := statusWrites() - before; n != 1 {
		t.Errorf("%d status writes to write Ready back, want 1", n)
	}
	// And not again.
	e.reconcile(t)
	if n := statusWrites() - before; n != 1 {
		t.Errorf("%d status writes after another reconcile, want still 1", n)
	}
}
