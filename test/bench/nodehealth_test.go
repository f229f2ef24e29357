package main

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestNodeHealth: each sample counts a node that is not Ready (or cannot
// be read) and keeps the oldest lease age seen.
func TestNodeHealth(t *testing.T) {
	now := time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}}}
	renewed := metav1.NewMicroTime(now.Add(-12 * time.Second))
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n", Namespace: v1.NamespaceNodeLease}, Spec: coordinationv1.LeaseSpec{RenewTime: &renewed}}
	cs := fake.NewSimpleClientset(node, lease)
	h := &nodeHealth{client: cs, node: "n", period: time.Second, now: func() time.Time { return now }}
	ctx := context.Background()
	h.sample(ctx)
	node.Status.Conditions[0].Status = v1.ConditionUnknown
	if _, err := cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(30 * time.Second) // the lease is 42 s old: expired
	h.sample(ctx)
	if err := cs.CoreV1().Nodes().Delete(ctx, "n", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.sample(ctx)
	samples, notReady, maxAge := h.result()
	if samples != 3 || notReady != 2 || maxAge != 42*time.Second {
		t.Errorf("samples %d, not Ready %d, oldest lease %v; want 3, 2, 42s", samples, notReady, maxAge)
	}
}
