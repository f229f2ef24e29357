package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestCrivkRestartKeepsPods stops crivk with SIGTERM while a pod runs and
// starts it again: the pod's container must keep running (same container ID,
// no restart) and crivk must adopt it rather than start it twice.
func TestCrivkRestartKeepsPods(t *testing.T) {
	ns := newNamespace(t)
	pod := createPod(t, ns, busyboxPod("survivor", v1.RestartPolicyAlways, "exec sleep 3600"))
	p := waitPod(t, ns, pod.Name, 60*time.Second, "Running", isRunningReady)
	before := p.Status.ContainerStatuses[0].ContainerID

	if err := stopCrivkFor(t); err != nil {
		t.Fatalf("crivk did not stop cleanly on SIGTERM: %v", err)
	}
	if sb, c := runtimeObjects(t, p.UID); sb != 1 || c != 1 {
		t.Fatalf("with crivk stopped the runtime holds %d sandboxes and %d containers, want the running 1 and 1", sb, c)
	}
	if err := startCrivkFor(t); err != nil {
		t.Fatalf("restarting crivk: %v", err)
	}
	// crivk's own view (the node API's /runningpods/, through the API server proxy)
	// must show the pod adopted with its old container.
	ctx := testContext(t, 60*time.Second)
	var seen string
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		raw, err := client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", nodeName, "proxy", "runningpods/").DoRaw(ctx)
		if err != nil {
			seen = err.Error()
			return false, nil
		}
		var list v1.PodList
		if err := json.Unmarshal(raw, &list); err != nil {
			return false, err
		}
		for _, rp := range list.Items {
			if rp.UID == p.UID && len(rp.Status.ContainerStatuses) == 1 {
				seen = rp.Status.ContainerStatuses[0].ContainerID
				return seen == before && rp.Status.ContainerStatuses[0].State.Running != nil, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("crivk never reported the pod adopted with container %s: %v (last seen: %s)", before, err, seen)
	}
	// The adopted pod stays Running with the same container.
	p = waitPod(t, ns, pod.Name, 60*time.Second, "Running after the restart", isRunningReady)
	cs := p.Status.ContainerStatuses[0]
	if cs.ContainerID != before || cs.RestartCount != 0 {
		t.Errorf("after the restart container %s (restarts %d), want the same %s with 0 restarts", cs.ContainerID, cs.RestartCount, before)
	}
	if sb, c := runtimeObjects(t, p.UID); sb != 1 || c != 1 {
		t.Errorf("after the restart the runtime holds %d sandboxes and %d containers, want 1 and 1", sb, c)
	}
}

// TestOrphanCleanedOnStart deletes a running pod from the API while crivk is
// down: on its next start crivk must stop and remove what the runtime still
// holds of it.
func TestOrphanCleanedOnStart(t *testing.T) {
	ns := newNamespace(t)
	pod := createPod(t, ns, busyboxPod("orphan", v1.RestartPolicyAlways, "exec sleep 3600"))
	p := waitPod(t, ns, pod.Name, 60*time.Second, "Running", isRunningReady)

	if err := stopCrivkFor(t); err != nil {
		t.Fatalf("crivk did not stop cleanly on SIGTERM: %v", err)
	}
	zero := int64(0)
	if err := client.CoreV1().Pods(ns).Delete(testContext(t, 10*time.Second), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ns, pod.Name, 10*time.Second)
	if sb, c := runtimeObjects(t, p.UID); sb != 1 || c != 1 {
		t.Fatalf("with crivk down the runtime holds %d sandboxes and %d containers of the deleted pod, want 1 and 1", sb, c)
	}
	if err := startCrivkFor(t); err != nil {
		t.Fatalf("restarting crivk: %v", err)
	}
	ctx := testContext(t, 60*time.Second)
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		sb, c := runtimeObjects(t, p.UID)
		return sb == 0 && c == 0, nil
	})
	if err != nil {
		sb, c := runtimeObjects(t, p.UID)
		t.Fatalf("60s after the restart the runtime still holds %d sandboxes and %d containers of the deleted pod", sb, c)
	}
}
