package helm

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
)

// soakPoll is how often the soak reads crivk's pod and Lease: well under
// the Lease's renewal period (10 s), so an age over maxLeaseAge is seen.
const soakPoll = 2 * time.Second

// daemonSetPod is the one running pod of crivk's DaemonSet.
func (e *env) daemonSetPod(t *testing.T) *v1.Pod {
	t.Helper()
	l, err := e.client.CoreV1().Pods(namespace).List(ctxT(t, 10*time.Second), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=crivk"})
	if err != nil {
		t.Fatal(err)
	}
	var live []*v1.Pod
	for i := range l.Items {
		if l.Items[i].DeletionTimestamp == nil {
			live = append(live, &l.Items[i])
		}
	}
	if len(live) != 1 {
		t.Fatalf("%d pods of crivk's DaemonSet, want 1", len(live))
	}
	return live[0]
}

// soak watches the install for d (issue #32): every soakPoll, crivk's
// DaemonSet pod is the same pod, none of its containers has restarted,
// and the Lease of crivk's node was renewed within maxLeaseAge. The first
// miss fails the test, saying which container restarted and why (its last
// exit and the pod's warning events, e.g. a failing liveness probe).
func (e *env) soak(t *testing.T, d time.Duration) {
	t.Helper()
	p0 := e.daemonSetPod(t)
	for _, s := range p0.Status.ContainerStatuses {
		if s.RestartCount != 0 {
			t.Fatalf("before the soak: container %s of crivk's pod %s already restarted %d times (%s)%s", s.Name, p0.Name, s.RestartCount, lastExit(s), e.warnings(p0))
		}
	}
	start := time.Now()
	var maxAge time.Duration
	reads := 0
	err := wait.PollUntilContextTimeout(context.Background(), soakPoll, d, true, func(context.Context) (bool, error) {
		// Not the window's context: a read near its end would fail on the
		// deadline and read as a failure of crivk.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		at := time.Since(start).Round(time.Second)
		p, err := e.client.CoreV1().Pods(namespace).Get(ctx, p0.Name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("%s into the soak: crivk's pod %s: %w", at, p0.Name, err)
		}
		if p.UID != p0.UID {
			return false, fmt.Errorf("%s into the soak: crivk's pod %s was replaced (uid %s, was %s)", at, p.Name, p.UID, p0.UID)
		}
		for _, s := range append(append([]v1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			if s.RestartCount != 0 {
				return false, fmt.Errorf("%s into the soak: container %s of crivk's pod %s restarted (restartCount %d; %s)%s",
					at, s.Name, p.Name, s.RestartCount, lastExit(s), e.warnings(p))
			}
		}
		l, err := e.client.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, e.crivkNode, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("%s into the soak: the Lease of node %s: %w", at, e.crivkNode, err)
		}
		if l.Spec.RenewTime == nil {
			return false, fmt.Errorf("%s into the soak: the Lease of node %s was never renewed", at, e.crivkNode)
		}
		age := time.Since(l.Spec.RenewTime.Time)
		if age > maxLeaseAge {
			return false, fmt.Errorf("%s into the soak: the Lease of node %s was last renewed %s ago (at most %s)", at, e.crivkNode, age.Round(100*time.Millisecond), maxLeaseAge)
		}
		maxAge = max(maxAge, age)
		reads++
		return false, nil // the whole window must pass
	})
	if !wait.Interrupted(err) {
		t.Fatalf("soak of the install: %v", err)
	}
	t.Logf("soak %s: crivk's pod %s kept all its containers (restartCount 0), the Lease of %s at most %s old (%d reads)",
		d, p0.Name, e.crivkNode, maxAge.Round(100*time.Millisecond), reads)
}

// warnings lists the pod's Warning events (the kubelet's probe failures
// and back-offs), one an indented line, "" when none.
func (e *env) warnings(p *v1.Pod) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sel := fields.Set{"involvedObject.kind": "Pod", "involvedObject.name": p.Name, "type": v1.EventTypeWarning}.AsSelector().String()
	l, err := e.client.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil || len(l.Items) == 0 {
		return ""
	}
	var sb strings.Builder
	sb.WriteString("; the pod's warnings:")
	for _, ev := range l.Items {
		fmt.Fprintf(&sb, "\n    %s (x%d): %s", ev.Reason, ev.Count, strings.TrimSpace(ev.Message))
	}
	return sb.String()
}
