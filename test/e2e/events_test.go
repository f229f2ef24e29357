package e2e

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

// podEvents lists the events of an object in ns by name, oldest first.
func podEvents(ctx context.Context, ns, kind, name string) ([]v1.Event, error) {
	sel := fields.Set{"involvedObject.kind": kind, "involvedObject.name": name}.AsSelector().String()
	l, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func describe(evs []v1.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "  %s\t%s\t%s\t%s\t%s\t%s\n", eventTime(e).UTC().Format(time.TimeOnly), e.Type, e.Reason, e.Source.Component, e.InvolvedObject.FieldPath, e.Message)
	}
	return b.String()
}

// waitEvent waits until the pod has an event of that type and reason
// whose message starts with msg, from the node's agent ("kubelet").
func waitEvent(t *testing.T, ns, pod, typ, reason, msg string) v1.Event {
	t.Helper()
	return waitObjectEvent(t, ns, "Pod", pod, typ, reason, msg)
}

func waitObjectEvent(t *testing.T, ns, kind, name, typ, reason, msg string) v1.Event {
	t.Helper()
	return waitObjectEventSince(t, ns, kind, name, typ, reason, msg, time.Time{})
}

// waitObjectEventSince is waitObjectEvent for an event last recorded at
// or after since (the events' times have a second's precision).
func waitObjectEventSince(t *testing.T, ns, kind, name, typ, reason, msg string, since time.Time) v1.Event {
	t.Helper()
	since = since.Truncate(time.Second)
	ctx := testContext(t, 60*time.Second)
	var evs []v1.Event
	var found v1.Event
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		l, err := podEvents(ctx, ns, kind, name)
		if err != nil {
			return false, nil // the last list seen is kept for the failure message
		}
		evs = l
		for _, e := range evs {
			if e.Type == typ && e.Reason == reason && strings.HasPrefix(e.Message, msg) && e.Source.Component == "kubelet" && !eventTime(e).Before(since) {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("%s %s/%s: no %s event %s %q since %s; events:\n%s", kind, ns, name, typ, reason, msg, since.UTC().Format(time.TimeOnly), describe(evs))
	}
	return found
}

// The events of a pod's life as `kubectl describe pod` shows them, with
// the kubelet's reasons and messages: the image already present, the
// container created and started, then killed on deletion.
func TestEventsOfAPodsLife(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	pod := createPod(t, ns, busyboxPod("life", v1.RestartPolicyAlways, "sleep 600"))
	waitPod(t, ns, pod.Name, 30*time.Second, "Running", isRunningReady)
	waitEvent(t, ns, pod.Name, v1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine", busybox))
	waitEvent(t, ns, pod.Name, v1.EventTypeNormal, "Created", "Created container: c")
	waitEvent(t, ns, pod.Name, v1.EventTypeNormal, "Started", "Started container c")
	if err := client.CoreV1().Pods(ns).Delete(testContext(t, 10*time.Second), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, ns, pod.Name, v1.EventTypeNormal, "Killing", "Stopping container c")
}

// A container that keeps failing: BackOff with the kubelet's message.
func TestEventsBackOff(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	pod := createPod(t, ns, busyboxPod("crash", v1.RestartPolicyAlways, "exit 1"))
	waitEvent(t, ns, pod.Name, v1.EventTypeWarning, "BackOff", "Back-off restarting failed container c in pod crash")
}

// An image that is not there with imagePullPolicy Never.
func TestEventsErrImageNeverPull(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	p := busyboxPod("never", v1.RestartPolicyAlways, "sleep 600")
	p.Spec.Containers[0].Image = "registry.invalid/none:1"
	p.Spec.Containers[0].ImagePullPolicy = v1.PullNever
	pod := createPod(t, ns, p)
	waitEvent(t, ns, pod.Name, v1.EventTypeWarning, "ErrImageNeverPull", `Container image "registry.invalid/none:1" is not present with pull policy of Never`)
}

// eventTime is when an event was last recorded: LastTimestamp (the
// core/v1 recorder's), else EventTime, else FirstTimestamp.
func eventTime(e v1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

// The node's own events when crivk starts: Starting and NodeReady, in the
// kubelet's words, recorded by the running crivk (since its start: crivk
// restarts many times in the suite, and an earlier process's events prove
// nothing of this one's).
func TestEventsNode(t *testing.T) {
	since := crivkStartedAt
	waitObjectEventSince(t, "default", "Node", nodeName, v1.EventTypeNormal, "Starting", "Starting kubelet.", since)
	waitObjectEventSince(t, "default", "Node", nodeName, v1.EventTypeNormal, "NodeReady", fmt.Sprintf("Node %s status is now: NodeReady", nodeName), since)
}
