package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func podLogs(ctx context.Context, ns, name string, opts *v1.PodLogOptions) (string, error) {
	rc, err := client.CoreV1().Pods(ns).GetLogs(name, opts).Stream(ctx)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

func TestPodRunsWithIPAndLogs(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	pod := createPod(t, ns, busyboxPod("logger", v1.RestartPolicyAlways,
		`for i in 1 2 3 4 5; do echo line-$i; done; exec sleep 3600`))
	p := waitPod(t, ns, pod.Name, 60*time.Second, "Running and Ready", isRunningReady)

	_, podNet, _ := net.ParseCIDR("10.88.0.0/16")
	if ip := net.ParseIP(p.Status.PodIP); ip == nil || !podNet.Contains(ip) {
		t.Errorf("podIP %q not in the CNI range %s", p.Status.PodIP, podNet)
	}
	if p.Status.HostIP != nodeIP {
		t.Errorf("hostIP %q, want %s", p.Status.HostIP, nodeIP)
	}
	if p.Status.StartTime == nil {
		t.Error("startTime not set")
	}
	cs := p.Status.ContainerStatuses
	if len(cs) != 1 || !cs[0].Ready || cs[0].State.Running == nil || !strings.HasPrefix(cs[0].ContainerID, "containerd://") || cs[0].ImageID == "" {
		t.Errorf("container status not kubelet-shaped: %+v", cs)
	}

	ctx := testContext(t, 30*time.Second)
	var logs string
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		l, err := podLogs(ctx, ns, pod.Name, &v1.PodLogOptions{})
		logs = l
		return err == nil && strings.Contains(l, "line-5"), nil
	})
	if err != nil {
		t.Fatalf("logs through the API server never showed line-5: %v (got %q)", err, logs)
	}
	if want := "line-1\nline-2\nline-3\nline-4\nline-5\n"; logs != want {
		t.Errorf("logs %q, want %q", logs, want)
	}
	two := int64(2)
	if l, err := podLogs(ctx, ns, pod.Name, &v1.PodLogOptions{TailLines: &two}); err != nil || l != "line-4\nline-5\n" {
		t.Errorf("tailLines=2: %q, %v", l, err)
	}
	nine := int64(9)
	if l, err := podLogs(ctx, ns, pod.Name, &v1.PodLogOptions{LimitBytes: &nine}); err != nil || l != "line-1\nli" {
		t.Errorf("limitBytes=9: %q, %v", l, err)
	}
	if l, err := podLogs(ctx, ns, pod.Name, &v1.PodLogOptions{Timestamps: true}); err != nil || !strings.Contains(l, "Z line-1") {
		t.Errorf("timestamps: %q, %v", l, err)
	}
	if _, err := podLogs(ctx, ns, pod.Name, &v1.PodLogOptions{Previous: true}); err == nil {
		t.Errorf("previous logs of a container that never restarted: want an error")
	}
}

func TestRestartNeverPhases(t *testing.T) {
	ns := newNamespace(t)
	for _, tc := range []struct {
		name   string
		script string
		phase  v1.PodPhase
		code   int32
		reason string
	}{
		{"exit-zero", "exit 0", v1.PodSucceeded, 0, "Completed"},
		{"exit-one", "exit 1", v1.PodFailed, 1, "Error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			createPod(t, ns, busyboxPod(tc.name, v1.RestartPolicyNever, tc.script))
			p := waitPod(t, ns, tc.name, 60*time.Second, string(tc.phase), func(p *v1.Pod) bool {
				return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
			})
			if p.Status.Phase != tc.phase {
				t.Fatalf("phase %s, want %s", p.Status.Phase, tc.phase)
			}
			term := p.Status.ContainerStatuses[0].State.Terminated
			if term == nil || term.ExitCode != tc.code || term.Reason != tc.reason {
				t.Errorf("terminated state %+v, want exit %d reason %s", term, tc.code, tc.reason)
			}
		})
	}
}

func TestDeleteRunningPodCleansRuntime(t *testing.T) {
	ns := newNamespace(t)
	pod := createPod(t, ns, busyboxPod("trapper", v1.RestartPolicyAlways,
		`trap 'echo got TERM; exit 0' TERM; echo ready; while true; do sleep 0.2; done`))
	p := waitPod(t, ns, pod.Name, 60*time.Second, "Running", isRunningReady)
	if sb, c := runtimeObjects(t, p.UID); sb != 1 || c != 1 {
		t.Fatalf("runtime holds %d sandboxes and %d containers of the running pod, want 1 and 1", sb, c)
	}
	start := time.Now()
	if err := client.CoreV1().Pods(ns).Delete(testContext(t, 10*time.Second), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The container exits on TERM at once; the object must go long before
	// its 30 s grace period.
	waitGone(t, ns, pod.Name, 25*time.Second)
	t.Logf("pod gone %v after the delete call", time.Since(start).Round(time.Millisecond))
	// As on the kubelet, the API object goes once the containers are
	// stopped; the stopped container and sandbox are removed right after.
	var sb, c int
	err := wait.PollUntilContextCancel(testContext(t, 10*time.Second), poll, true, func(context.Context) (bool, error) {
		sb, c = runtimeObjects(t, p.UID)
		return sb == 0 && c == 0, nil
	})
	if err != nil {
		t.Errorf("10 s after deletion the runtime still holds %d sandboxes and %d containers", sb, c)
	}
	t.Logf("runtime clean %v after the delete call", time.Since(start).Round(time.Millisecond))
}

// TestDeletedPodsLastStateIsTerminal: as on the kubelet, whose status
// manager writes the final status before it deletes the object, a deleted
// pod's last stored state (the object of the watch's DELETED event) has a
// terminal phase and every container terminated. Several pods deleted at
// once, so that the final status writes and the deletions race.
func TestDeletedPodsLastStateIsTerminal(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	const n = 6
	for i := 0; i < n; i++ {
		createPod(t, ns, busyboxPod(fmt.Sprintf("last-%d", i), v1.RestartPolicyAlways,
			`trap 'exit 0' TERM; while true; do sleep 0.2; done`))
	}
	for i := 0; i < n; i++ {
		waitPod(t, ns, fmt.Sprintf("last-%d", i), 60*time.Second, "Running", isRunningReady)
	}
	ctx := testContext(t, 90*time.Second)
	l, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rv := l.ResourceVersion
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return client.CoreV1().Pods(ns).Watch(ctx, o)
	}}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, rv, lw)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := 0
	for deleted < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch ended after %d of %d deletions", deleted, n)
			}
			p, isPod := ev.Object.(*v1.Pod)
			if !isPod || ev.Type != watch.Deleted {
				continue
			}
			deleted++
			if p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed {
				t.Errorf("%s deleted in phase %s, want Succeeded or Failed", p.Name, p.Status.Phase)
			}
			for _, c := range p.Status.ContainerStatuses {
				if c.State.Terminated == nil {
					t.Errorf("%s deleted with container %s %+v, want terminated", p.Name, c.Name, c.State)
				}
			}
		case <-ctx.Done():
			t.Fatalf("only %d of %d pods deleted within 90 s", deleted, n)
		}
	}
}

func TestMissingImage(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	pod := busyboxPod("noimage", v1.RestartPolicyAlways, "true")
	pod.Spec.Containers[0].Image = "registry.invalid/crivk/does-not-exist:1.0"
	pod = createPod(t, ns, pod)
	p := waitPod(t, ns, pod.Name, 90*time.Second, "ErrImagePull or ImagePullBackOff", func(p *v1.Pod) bool {
		if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Waiting == nil {
			return false
		}
		r := p.Status.ContainerStatuses[0].State.Waiting.Reason
		return r == "ErrImagePull" || r == "ImagePullBackOff"
	})
	w := p.Status.ContainerStatuses[0].State.Waiting
	if !strings.Contains(w.Message, "registry.invalid/crivk/does-not-exist:1.0") {
		t.Errorf("waiting message %q does not carry the runtime's error about the image", w.Message)
	}
	if p.Status.Phase != v1.PodPending {
		t.Errorf("phase %s, want Pending", p.Status.Phase)
	}
	if err := client.CoreV1().Pods(ns).Delete(testContext(t, 10*time.Second), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ns, pod.Name, 30*time.Second)
	// virtual-kubelet force-deletes a pod object with no running container
	// as soon as it is marked for deletion, before the provider is told, so
	// the sandbox may outlive the object briefly; it must not outlive it long.
	ctx := testContext(t, 30*time.Second)
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		sb, c := runtimeObjects(t, p.UID)
		return sb == 0 && c == 0, nil
	})
	if err != nil {
		sb, c := runtimeObjects(t, p.UID)
		t.Errorf("30s after deletion the runtime still holds %d sandboxes and %d containers", sb, c)
	}
}

func TestCrashLoopBackOff(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	createPod(t, ns, busyboxPod("crasher", v1.RestartPolicyAlways, "echo crashing; exit 3"))
	p := waitPod(t, ns, "crasher", 90*time.Second, "CrashLoopBackOff after a restart", func(p *v1.Pod) bool {
		if len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		cs := p.Status.ContainerStatuses[0]
		return cs.RestartCount >= 1 && cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff"
	})
	cs := p.Status.ContainerStatuses[0]
	if !strings.Contains(cs.State.Waiting.Message, "restarting failed container=c pod=crasher_"+ns) || !strings.HasPrefix(cs.State.Waiting.Message, "back-off ") {
		t.Errorf("waiting message %q, want the kubelet's back-off message", cs.State.Waiting.Message)
	}
	if lt := cs.LastTerminationState.Terminated; lt == nil || lt.ExitCode != 3 || lt.Reason != "Error" {
		t.Errorf("lastState %+v, want terminated with exit 3 reason Error", cs.LastTerminationState)
	}
	if p.Status.Phase != v1.PodRunning {
		t.Errorf("phase %s, want Running (restartPolicy Always)", p.Status.Phase)
	}
	ctx := testContext(t, 30*time.Second)
	if l, err := podLogs(ctx, ns, "crasher", &v1.PodLogOptions{Previous: true}); err != nil || l != "crashing\n" {
		t.Errorf("previous logs: %q, %v", l, err)
	}
}

// TestCrashLoopBackOffTimings checks the restart back-off: a container
// that exits at once is restarted at once the first time, then 10 s and
// 20 s after its previous exit (the kubelet's 10 s doubling back-off).
//
// The attempts are observed in the runtime, not in the pod's status: the
// first two attempts can both start and exit between two status updates (the
// kubelet's status manager coalesces them the same way), so the API may
// never show the first one, while the node keeps each dead instance until
// the instance after next starts (one dead container per container), so a
// 200 ms poll of CRI sees every attempt with nanosecond timestamps. The API
// side is checked too: the restart count and the CrashLoopBackOff reason.
func TestCrashLoopBackOffTimings(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	pod := createPod(t, ns, busyboxPod("backoff", v1.RestartPolicyAlways, "exit 1"))
	type attempt struct{ started, finished time.Time }
	seen := map[string]attempt{} // by container ID: one per attempt
	ctx := testContext(t, 120*time.Second)
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		cs, err := runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
			LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(pod.UID)},
		})
		if err != nil {
			return false, nil
		}
		for _, c := range cs {
			if _, done := seen[c.Id]; done || c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
				continue
			}
			st, err := runtime.ContainerStatus(ctx, c.Id, false)
			if err != nil || st.Status.StartedAt == 0 || st.Status.FinishedAt == 0 {
				continue
			}
			seen[c.Id] = attempt{time.Unix(0, st.Status.StartedAt), time.Unix(0, st.Status.FinishedAt)}
		}
		return len(seen) >= 4, nil
	})
	if err != nil {
		t.Fatalf("waiting for four exited attempts in the runtime: %v (saw %d)", err, len(seen))
	}
	var attempts []attempt
	for _, a := range seen {
		attempts = append(attempts, a)
	}
	sort.Slice(attempts, func(i, j int) bool { return attempts[i].started.Before(attempts[j].started) })
	want := []struct{ min, max time.Duration }{
		{0, 3 * time.Second},                 // first restart: no back-off yet
		{9 * time.Second, 14 * time.Second},  // 10 s
		{19 * time.Second, 25 * time.Second}, // 20 s
	}
	for i, w := range want {
		gap := attempts[i+1].started.Sub(attempts[i].finished)
		t.Logf("restart %d: %s after the previous exit", i+1, gap.Round(time.Millisecond))
		if gap < w.min || gap > w.max {
			t.Errorf("restart %d came %s after the previous exit, want between %s and %s", i+1, gap, w.min, w.max)
		}
	}
	waitPod(t, ns, "backoff", 30*time.Second, "restart count 3 and CrashLoopBackOff", func(p *v1.Pod) bool {
		if len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		cs := p.Status.ContainerStatuses[0]
		return cs.RestartCount >= 3 && cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff"
	})
}
