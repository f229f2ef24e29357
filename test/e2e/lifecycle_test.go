package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestRestartPolicyMatrix runs a container that exits with 0 or 1 under
// each restart policy and checks the kubelet's outcome: a terminal phase
// for Never and for OnFailure with 0, restarts otherwise.
func TestRestartPolicyMatrix(t *testing.T) {
	ns := newNamespace(t)
	tests := []struct {
		policy   v1.RestartPolicy
		exit     int
		phase    v1.PodPhase // terminal phase, or "" when the container restarts
		reason   string      // terminated reason of a terminal pod
		restarts bool
	}{
		{v1.RestartPolicyNever, 0, v1.PodSucceeded, "Completed", false},
		{v1.RestartPolicyNever, 1, v1.PodFailed, "Error", false},
		{v1.RestartPolicyOnFailure, 0, v1.PodSucceeded, "Completed", false},
		{v1.RestartPolicyOnFailure, 1, "", "", true},
		{v1.RestartPolicyAlways, 0, "", "", true},
		{v1.RestartPolicyAlways, 1, "", "", true},
	}
	for _, tc := range tests {
		name := fmt.Sprintf("%s-exit-%d", tc.policy, tc.exit)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			podName := fmt.Sprintf("m-%s-%d", map[v1.RestartPolicy]string{"Never": "never", "OnFailure": "onfailure", "Always": "always"}[tc.policy], tc.exit)
			createPod(t, ns, busyboxPod(podName, tc.policy, fmt.Sprintf("sleep 1; exit %d", tc.exit)))
			if !tc.restarts {
				p := waitPod(t, ns, podName, 60*time.Second, string(tc.phase), func(p *v1.Pod) bool { return p.Status.Phase == tc.phase })
				cs := p.Status.ContainerStatuses
				if len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != int32(tc.exit) ||
					cs[0].State.Terminated.Reason != tc.reason || cs[0].RestartCount != 0 {
					t.Fatalf("container status %+v, want terminated %s with exit %d and no restart", cs, tc.reason, tc.exit)
				}
				// Terminal is final: watched for a few syncs, it never changes.
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				w, err := client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{
					FieldSelector: fields.OneTermEqualSelector("metadata.name", podName).String(), ResourceVersion: p.ResourceVersion})
				if err != nil {
					t.Fatal(err)
				}
				defer w.Stop()
				for ev := range w.ResultChan() {
					if q, ok := ev.Object.(*v1.Pod); ok && (q.Status.Phase != tc.phase || q.Status.ContainerStatuses[0].RestartCount != 0) {
						t.Fatalf("terminal pod changed: phase %s restarts %d", q.Status.Phase, q.Status.ContainerStatuses[0].RestartCount)
					}
				}
				return
			}
			p := waitPod(t, ns, podName, 90*time.Second, "a restart", func(p *v1.Pod) bool {
				return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
			})
			if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
				t.Fatalf("restarting pod went %s", p.Status.Phase)
			}
			last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated
			if last == nil || last.ExitCode != int32(tc.exit) {
				t.Fatalf("lastState %+v, want terminated with exit %d", p.Status.ContainerStatuses[0].LastTerminationState, tc.exit)
			}
		})
	}
}

// TestGracePeriod deletes a container that exits on TERM and one that
// ignores it: the first goes at once, the second when its grace period
// ends (and not before).
func TestGracePeriod(t *testing.T) {
	ns := newNamespace(t)
	const grace = 4
	tests := []struct {
		name     string
		script   string
		min, max time.Duration
	}{
		// sh as PID 1 ignores TERM unless it traps it.
		{"exits-on-term", `trap 'exit 0' TERM; while true; do sleep 0.1; done`, 0, 3 * time.Second},
		{"ignores-term", `while true; do sleep 0.1; done`, grace * time.Second, (grace + 5) * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pod := busyboxPod(tc.name, v1.RestartPolicyAlways, tc.script)
			g := int64(grace)
			pod.Spec.TerminationGracePeriodSeconds = &g
			pod = createPod(t, ns, pod)
			p := waitPod(t, ns, pod.Name, 60*time.Second, "Running", isRunningReady)
			start := time.Now()
			if err := client.CoreV1().Pods(ns).Delete(testContext(t, 10*time.Second), pod.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			waitGone(t, ns, pod.Name, 30*time.Second)
			took := time.Since(start)
			t.Logf("%s: pod gone %v after the delete call (grace %ds)", tc.name, took.Round(time.Millisecond), grace)
			if took < tc.min || took > tc.max {
				t.Errorf("pod gone after %v, want between %v and %v", took, tc.min, tc.max)
			}
			// virtual-kubelet force-deletes the object when the grace period
			// ends, racing with crivk's own removal for the container that
			// ignores TERM: the runtime must be clean shortly after.
			ctx := testContext(t, 10*time.Second)
			err := wait.PollUntilContextCancel(ctx, poll, true, func(context.Context) (bool, error) {
				sb, c := runtimeObjects(t, p.UID)
				return sb+c == 0, nil
			})
			if err != nil {
				sb, c := runtimeObjects(t, p.UID)
				t.Errorf("10s after deletion the runtime still holds %d sandboxes and %d containers", sb, c)
			}
		})
	}
}

// TestDeleteWhileCreating deletes pods at successive stages of their start
// (at once, once bound, once the runtime holds a sandbox, once Running):
// each goes, and nothing of it is left in the runtime.
func TestDeleteWhileCreating(t *testing.T) {
	t.Parallel() // pods of its own namespace only: runs beside TestVolumeTokenRefresh's 8-minute wait
	ns := newNamespace(t)
	stages := []struct {
		what  string
		ready func(p *v1.Pod) bool
	}{
		{"created", func(*v1.Pod) bool { return true }},
		{"bound to the node", func(p *v1.Pod) bool { return p.Spec.NodeName != "" }},
		{"holding a sandbox", func(p *v1.Pod) bool { sb, _ := runtimeObjects(t, p.UID); return sb > 0 }},
		{"Running", isRunningReady},
	}
	n := len(stages)
	var uids []string
	for i, st := range stages {
		p := createPod(t, ns, busyboxPod(fmt.Sprintf("early-%d", i), v1.RestartPolicyAlways, "exec sleep 3600"))
		uids = append(uids, string(p.UID))
		waitPod(t, ns, p.Name, 60*time.Second, st.what, st.ready)
		if err := client.CoreV1().Pods(ns).Delete(testContext(t, 10*time.Second), p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		waitGone(t, ns, fmt.Sprintf("early-%d", i), 60*time.Second)
	}
	ctx := testContext(t, 30*time.Second)
	err := wait.PollUntilContextCancel(ctx, poll, true, func(context.Context) (bool, error) {
		for _, uid := range uids {
			if sb, c := runtimeObjects(t, types.UID(uid)); sb+c != 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		for _, uid := range uids {
			sb, c := runtimeObjects(t, types.UID(uid))
			t.Errorf("pod %s: the runtime still holds %d sandboxes and %d containers", uid, sb, c)
		}
	}
}
