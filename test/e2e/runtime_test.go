package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// The runtime manager's end-to-end tests (issue 5): environment resolved
// after the sandbox exists, termination messages, the managed /etc/hosts,
// lifecycle hooks and the events of a container's start.

func isTerminal(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
}

// logLines returns the pod's log once it is terminal.
func finishedLogs(t *testing.T, ns, name string) (*v1.Pod, string) {
	t.Helper()
	p := waitPod(t, ns, name, 90*time.Second, "a terminal phase", isTerminal)
	l, err := podLogs(testContext(t, 30*time.Second), ns, name, &v1.PodLogOptions{})
	if err != nil {
		t.Fatalf("logs of %s: %v", name, err)
	}
	return p, l
}

func TestRuntimeEnvironment(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	ctx := testContext(t, 30*time.Second)
	if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"},
		Data: map[string]string{"color": "blue", "size": "9"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec"},
		Data: map[string][]byte{"pw": []byte("s3cr3t")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := busyboxPod("env", v1.RestartPolicyNever, "env | sort; echo args=$0")
	c := &pod.Spec.Containers[0]
	c.Command = []string{"sh", "-c", "env | sort; echo args=$1", "sh", "$(POD_IP)/$(MY_NAME)/$$(POD_IP)"}
	c.Resources = v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}}
	field := func(name, path string) v1.EnvVar {
		return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}}
	}
	c.EnvFrom = []v1.EnvFromSource{{Prefix: "CM_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}}
	c.Env = []v1.EnvVar{
		field("POD_IP", "status.podIP"), field("POD_IPS", "status.podIPs"), field("HOST_IP", "status.hostIP"),
		field("MY_NAME", "metadata.name"), field("MY_NS", "metadata.namespace"), field("MY_NODE", "spec.nodeName"),
		{Name: "MEM_MI", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
		{Name: "COLOR", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Key: "color"}}},
		{Name: "PW", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}, Key: "pw"}}},
		{Name: "MISSING", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Key: "k", Optional: ptr.To(true)}}},
		{Name: "COMBINED", Value: "$(MY_NAME)@$(POD_IP)"},
	}
	createPod(t, ns, pod)
	p, logs := finishedLogs(t, ns, "env")
	if p.Status.Phase != v1.PodSucceeded {
		t.Fatalf("phase %s, logs %q", p.Status.Phase, logs)
	}
	if p.Status.PodIP == "" {
		t.Fatal("pod has no IP")
	}
	for _, want := range []string{
		"POD_IP=" + p.Status.PodIP, "POD_IPS=" + p.Status.PodIP, "HOST_IP=" + nodeIP,
		"MY_NAME=env", "MY_NS=" + ns, "MY_NODE=" + nodeName, "MEM_MI=64", "COLOR=blue", "PW=s3cr3t",
		"CM_color=blue", "CM_size=9", "COMBINED=env@" + p.Status.PodIP,
		"KUBERNETES_SERVICE_HOST=", "args=" + p.Status.PodIP + "/env/$(POD_IP)",
	} {
		if !strings.Contains(logs, want+"\n") && !strings.Contains(logs, "\n"+want) {
			t.Errorf("environment lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "MISSING=") {
		t.Errorf("optional missing ConfigMap defined MISSING:\n%s", logs)
	}
}

func TestRuntimeEnvironmentMissingConfigMap(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	pod := busyboxPod("nocm", v1.RestartPolicyAlways, "sleep 3600")
	pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Key: "k"}}}}
	createPod(t, ns, pod)
	p := waitPod(t, ns, "nocm", 60*time.Second, "CreateContainerConfigError", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "CreateContainerConfigError"
	})
	if msg := p.Status.ContainerStatuses[0].State.Waiting.Message; msg != `configmap "nope" not found` {
		t.Errorf("waiting message %q, want the kubelet's", msg)
	}
	// Once the ConfigMap exists, the container starts.
	if _, err := client.CoreV1().ConfigMaps(ns).Create(testContext(t, 10*time.Second), &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "nope"},
		Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, ns, "nocm", 90*time.Second, "Running and Ready", isRunningReady)
}

func TestRuntimeTerminationMessage(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	tests := []struct {
		name, script string
		policy       v1.TerminationMessagePolicy
		path         string
		want         string
	}{
		{name: "file", script: "printf DONE > /dev/termination-log", want: "DONE"},
		{name: "custom-path", script: "printf custom > /tmp/msg; exit 1", path: "/tmp/msg", want: "custom"},
		{name: "fallback", script: "echo from-the-log; exit 2", policy: v1.TerminationMessageFallbackToLogsOnError, want: "from-the-log\n"},
		{name: "no-fallback-on-success", script: "echo quiet", policy: v1.TerminationMessageFallbackToLogsOnError, want: ""},
	}
	for _, tc := range tests {
		pod := busyboxPod(tc.name, v1.RestartPolicyNever, tc.script)
		pod.Spec.Containers[0].TerminationMessagePolicy = tc.policy
		if tc.path != "" {
			pod.Spec.Containers[0].TerminationMessagePath = tc.path
		}
		createPod(t, ns, pod)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := waitPod(t, ns, tc.name, 90*time.Second, "a terminal phase", isTerminal)
			term := p.Status.ContainerStatuses[0].State.Terminated
			if term == nil || term.Message != tc.want {
				t.Errorf("terminated %+v, want message %q", term, tc.want)
			}
		})
	}
}

func TestRuntimeEtcHosts(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	pod := busyboxPod("hosts", v1.RestartPolicyNever, "cat /etc/hosts")
	pod.Spec.HostAliases = []v1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo.example", "bar.example"}}}
	createPod(t, ns, pod)
	p, logs := finishedLogs(t, ns, "hosts")
	for _, want := range []string{
		"# Kubernetes-managed hosts file.\n", "127.0.0.1\tlocalhost\n", p.Status.PodIP + "\thosts\n",
		"# Entries added by HostAliases.\n123.45.67.89\tfoo.example\tbar.example\n",
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("/etc/hosts lacks %q:\n%s", want, logs)
		}
	}
}

// events returns "reason: message" of the events of a pod.
func events(t *testing.T, ns, name string) []string {
	t.Helper()
	l, err := client.CoreV1().Events(ns).List(testContext(t, 10*time.Second), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range l.Items {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}

func waitEventPrefix(t *testing.T, ns, name, prefix string) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	err := wait.PollUntilContextCancel(ctx, poll, true, func(context.Context) (bool, error) {
		for _, e := range events(t, ns, name) {
			if strings.HasPrefix(e, prefix) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("no event %q for pod %s; events: %q", prefix, name, events(t, ns, name))
	}
}

func TestRuntimeHooks(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)

	// postStart runs before the container counts as started; its output
	// shows in the container's log (written to PID 1's stdout).
	pod := busyboxPod("hooks", v1.RestartPolicyAlways,
		`trap 'echo got-term; sleep 5; exit 0' TERM; echo main-started; while true; do sleep 1; done`)
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{
		PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo post-start > /proc/1/fd/1"}}},
		PreStop:   &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo pre-stop > /proc/1/fd/1"}}},
	}
	createPod(t, ns, pod)
	waitPod(t, ns, "hooks", 60*time.Second, "Running and Ready", isRunningReady)
	for _, e := range []string{"Pulled: Container image", "Created: Created container: c", "Started: Started container c"} {
		waitEventPrefix(t, ns, "hooks", e)
	}
	if err := client.CoreV1().Pods(ns).Delete(testContext(t, 10*time.Second), "hooks", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The preStop hook runs before SIGTERM: "pre-stop" precedes "got-term".
	ctx := testContext(t, 30*time.Second)
	var logs string
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		l, err := podLogs(ctx, ns, "hooks", &v1.PodLogOptions{})
		if err == nil {
			logs = l
		}
		return strings.Contains(logs, "got-term"), nil
	})
	if err != nil {
		t.Fatalf("never saw the container get SIGTERM; logs %q", logs)
	}
	if !strings.Contains(logs, "post-start") || strings.Index(logs, "pre-stop") < 0 || strings.Index(logs, "pre-stop") > strings.Index(logs, "got-term") {
		t.Errorf("logs %q: want post-start, then pre-stop before got-term", logs)
	}
	waitEventPrefix(t, ns, "hooks", "Killing: Stopping container c")
	waitGone(t, ns, "hooks", 60*time.Second)
}

func TestRuntimeFailedPostStartHook(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	pod := busyboxPod("badhook", v1.RestartPolicyAlways, "sleep 3600")
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](2) // sleep as PID 1 ignores SIGTERM
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{
		PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo nope; exit 7"}}},
	}
	createPod(t, ns, pod)
	waitPod(t, ns, "badhook", 90*time.Second, "a restart after the failed hook", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].RestartCount >= 1 && cs[0].State.Running == nil
	})
	waitEventPrefix(t, ns, "badhook", "FailedPostStartHook: Exec lifecycle hook ([sh -c echo nope; exit 7]) for Container \"c\"")
	waitEventPrefix(t, ns, "badhook", "Killing: FailedPostStartHook")
}

func sidecarTestPod(name string, policy v1.RestartPolicy, main, side string) *v1.Pod {
	pod := busyboxPod(name, policy, main)
	pod.Spec.InitContainers = []v1.Container{
		{Name: "init", Image: busybox, ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sh", "-c", "echo init"}},
		{Name: "side", Image: busybox, ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sh", "-c", side},
			RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)},
	}
	return pod
}

func TestRuntimeSidecarLifecycle(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	// A job-like pod: the sidecar runs beside the main container and is
	// stopped once the main container finished; the pod succeeds.
	createPod(t, ns, sidecarTestPod("job", v1.RestartPolicyNever, "sleep 2; echo main-done",
		`trap 'exit 0' TERM; while true; do sleep 1; done`))
	p := waitPod(t, ns, "job", 90*time.Second, "Succeeded", func(p *v1.Pod) bool { return isTerminal(p) })
	if p.Status.Phase != v1.PodSucceeded {
		t.Fatalf("phase %s, want Succeeded: %+v", p.Status.Phase, p.Status)
	}
	initS, sideS, mainS := p.Status.InitContainerStatuses[0], p.Status.InitContainerStatuses[1], p.Status.ContainerStatuses[0]
	if initS.State.Terminated == nil || sideS.State.Terminated == nil || mainS.State.Terminated == nil {
		t.Fatalf("not all terminated: init %+v side %+v main %+v", initS.State, sideS.State, mainS.State)
	}
	it, st, mt := initS.State.Terminated, sideS.State.Terminated, mainS.State.Terminated
	if st.StartedAt.Before(&it.FinishedAt) || mt.StartedAt.Before(&st.StartedAt) {
		t.Errorf("start order wrong: init finished %v, side started %v, main started %v", it.FinishedAt, st.StartedAt, mt.StartedAt)
	}
	if st.FinishedAt.Before(&mt.FinishedAt) {
		t.Errorf("sidecar finished %v before the main container %v", st.FinishedAt, mt.FinishedAt)
	}

	// A sidecar that exits is restarted while the pod keeps running.
	createPod(t, ns, sidecarTestPod("restarts", v1.RestartPolicyAlways, "sleep 3600", "sleep 5; exit 1"))
	p = waitPod(t, ns, "restarts", 90*time.Second, "the sidecar restarted", func(p *v1.Pod) bool {
		return len(p.Status.InitContainerStatuses) == 2 && p.Status.InitContainerStatuses[1].RestartCount >= 1 &&
			len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	})
	if p.Status.Phase != v1.PodRunning || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("phase %s, main restarts %d; want Running with the main container untouched", p.Status.Phase, p.Status.ContainerStatuses[0].RestartCount)
	}
}

func TestRuntimeImagePullPolicies(t *testing.T) {
	ns := newNamespace(t)
	waiting := func(reason string) func(*v1.Pod) bool {
		return func(p *v1.Pod) bool {
			cs := p.Status.ContainerStatuses
			return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == reason
		}
	}
	// Never with a missing image: ErrImageNeverPull, no pull attempted.
	never := busyboxPod("never", v1.RestartPolicyAlways, "sleep 3600")
	never.Spec.Containers[0].Image = "registry.invalid/crivk/absent:1.0"
	never.Spec.Containers[0].ImagePullPolicy = v1.PullNever
	createPod(t, ns, never)
	p := waitPod(t, ns, "never", 60*time.Second, "ErrImageNeverPull", waiting("ErrImageNeverPull"))
	if msg := p.Status.ContainerStatuses[0].State.Waiting.Message; msg != `Container image "registry.invalid/crivk/absent:1.0" is not present with pull policy of Never` {
		t.Errorf("waiting message %q", msg)
	}
	waitEventPrefix(t, ns, "never", `ErrImageNeverPull: Container image "registry.invalid/crivk/absent:1.0" is not present`)
	for _, e := range events(t, ns, "never") {
		if strings.HasPrefix(e, "Pulling:") {
			t.Errorf("pull attempted under policy Never: %s", e)
		}
	}

	// Always pulls even a present image: with no registry reachable here,
	// the pull of the local busybox fails and backs off.
	always := busyboxPod("always", v1.RestartPolicyAlways, "sleep 3600")
	always.Spec.Containers[0].ImagePullPolicy = v1.PullAlways
	createPod(t, ns, always)
	waitPod(t, ns, "always", 90*time.Second, "ErrImagePull or ImagePullBackOff", func(p *v1.Pod) bool {
		return waiting("ErrImagePull")(p) || waiting("ImagePullBackOff")(p)
	})
	waitEventPrefix(t, ns, "always", `Pulling: Pulling image "`+busybox+`"`)
	waitEventPrefix(t, ns, "always", `Failed: Failed to pull image "`+busybox+`"`)

	// IfNotPresent with a present image: no pull.
	createPod(t, ns, busyboxPod("present", v1.RestartPolicyAlways, "sleep 3600"))
	waitPod(t, ns, "present", 60*time.Second, "Running and Ready", isRunningReady)
	waitEventPrefix(t, ns, "present", `Pulled: Container image "`+busybox+`" already present on machine`)
}
