package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// TestFidelityTerminalStatusShowsTheSandboxStopped: every version of a
// finished pod the API server stores in a terminal phase shows its sandbox
// stopped (PodReadyToStartContainers False), as the kubelet's do: the
// kubelet's status manager publishes a terminal phase only once the pod's
// containers and sandbox are stopped (mergePodStatus). crivk published
// the phase first (with the condition True), and virtual-kubelet skips
// every later status of a terminal pod, so readers saw True (TestFieldsKubelet's
// OnFailure, exit-3 and fileKeyRef rows). The test watches the pod from
// its creation and looks at every version written.
func TestFidelityTerminalStatusShowsTheSandboxStopped(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	for _, tc := range []struct {
		name  string
		exit  int
		phase v1.PodPhase
	}{
		{"done", 0, v1.PodSucceeded},
		{"failed", 3, v1.PodFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t, 2*time.Minute)
			// From a list's resourceVersion, re-established if the API
			// server ends it: no version written after it is missed.
			sel := fields.OneTermEqualSelector("metadata.name", tc.name).String()
			l, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
			if err != nil {
				t.Fatalf("listing pod %s: %v", tc.name, err)
			}
			w, err := watchtools.NewRetryWatcherWithContext(ctx, l.ResourceVersion, &cache.ListWatch{
				WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
					o.FieldSelector = sel
					return client.CoreV1().Pods(ns).Watch(ctx, o)
				}})
			if err != nil {
				t.Fatalf("watching pod %s: %v", tc.name, err)
			}
			defer w.Stop()
			createPod(t, ns, busyboxPod(tc.name, v1.RestartPolicyNever, fmt.Sprintf("sleep 1; exit %d", tc.exit)))
			var terminal, wrong int
			var last *v1.Pod
			for last == nil || !prtsc(last, v1.ConditionFalse) || !isTerminal(last) {
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						t.Fatalf("watch ended; last version seen: %+v", statusLine(last))
					}
					p, isPod := ev.Object.(*v1.Pod)
					if !isPod || ev.Type == watch.Deleted {
						continue
					}
					last = p
					if isTerminal(p) {
						terminal++
						if !prtsc(p, v1.ConditionFalse) {
							wrong++
							t.Errorf("version %s: %s", p.ResourceVersion, statusLine(p))
						}
					}
				case <-ctx.Done():
					t.Fatalf("the pod never reached %s with PodReadyToStartContainers False; last version: %s", tc.phase, statusLine(last))
				}
			}
			if last.Status.Phase != tc.phase {
				t.Errorf("phase %s, want %s", last.Status.Phase, tc.phase)
			}
			t.Logf("%d versions in a terminal phase, %d with PodReadyToStartContainers not False; last: %s", terminal, wrong, statusLine(last))
		})
	}
}

// prtsc: the pod's PodReadyToStartContainers condition has status s.
func prtsc(p *v1.Pod, s v1.ConditionStatus) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReadyToStartContainers {
			return c.Status == s
		}
	}
	return false
}

func statusLine(p *v1.Pod) string {
	if p == nil {
		return "<none>"
	}
	out := "phase " + string(p.Status.Phase)
	for _, c := range p.Status.Conditions {
		out += fmt.Sprintf(", %s=%s", c.Type, c.Status)
	}
	return out
}

// TestFidelitySidecarsPreStopCutAtTheGracePeriod: the node e2e suite's
// "should terminate sidecars simultaneously if prestop doesn't exit", on a
// shorter clock. The Never pod's container exits after 1 s; its two
// sidecars have preStop hooks that never end and a TERM trap of 5 s, and
// would exit 0 by themselves 14 s after they start. As the kubelet's
// killContainersWithSyncResult, both hooks start at once, use the whole
// grace period (6 s), and each sidecar gets SIGTERM then SIGKILL 2 s
// later (minimumGracePeriodInSeconds): both end together, exit 137, about
// 8 s after the container. crivk stopped them one after the other, each
// with a full grace period, so the second outlived it and exited 0.
func TestFidelitySidecarsPreStopCutAtTheGracePeriod(t *testing.T) {
	ns := newNamespace(t)
	pod := busyboxPod("sidecars", v1.RestartPolicyNever, "sleep 1; exit 0")
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](6)
	for _, name := range []string{"s1", "s2"} {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{
			Name: name, Image: busybox, ImagePullPolicy: v1.PullIfNotPresent,
			RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways),
			Command:       []string{"sh", "-c", "trap 'sleep 5; exit 0' TERM; sleep 14 & wait $!; exit 0"},
			Lifecycle: &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{
				Command: []string{"sh", "-c", "while true; do sleep 0.2; done"}}}},
		})
	}
	createPod(t, ns, pod)
	p := waitPod(t, ns, pod.Name, 2*time.Minute, "the pod to finish", isTerminal)
	var regularEnd time.Time
	if cs := p.Status.ContainerStatuses; len(cs) == 1 && cs[0].State.Terminated != nil {
		regularEnd = cs[0].State.Terminated.FinishedAt.Time
	} else {
		t.Fatalf("container c not terminated: %+v", cs)
	}
	var ends []time.Time
	for _, cs := range p.Status.InitContainerStatuses {
		term := cs.State.Terminated
		if term == nil {
			t.Errorf("sidecar %s not terminated: %+v", cs.Name, cs.State)
			continue
		}
		if term.ExitCode != 137 || term.Reason != "Error" {
			t.Errorf("sidecar %s: exit %d reason %s, want 137 Error (SIGKILL 2 s after SIGTERM, the preStop hook having used the grace period)", cs.Name, term.ExitCode, term.Reason)
		}
		ends = append(ends, term.FinishedAt.Time)
		t.Logf("sidecar %s: exit %d %s, %s after the container", cs.Name, term.ExitCode, term.Reason, term.FinishedAt.Sub(regularEnd))
	}
	if len(ends) == 2 {
		if d := ends[0].Sub(ends[1]); d > time.Second || d < -time.Second {
			t.Errorf("sidecars ended %s apart, want together (their hooks run at once)", d)
		}
		for _, e := range ends {
			// 6 s of hook + 2 s after SIGTERM, with the API's 1 s resolution
			// and the regular container's exit being noticed.
			if d := e.Sub(regularEnd); d < 7*time.Second || d > 12*time.Second {
				t.Errorf("a sidecar ended %s after the container, want about 8 s (grace 6 s + 2 s)", d)
			}
		}
	}
}

// TestFidelityHostUsersRefusalEvents: a pod with hostUsers: false on a
// runtime without user namespaces is refused with FailedCreatePodSandBox,
// and, as the kubelet (whose generatePodSandboxConfig builds the DNS config
// before the user namespace), also warned MissingClusterDNS on this
// cluster, which has no cluster DNS. Nothing of it runs.
func TestFidelityHostUsersRefusalEvents(t *testing.T) {
	if runtimeSupportsUserNamespaces(t) {
		t.Skip("the runtime supports user namespaces: such a pod runs (TestConfinementHostUsers)")
	}
	ns := newNamespace(t)
	pod := busyboxPod("userns", v1.RestartPolicyAlways, "sleep 3600")
	pod.Spec.HostUsers = ptr.To(false)
	p := createPod(t, ns, pod)
	ctx := testContext(t, time.Minute)
	var evs []v1.Event
	for {
		var err error
		evs, err = podEvents(ctx, ns, "Pod", pod.Name)
		if err == nil && hasEventReason(evs, "FailedCreatePodSandBox") && hasEventReason(evs, "MissingClusterDNS") {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("events %v: want FailedCreatePodSandBox and MissingClusterDNS", eventReasons(evs))
		case <-time.After(poll):
		}
	}
	for _, e := range evs {
		if e.Reason == "FailedCreatePodSandBox" && e.Message != "Failed to create pod sandbox: can't set `spec.hostUsers: false`, runtime does not support user namespaces" {
			t.Errorf("FailedCreatePodSandBox %q, want the kubelet's message", e.Message)
		}
	}
	if sbs, cs := runtimeObjects(t, p.UID); sbs+cs != 0 {
		t.Errorf("%d sandboxes and %d containers in the runtime for a refused pod", sbs, cs)
	}
}

func eventReasons(evs []v1.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type+" "+e.Reason)
	}
	return out
}

// runtimeSupportsUserNamespaces asks the runtime's status whether its
// default handler has user namespaces: the lane's (CONTAINERD=built, the
// containerd 2 of hack/build-runtime.sh, has; containerd 1.6 reports no
// handlers).
func runtimeSupportsUserNamespaces(t *testing.T) bool {
	t.Helper()
	return defaultHandler(t).GetFeatures().GetUserNamespaces()
}

// runtimeSupportsRecursiveReadOnly asks the runtime's status whether its
// default handler has recursive read-only mounts (containerd 2 on this
// kernel has; 1.6 reports no handlers).
func runtimeSupportsRecursiveReadOnly(t *testing.T) bool {
	t.Helper()
	return defaultHandler(t).GetFeatures().GetRecursiveReadOnlyMounts()
}

// defaultHandler is the runtime's default handler as its status reports
// it, nil when it reports none.
func defaultHandler(t *testing.T) *runtimeapi.RuntimeHandler {
	t.Helper()
	st, err := runtime.Status(testContext(t, 10*time.Second), false)
	if err != nil {
		t.Fatalf("runtime status: %v", err)
	}
	for _, h := range st.GetRuntimeHandlers() {
		if h.GetName() == "" {
			return h
		}
	}
	return nil
}

// TestFidelityResourceClaimRefused: a pod that asks for a device through a
// ResourceClaim (DRA) is not run without it. The claim is allocated by a
// driver that never registered with crivk (the test writes the allocation
// and the reservation as the scheduler would); as a kubelet on which the
// driver is not installed, crivk creates nothing and warns
// FailedPrepareDynamicResources "Failed to prepare dynamic resources:
// prepare dynamic resources: DRA driver <driver> is not registered" (before
// the reservation: "... is not allowed to use ResourceClaim ..."); the pod
// stays Pending in ContainerCreating. crivk used to run it, deviceless.
func TestFidelityResourceClaimRefused(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	ctx := testContext(t, 2*time.Minute)
	const driver = "dra.crivk.test"
	claim, err := client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu." + driver}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating ResourceClaim: %v", err)
	}
	pod := busyboxPod("dra", v1.RestartPolicyAlways, "sleep 3600")
	// Bound directly: the scheduler would wait for an allocation.
	pod.Spec.NodeSelector, pod.Spec.NodeName = nil, nodeName
	pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim.Name)}}
	pod.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	p := createPod(t, ns, pod)
	claim.Status = resourceapi.ResourceClaimStatus{
		Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: driver, Pool: nodeName, Device: "gpu-0"}}}},
		ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: p.Name, UID: p.UID}},
	}
	if _, err := client.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("allocating and reserving the claim: %v", err)
	}
	want := "Failed to prepare dynamic resources: prepare dynamic resources: DRA driver " + driver + " is not registered"
	var evs []v1.Event
	for found := false; !found; {
		evs, _ = podEvents(ctx, ns, "Pod", pod.Name)
		for _, e := range evs {
			found = found || (e.Type == v1.EventTypeWarning && e.Reason == "FailedPrepareDynamicResources" && e.Message == want)
		}
		if found {
			break
		}
		select {
		case <-ctx.Done():
			var got []string
			for _, e := range evs {
				got = append(got, fmt.Sprintf("%s %s %q", e.Type, e.Reason, e.Message))
			}
			t.Fatalf("no Warning FailedPrepareDynamicResources %q; events: %v", want, got)
		case <-time.After(poll):
		}
	}
	cur, err := client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cs := cur.Status.ContainerStatuses; cur.Status.Phase != v1.PodPending || len(cs) != 1 || cs[0].State.Waiting == nil || cs[0].State.Waiting.Reason != "ContainerCreating" {
		t.Errorf("pod %s, containers %+v: want Pending, c waiting ContainerCreating", cur.Status.Phase, cur.Status.ContainerStatuses)
	}
	if sbs, cs := runtimeObjects(t, p.UID); sbs+cs != 0 {
		t.Errorf("%d sandboxes and %d containers in the runtime for a pod whose claim cannot be prepared", sbs, cs)
	}
	for _, e := range evs {
		if e.Reason == "MissingClusterDNS" || e.Reason == "FailedCreatePodSandBox" {
			t.Errorf("event %s %q: the kubelet stops before the sandbox config", e.Reason, e.Message)
		}
	}
}
