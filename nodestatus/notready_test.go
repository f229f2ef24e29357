package nodestatus

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/crivk/crivk/cri"
)

func testReporter(cs *fake.Clientset, now time.Time) *NotReadyReporter {
	return &NotReadyReporter{
		Name: "n1", Nodes: cs.CoreV1().Nodes(), Period: time.Second, Now: func() time.Time { return now },
		Build: func(rd cri.Readiness, now time.Time) (*v1.Node, error) {
			return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
				Status: v1.NodeStatus{Conditions: NodeConditions(nil, rd, nil, now)}}, nil
		},
	}
}

func apiReady(t *testing.T, cs *fake.Clientset) v1.NodeCondition {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c
		}
	}
	t.Fatalf("node has no Ready condition: %v", n.Status.Conditions)
	return v1.NodeCondition{}
}

func TestNotReadyReporterRegistersAMissingNode(t *testing.T) {
	cs := fake.NewClientset()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	if err := testReporter(cs, now).report(context.Background(), RuntimeDownMessage); err != nil {
		t.Fatal(err)
	}
	c := apiReady(t, cs)
	if c.Status != v1.ConditionFalse || c.Reason != "KubeletNotReady" || c.Message != "container runtime is down" {
		t.Errorf("Ready = %s %s %q, want False KubeletNotReady %q", c.Status, c.Reason, c.Message, RuntimeDownMessage)
	}
}

func TestNotReadyReporterUpdatesAnExistingNode(t *testing.T) {
	then := time.Date(2026, 11, 24, 11, 0, 0, 0, time.UTC)
	now := then.Add(time.Hour)
	existing := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{
		Conditions: append(NodeConditions(nil, cri.Readiness{RuntimeReady: true, NetworkReady: true}, nil, then),
			v1.NodeCondition{Type: v1.NodeNetworkUnavailable, Status: v1.ConditionFalse, Reason: "RouteCreated"}),
		NodeInfo: v1.NodeSystemInfo{ContainerRuntimeVersion: "containerd://1.6.20"},
	}}
	cs := fake.NewClientset(existing)
	r := testReporter(cs, now)
	if err := r.report(context.Background(), RuntimeDownMessage); err != nil {
		t.Fatal(err)
	}
	c := apiReady(t, cs)
	if c.Status != v1.ConditionFalse || c.Message != RuntimeDownMessage {
		t.Errorf("Ready = %s %q, want False %q", c.Status, c.Message, RuntimeDownMessage)
	}
	if !c.LastTransitionTime.Time.Equal(now) || !c.LastHeartbeatTime.Time.Equal(now) {
		t.Errorf("Ready transition %v heartbeat %v, want both %v", c.LastTransitionTime, c.LastHeartbeatTime, now)
	}
	n, _ := cs.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if !hasCondition(n.Status.Conditions, v1.NodeNetworkUnavailable) {
		t.Errorf("the network provider's condition was dropped: %v", n.Status.Conditions)
	}
	if n.Status.NodeInfo.ContainerRuntimeVersion != "containerd://1.6.20" {
		t.Errorf("node info changed: %+v", n.Status.NodeInfo)
	}
	// A later report only moves the heartbeat.
	later := now.Add(10 * time.Second)
	r.Now = func() time.Time { return later }
	if err := r.report(context.Background(), RuntimeDownMessage); err != nil {
		t.Fatal(err)
	}
	c = apiReady(t, cs)
	if !c.LastTransitionTime.Time.Equal(now) || !c.LastHeartbeatTime.Time.Equal(later) {
		t.Errorf("second report: transition %v heartbeat %v, want %v and %v", c.LastTransitionTime, c.LastHeartbeatTime, now, later)
	}
}

func TestNotReadyReporterStopsWithItsContext(t *testing.T) {
	cs := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { testReporter(cs, time.Now()).Run(ctx); close(done) }()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after its context was cancelled")
	}
}
