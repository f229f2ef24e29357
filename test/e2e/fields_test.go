package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// Pod fields docs/runtime.md once listed as ignored, each now honoured or
// refused as the kubelet v1.35.4 does (#30). The checks read what a user
// sees: the container's own output, the pod's status.

// waitingReason waits until container name of the pod waits with reason
// and returns its message.
func waitingReason(t *testing.T, ns, pod, name, reason string) string {
	t.Helper()
	var msg string
	waitPod(t, ns, pod, 90*time.Second, name+" waiting with "+reason, func(p *v1.Pod) bool {
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if cs.Name == name && cs.State.Waiting != nil && cs.State.Waiting.Reason == reason {
				msg = cs.State.Waiting.Message
				return true
			}
		}
		return false
	})
	return msg
}

// envFilePod writes /data/config.env from an init container into an
// emptyDir, for the main container's fileKeyRef variables env.
func envFilePod(name string, env ...v1.EnvVar) *v1.Pod {
	pod := busyboxPod(name, v1.RestartPolicyNever, "env")
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	mount := []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	pod.Spec.InitContainers = []v1.Container{{
		Name: "write", Image: busybox, ImagePullPolicy: v1.PullIfNotPresent, VolumeMounts: mount,
		Command: []string{"sh", "-c", `printf "# generated\nDB_HOST='db.example'\nMULTI='a b\nc'\n" > /data/config.env`},
	}}
	pod.Spec.Containers[0].VolumeMounts = mount
	pod.Spec.Containers[0].Env = env
	return pod
}

func fileKeyEnv(name, key string, optional bool) v1.EnvVar {
	return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{
		VolumeName: "data", Path: "config.env", Key: key, Optional: ptr.To(optional)}}}
}

// TestFieldsFileKeyRef: env[].valueFrom.fileKeyRef takes the key's value
// from the file an init container wrote into the emptyDir; an optional
// key that is missing leaves the variable undefined.
func TestFieldsFileKeyRef(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	createPod(t, ns, envFilePod("envfile",
		fileKeyEnv("FROM_FILE", "DB_HOST", false),
		fileKeyEnv("MULTI_LINE", "MULTI", false),
		fileKeyEnv("OPTIONAL_MISSING", "NOPE", true),
		v1.EnvVar{Name: "URL", Value: "pg://$(FROM_FILE)"},
	))
	p, logs := finishedLogs(t, ns, "envfile")
	if p.Status.Phase != v1.PodSucceeded {
		t.Fatalf("phase %s, logs %q", p.Status.Phase, logs)
	}
	for _, want := range []string{"FROM_FILE=db.example\n", "MULTI_LINE=a b\nc\n", "URL=pg://db.example\n"} {
		if !strings.Contains(logs, want) {
			t.Errorf("environment lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "OPTIONAL_MISSING") {
		t.Errorf("an optional missing key defined the variable:\n%s", logs)
	}
}

// TestFieldsFileKeyRefMissingKey: a required key the file lacks keeps the
// container from being created: CreateContainerConfigError with the
// kubelet's message naming the key and the file on the node.
func TestFieldsFileKeyRefMissingKey(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	created := createPod(t, ns, envFilePod("envfile-missing", fileKeyEnv("X", "NOPE", false)))
	msg := waitingReason(t, ns, created.Name, "c", "CreateContainerConfigError")
	want := `environment variable key "NOPE" not found in file "`
	suffix := "/pods/" + string(created.UID) + `/volumes/kubernetes.io~empty-dir/data/config.env"`
	if !strings.HasPrefix(msg, want) || !strings.HasSuffix(msg, suffix) {
		t.Errorf("waiting message %q, want %s<root-dir>%s", msg, want, suffix)
	}
}

// TestFieldsContainerRestartRules: a container's restartPolicy and
// restartPolicyRules (ContainerRestartRules) decide over the pod's
// restartPolicy whether it runs again, and the phase follows: the counts
// and phases a user sees.
func TestFieldsContainerRestartRules(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	// Each container exits with first on its first run and 0 after.
	onceThen := func(name string, pod v1.RestartPolicy, own v1.ContainerRestartPolicy, first int, rules ...v1.ContainerRestartRule) *v1.Pod {
		p := busyboxPod(name, pod, fmt.Sprintf("if [ -f /m/ran ]; then exit 0; fi; touch /m/ran; exit %d", first))
		p.Spec.Volumes = []v1.Volume{{Name: "m", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		c := &p.Spec.Containers[0]
		c.VolumeMounts = []v1.VolumeMount{{Name: "m", MountPath: "/m"}}
		c.RestartPolicy, c.RestartPolicyRules = ptr.To(own), rules
		return p
	}
	retry42 := v1.ContainerRestartRule{Action: v1.ContainerRestartRuleActionRestart,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}
	tests := []struct {
		pod          *v1.Pod
		wantPhase    v1.PodPhase
		wantRestarts int32
		wantExit     int32
	}{
		// Never pod, Never container, rule "exit 42: restart": run again
		// once, then the 0 ends it.
		{onceThen("rule-match", v1.RestartPolicyNever, v1.ContainerRestartPolicyNever, 42, retry42), v1.PodSucceeded, 1, 0},
		// The rule does not match exit 3: the container's Never stands,
		// over the pod's Always.
		{onceThen("rule-nomatch", v1.RestartPolicyAlways, v1.ContainerRestartPolicyNever, 3, retry42), v1.PodFailed, 0, 3},
		// Never pod, OnFailure container: the failure runs it again.
		{onceThen("onfailure", v1.RestartPolicyNever, v1.ContainerRestartPolicyOnFailure, 1), v1.PodSucceeded, 1, 0},
	}
	for _, tc := range tests {
		createPod(t, ns, tc.pod)
	}
	for _, tc := range tests {
		t.Run(tc.pod.Name, func(t *testing.T) {
			p := waitPod(t, ns, tc.pod.Name, 2*time.Minute, string(tc.wantPhase), func(p *v1.Pod) bool { return isTerminal(p) })
			if p.Status.Phase != tc.wantPhase {
				t.Errorf("phase %s, want %s", p.Status.Phase, tc.wantPhase)
			}
			if len(p.Status.ContainerStatuses) != 1 {
				t.Fatalf("container statuses %+v", p.Status.ContainerStatuses)
			}
			cs := p.Status.ContainerStatuses[0]
			if cs.RestartCount != tc.wantRestarts {
				t.Errorf("restartCount %d, want %d", cs.RestartCount, tc.wantRestarts)
			}
			if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != tc.wantExit {
				t.Errorf("state %+v, want terminated with exit code %d", cs.State, tc.wantExit)
			}
		})
	}
}

// TestFieldsRestartAllContainers: a restartPolicyRules entry with the
// action RestartAllContainers (RestartAllContainersOnContainerExits, beta
// and on in v1.37) restarts every init, sidecar and regular container of
// the pod in place when its container exits with a listed code, as the
// kubelet v1.37 does (the node e2e specs "Pod Extended
// (RestartAllContainers)"): each container's restartCount goes to 1 and
// its last state says RestartingAllContainers (exit code 137); the
// sandbox, its IP and the emptyDir stay (the source sees its marker and
// does not exit again); the containers still running were killed
// ("Killing: killing"); the pod stays Running and Initialized, with
// AllContainersRestarting False once it runs again. The same for a source
// that is an init container: the init containers and sidecars before it
// run again.
func TestFieldsRestartAllContainers(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	restartAll42 := []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
	mount := []v1.VolumeMount{{Name: "m", MountPath: "/m"}}
	ctr := func(name, script string) v1.Container {
		return v1.Container{Name: name, Image: busybox, ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sh", "-c", script}}
	}
	source := func(name, afterwards string) v1.Container {
		c := ctr(name, "if [ -f /m/restarted ]; then "+afterwards+"; fi; touch /m/restarted; exit 42")
		c.RestartPolicy, c.RestartPolicyRules, c.VolumeMounts = ptr.To(v1.ContainerRestartPolicyNever), restartAll42, mount
		return c
	}
	sidecar := ctr("sidecar", "exec sleep 10000")
	sidecar.RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
	pod := func(name string, inits []v1.Container, containers ...v1.Container) *v1.Pod {
		p := busyboxPod(name, v1.RestartPolicyNever, "")
		p.Spec.Volumes = []v1.Volume{{Name: "m", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		p.Spec.InitContainers, p.Spec.Containers = inits, containers
		return p
	}
	tests := []struct {
		pod *v1.Pod
		// restarted are the containers that run again; killed the field
		// paths of those running when the source exited, sorted.
		restarted, killed []string
	}{
		{pod("regular-source", []v1.Container{ctr("init", "exit 0"), sidecar},
			source("source", "exec sleep 10000"), ctr("regular", "exec sleep 10000")),
			[]string{"init", "sidecar", "source", "regular"}, []string{"spec.containers{regular}", "spec.initContainers{sidecar}"}},
		{pod("init-source", []v1.Container{sidecar, ctr("init", "exit 0"), source("source-init", "exit 0")},
			ctr("regular", "exec sleep 10000")),
			[]string{"sidecar", "init", "source-init"}, []string{"spec.initContainers{sidecar}"}},
	}
	for _, tc := range tests {
		createPod(t, ns, tc.pod)
	}
	for _, tc := range tests {
		t.Run(tc.pod.Name, func(t *testing.T) {
			name := tc.pod.Name
			first := waitPod(t, ns, name, 2*time.Minute, "a pod IP", func(p *v1.Pod) bool { return p.Status.PodIP != "" })
			status := func(p *v1.Pod, c string) *v1.ContainerStatus {
				for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
					if cs.Name == c {
						return &cs
					}
				}
				return nil
			}
			p := waitPod(t, ns, name, 3*time.Minute, "every container restarted once and the regular ones running", func(p *v1.Pod) bool {
				for _, c := range tc.restarted {
					if cs := status(p, c); cs == nil || cs.RestartCount == 0 || cs.LastTerminationState.Terminated == nil {
						return false
					}
				}
				for _, cs := range p.Status.ContainerStatuses {
					if cs.State.Running == nil {
						return false
					}
				}
				return true
			})
			for _, c := range tc.restarted {
				cs := status(p, c)
				if lt := cs.LastTerminationState.Terminated; cs.RestartCount != 1 || lt.Reason != "RestartingAllContainers" || lt.ExitCode != 137 {
					t.Errorf("%s: restartCount %d, last state %+v; want 1 and terminated RestartingAllContainers, exit code 137", c, cs.RestartCount, lt)
				}
			}
			if p.Status.Phase != v1.PodRunning || p.Status.PodIP != first.Status.PodIP {
				t.Errorf("phase %s, pod IP %s (first %s); want Running in the same sandbox", p.Status.Phase, p.Status.PodIP, first.Status.PodIP)
			}
			conds := map[v1.PodConditionType]v1.ConditionStatus{}
			for _, c := range p.Status.Conditions {
				conds[c.Type] = c.Status
			}
			if conds[v1.AllContainersRestarting] != v1.ConditionFalse || conds[v1.PodInitialized] != v1.ConditionTrue {
				t.Errorf("conditions %+v, want AllContainersRestarting False and Initialized True", p.Status.Conditions)
			}
			// The Killing events come from the recorder, maybe later.
			var killed []string
			ctx := testContext(t, 30*time.Second)
			err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
				evs, err := podEvents(ctx, ns, "Pod", name)
				if err != nil {
					return false, nil
				}
				killed = nil
				for _, e := range evs {
					if e.Reason == "Killing" && e.Message == "killing" {
						killed = append(killed, e.InvolvedObject.FieldPath)
					}
				}
				slices.Sort(killed)
				return slices.Equal(killed, tc.killed), nil
			})
			if err != nil {
				t.Errorf("Killing events \"killing\" for %v, want for %v (the containers running when the source exited)", killed, tc.killed)
			}
		})
	}
}

// TestFieldsHostname: setHostnameAsFQDN makes the container's hostname the
// pod's FQDN; hostnameOverride replaces the hostname and the /etc/hosts
// entry (no FQDN); an FQDN over 64 characters fails the sandbox with the
// kubelet's FailedCreatePodSandBox message and the pod never runs.
func TestFieldsHostname(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	const script = "hostname; echo ---; cat /etc/hosts"

	fqdn := busyboxPod("fqdn", v1.RestartPolicyNever, script)
	fqdn.Spec.Subdomain, fqdn.Spec.SetHostnameAsFQDN = "sub", ptr.To(true)
	createPod(t, ns, fqdn)

	override := busyboxPod("override", v1.RestartPolicyNever, script)
	override.Spec.Subdomain, override.Spec.HostnameOverride = "sub", ptr.To("my-host.example.internal")
	createPod(t, ns, override)

	long := strings.Repeat("h", 40)
	tooLong := busyboxPod("toolong", v1.RestartPolicyNever, script)
	tooLong.Spec.Hostname, tooLong.Spec.Subdomain, tooLong.Spec.SetHostnameAsFQDN = long, "sub", ptr.To(true)
	createdTooLong := createPod(t, ns, tooLong)

	wantFQDN := "fqdn.sub." + ns + ".svc.cluster.local"
	t.Run("setHostnameAsFQDN", func(t *testing.T) {
		p, logs := finishedLogs(t, ns, "fqdn")
		if p.Status.Phase != v1.PodSucceeded {
			t.Fatalf("phase %s, logs %q", p.Status.Phase, logs)
		}
		if !strings.HasPrefix(logs, wantFQDN+"\n---\n") {
			t.Errorf("hostname is not %s:\n%s", wantFQDN, logs)
		}
		if want := "\t" + wantFQDN + "\tfqdn\n"; !strings.Contains(logs, want) {
			t.Errorf("/etc/hosts lacks %q:\n%s", want, logs)
		}
	})
	t.Run("hostnameOverride", func(t *testing.T) {
		p, logs := finishedLogs(t, ns, "override")
		if p.Status.Phase != v1.PodSucceeded {
			t.Fatalf("phase %s, logs %q", p.Status.Phase, logs)
		}
		if !strings.HasPrefix(logs, "my-host.example.internal\n---\n") {
			t.Errorf("hostname is not the override:\n%s", logs)
		}
		if want := p.Status.PodIP + "\tmy-host.example.internal\n"; !strings.Contains(logs, want) {
			t.Errorf("/etc/hosts lacks %q:\n%s", want, logs)
		}
		if strings.Contains(logs, ".svc.cluster.local") {
			t.Errorf("/etc/hosts has an FQDN despite the override:\n%s", logs)
		}
	})
	t.Run("FQDN too long", func(t *testing.T) {
		full := long + ".sub." + ns + ".svc.cluster.local"
		msg := fmt.Sprintf("Failed to create pod sandbox: failed to construct FQDN from pod hostname and cluster domain, FQDN %s is too long (64 characters is the max, %d characters requested)", full, len(full))
		waitEvent(t, ns, "toolong", v1.EventTypeWarning, "FailedCreatePodSandBox", msg)
		stillPending(t, ns, "toolong", createdTooLong.UID)
	})
}

// TestFieldsRecursiveReadOnly: recursiveReadOnly by what the runtime's
// default handler reports in CRI Status. Where it has recursive read-only
// mounts (CONTAINERD=built, containerd 2), Enabled and IfPossible both run
// read-only, with the status' recursiveReadOnly Enabled. Where it reports
// none (CONTAINERD=system, containerd 1.6), a mount asking for Enabled is
// refused as the kubelet refuses it (CreateContainerConfigError, its
// message) and the container never runs; IfPossible runs with a plain
// read-only mount (Disabled).
func TestFieldsRecursiveReadOnly(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	rroPod := func(name string, mode v1.RecursiveReadOnlyMode) *v1.Pod {
		p := busyboxPod(name, v1.RestartPolicyNever, "touch /data/x 2>&1; echo done")
		p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data", ReadOnly: true, RecursiveReadOnly: ptr.To(mode)}}
		return p
	}
	supported := runtimeSupportsRecursiveReadOnly(t)
	createPod(t, ns, rroPod("enabled", v1.RecursiveReadOnlyEnabled))
	createPod(t, ns, rroPod("ifpossible", v1.RecursiveReadOnlyIfPossible))
	readOnly := func(t *testing.T, name string, want v1.RecursiveReadOnlyMode) {
		t.Helper()
		p, logs := finishedLogs(t, ns, name)
		if p.Status.Phase != v1.PodSucceeded {
			t.Fatalf("phase %s, logs %q", p.Status.Phase, logs)
		}
		if !strings.Contains(logs, "Read-only file system") {
			t.Errorf("the mount is writable:\n%s", logs)
		}
		var got []string
		for _, cs := range p.Status.ContainerStatuses {
			for _, m := range cs.VolumeMounts {
				if m.Name == "data" && m.RecursiveReadOnly != nil {
					got = append(got, string(*m.RecursiveReadOnly))
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint([]string{string(want)}) {
			t.Errorf("status volumeMounts' recursiveReadOnly %v, want [%s]", got, want)
		}
	}

	t.Run("Enabled", func(t *testing.T) {
		if supported {
			readOnly(t, "enabled", v1.RecursiveReadOnlyEnabled)
			return
		}
		msg := waitingReason(t, ns, "enabled", "c", "CreateContainerConfigError")
		if want := `failed to resolve recursive read-only mode: volume "data" requested recursive read-only mode, but it is not supported by the runtime`; msg != want {
			t.Errorf("waiting message %q, want %q", msg, want)
		}
		p, err := client.CoreV1().Pods(ns).Get(testContext(t, 10*time.Second), "enabled", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase != v1.PodPending {
			t.Errorf("phase %s, want Pending", p.Status.Phase)
		}
	})
	t.Run("IfPossible", func(t *testing.T) {
		want := v1.RecursiveReadOnlyDisabled
		if supported {
			want = v1.RecursiveReadOnlyEnabled
		}
		readOnly(t, "ifpossible", want)
	})
}

// TestFieldsSELinuxInherited: a container without SELinux options of its
// own is created with the pod's, one with its own with those, as the
// runtime received them (its verbose CRI status carries the container's
// config; this host has no SELinux to enforce the label with).
func TestFieldsSELinuxInherited(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	pod := busyboxPod("selinux", v1.RestartPolicyAlways, "sleep 3600")
	pod.Spec.SecurityContext = &v1.PodSecurityContext{SELinuxOptions: &v1.SELinuxOptions{Level: "s0:c123,c456"}}
	own := pod.Spec.Containers[0]
	own.Name = "own"
	own.SecurityContext = &v1.SecurityContext{SELinuxOptions: &v1.SELinuxOptions{Level: "s0:c7,c8"}}
	pod.Spec.Containers = append(pod.Spec.Containers, own)
	created := createPod(t, ns, pod)
	waitPod(t, ns, pod.Name, time.Minute, "Running and Ready", isRunningReady)

	ctx := testContext(t, 30*time.Second)
	cs, err := runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(created.UID)}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"c": "s0:c123,c456", "own": "s0:c7,c8"}
	seen := 0
	for _, c := range cs {
		level, ok := want[c.GetMetadata().GetName()]
		if !ok || c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		seen++
		st, err := runtime.ContainerStatus(ctx, c.Id, true)
		if err != nil {
			t.Fatal(err)
		}
		var info struct {
			Config json.RawMessage `json:"config"`
		}
		if err := json.Unmarshal([]byte(st.GetInfo()["info"]), &info); err != nil || len(info.Config) == 0 {
			t.Fatalf("container %s: no config in the runtime's verbose status (%v)", c.GetMetadata().GetName(), err)
		}
		cfg := string(info.Config)
		if !strings.Contains(cfg, `"level":"`+level+`"`) {
			t.Errorf("container %s: config has no SELinux level %s: %s", c.GetMetadata().GetName(), level, cfg)
		}
		for name, other := range want {
			if name != c.GetMetadata().GetName() && strings.Contains(cfg, other) {
				t.Errorf("container %s: config has %s's level %s", c.GetMetadata().GetName(), name, other)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("found %d running containers of the pod in the runtime, want %d", seen, len(want))
	}
}
