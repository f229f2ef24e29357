package status

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Container statuses as the kubelet's getPhase tests write them
// (pkg/kubelet/kubelet_pods_test.go).
func runningState(name string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
}
func terminatedState(name string, code int32) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}}
}
func waitingState(name string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{}}}
}
func waitingWithLastTermination(name string, code int32) v1.ContainerStatus {
	s := waitingState(name)
	s.LastTerminationState.Terminated = &v1.ContainerStateTerminated{ExitCode: code}
	return s
}

func TestPodPhase(t *testing.T) {
	const (
		always    = v1.RestartPolicyAlways
		onFailure = v1.RestartPolicyOnFailure
		never     = v1.RestartPolicyNever
	)
	s := func(ss ...v1.ContainerStatus) []v1.ContainerStatus { return ss }
	tests := map[string]struct {
		policy  v1.RestartPolicy
		inits   []v1.ContainerStatus
		regular []v1.ContainerStatus
		deleted bool
		want    v1.PodPhase
	}{
		"Always: all running":                  {policy: always, regular: s(runningState("a"), runningState("b")), want: v1.PodRunning},
		"Always: all stopped":                  {policy: always, regular: s(terminatedState("a", 0), terminatedState("b", 1)), want: v1.PodRunning},
		"Always: mixed":                        {policy: always, regular: s(runningState("a"), terminatedState("b", 0)), want: v1.PodRunning},
		"Always: one waiting":                  {policy: always, regular: s(runningState("a"), waitingState("b")), want: v1.PodPending},
		"Always: restarting counts as stopped": {policy: always, regular: s(runningState("a"), waitingWithLastTermination("b", 1)), want: v1.PodRunning},
		"Always: all waiting":                  {policy: always, regular: s(waitingState("a"), waitingState("b")), want: v1.PodPending},
		"Always: no status yet":                {policy: always, want: v1.PodPending},
		"OnFailure: all succeeded":             {policy: onFailure, regular: s(terminatedState("a", 0), terminatedState("b", 0)), want: v1.PodSucceeded},
		"OnFailure: one failed, restarting":    {policy: onFailure, regular: s(terminatedState("a", 0), terminatedState("b", 1)), want: v1.PodRunning},
		"OnFailure: failed one in back-off":    {policy: onFailure, regular: s(terminatedState("a", 0), waitingWithLastTermination("b", 1)), want: v1.PodRunning},
		"OnFailure: running":                   {policy: onFailure, regular: s(runningState("a"), terminatedState("b", 1)), want: v1.PodRunning},
		"Never: all succeeded":                 {policy: never, regular: s(terminatedState("a", 0), terminatedState("b", 0)), want: v1.PodSucceeded},
		"Never: one failed":                    {policy: never, regular: s(terminatedState("a", 0), terminatedState("b", 1)), want: v1.PodFailed},
		"Never: one still running":             {policy: never, regular: s(runningState("a"), terminatedState("b", 1)), want: v1.PodRunning},
		"Never: one waiting":                   {policy: never, regular: s(waitingState("a"), terminatedState("b", 0)), want: v1.PodPending},

		"init running":                       {policy: always, inits: s(runningState("i")), regular: s(waitingState("a")), want: v1.PodPending},
		"init waiting":                       {policy: always, inits: s(waitingState("i")), regular: s(waitingState("a")), want: v1.PodPending},
		"init succeeded, containers running": {policy: never, inits: s(terminatedState("i", 0)), regular: s(runningState("a")), want: v1.PodRunning},
		"Never: init failed":                 {policy: never, inits: s(terminatedState("i", 1)), regular: s(waitingState("a")), want: v1.PodFailed},
		"Never: init failed, waiting":        {policy: never, inits: s(waitingWithLastTermination("i", 1)), regular: s(waitingState("a")), want: v1.PodFailed},
		"OnFailure: init failed":             {policy: onFailure, inits: s(terminatedState("i", 1)), regular: s(waitingState("a")), want: v1.PodPending},
		"Always: init failed, in back-off":   {policy: always, inits: s(waitingWithLastTermination("i", 1)), regular: s(waitingState("a")), want: v1.PodPending},
		"Never: init waiting after exit 0":   {policy: never, inits: s(waitingWithLastTermination("i", 0)), want: v1.PodPending},

		"deleted: all succeeded":         {policy: always, regular: s(terminatedState("a", 0)), deleted: true, want: v1.PodSucceeded},
		"deleted: one failed":            {policy: always, regular: s(terminatedState("a", 0), terminatedState("b", 143)), deleted: true, want: v1.PodFailed},
		"deleted: never started":         {policy: always, regular: s(waitingState("a")), deleted: true, want: v1.PodFailed},
		"deleted: init never finished":   {policy: onFailure, inits: s(runningState("i")), deleted: true, want: v1.PodFailed},
		"deleted: still running":         {policy: always, regular: s(runningState("a")), deleted: true, want: v1.PodRunning},
		"deleted OnFailure: in back-off": {policy: onFailure, regular: s(waitingWithLastTermination("a", 1)), deleted: true, want: v1.PodFailed},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var inits, names []string
			for _, c := range tc.inits {
				inits = append(inits, c.Name)
			}
			for _, c := range tc.regular {
				names = append(names, c.Name)
			}
			pod := testutil.Pod(tc.policy, inits, names...)
			if got := podPhase(pod, tc.inits, tc.regular, tc.deleted); got != tc.want {
				t.Errorf("podPhase = %s, want %s", got, tc.want)
			}
		})
	}
}

var (
	t0  = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	now = t0.Add(time.Hour)
)

// rtCtr is one container attempt as cri reports it, with ID "<name>-<attempt>".
func rtCtr(name string, typ cri.ContainerType, attempt uint32, state cri.State, exit int32) cri.ContainerStatus {
	c := cri.ContainerStatus{ID: fmt.Sprintf("%s-%d", name, attempt), Name: name, Type: typ, Attempt: attempt, State: state,
		ExitCode: exit, Image: "busybox:1.36", ImageRef: "sha256:bb", CreatedAt: t0, StartedAt: t0.Add(time.Duration(attempt) * time.Minute)}
	if state == cri.StateExited {
		c.FinishedAt = c.StartedAt.Add(30 * time.Second)
	}
	return c
}

func reg(name string, attempt uint32, state cri.State, exit int32) cri.ContainerStatus {
	return rtCtr(name, cri.ContainerTypeRegular, attempt, state, exit)
}
func ini(name string, attempt uint32, state cri.State, exit int32) cri.ContainerStatus {
	return rtCtr(name, cri.ContainerTypeInit, attempt, state, exit)
}

func rtStatus(ready bool, cs ...cri.ContainerStatus) *cri.PodStatus {
	st := &cri.PodStatus{Ref: cri.PodRef{UID: "uid-1", Name: "web", Namespace: "prod"}, Containers: cs}
	st.Sandboxes = []cri.SandboxStatus{{ID: "sb", Ready: ready, IPs: []string{"10.0.0.5"}}}
	return st
}

func findCond(s v1.PodStatus, typ v1.PodConditionType) *v1.PodCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == typ {
			return &s.Conditions[i]
		}
	}
	return nil
}

type wantCond struct {
	status          v1.ConditionStatus
	reason, message string
}

func checkCond(t *testing.T, s v1.PodStatus, typ v1.PodConditionType, w wantCond) {
	t.Helper()
	c := findCond(s, typ)
	if c == nil {
		t.Errorf("no %s condition in %v", typ, s.Conditions)
		return
	}
	if c.Status != w.status || c.Reason != w.reason || c.Message != w.message {
		t.Errorf("%s = {%s %q %q}, want {%s %q %q}", typ, c.Status, c.Reason, c.Message, w.status, w.reason, w.message)
	}
}

func TestGenerateStatus(t *testing.T) {
	tru, fls := v1.ConditionTrue, v1.ConditionFalse
	unready := func(names string) wantCond {
		return wantCond{fls, "ContainersNotReady", "containers with unready status: [" + names + "]"}
	}
	tests := map[string]struct {
		pod     *v1.Pod
		rt      *cri.PodStatus
		waiting map[string]cri.Waiting
		deleted bool

		phase v1.PodPhase
		// container checks by name; init containers are prefixed "init:".
		check map[string]func(t *testing.T, cs v1.ContainerStatus)
		conds map[v1.PodConditionType]wantCond
	}{
		"nothing created yet: Pending, ContainerCreating": {
			pod: testutil.Pod(v1.RestartPolicyAlways, nil, "a"), rt: &cri.PodStatus{},
			phase: v1.PodPending,
			check: map[string]func(*testing.T, v1.ContainerStatus){"a": waitingReason(ReasonContainerCreating, "")},
			conds: map[v1.PodConditionType]wantCond{
				v1.PodReadyToStartContainers: {fls, "PodSandboxNotReady", "no pod sandbox exists"},
				v1.PodInitialized:            {status: tru},
				v1.ContainersReady:           unready("a"),
				v1.PodReady:                  unready("a"),
			},
		},
		"init containers done: completed ones are ready, failed ones not": {
			pod:   testutil.Pod(v1.RestartPolicyNever, []string{"i1", "i2"}, "a"),
			rt:    rtStatus(true, ini("i1", 0, cri.StateExited, 0), ini("i2", 0, cri.StateExited, 1)),
			phase: v1.PodFailed,
			check: map[string]func(*testing.T, v1.ContainerStatus){
				"init:i1": func(t *testing.T, cs v1.ContainerStatus) {
					if !cs.Ready || cs.State.Terminated == nil {
						t.Errorf("completed init container: ready %v state %+v, want ready and terminated", cs.Ready, cs.State)
					}
				},
				"init:i2": func(t *testing.T, cs v1.ContainerStatus) {
					if cs.Ready {
						t.Errorf("failed init container reported ready")
					}
				},
			},
		},
		"init running: PodInitializing": {
			pod:   testutil.Pod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
			rt:    rtStatus(true, ini("i1", 0, cri.StateRunning, 0)),
			phase: v1.PodPending,
			check: map[string]func(*testing.T, v1.ContainerStatus){
				"init:i1": isRunning,
				"init:i2": waitingReason(ReasonPodInitializing, ""),
				"a":       waitingReason(ReasonPodInitializing, ""),
			},
			conds: map[v1.PodConditionType]wantCond{
				v1.PodReadyToStartContainers: {status: tru},
				v1.PodInitialized:            {fls, "ContainersNotInitialized", "containers with incomplete status: [i1 i2]"},
				v1.ContainersReady:           unready("a"),
			},
		},
		"init failed and waiting to restart: Pending, not initialized": {
			pod:     testutil.Pod(v1.RestartPolicyOnFailure, []string{"i1"}, "a"),
			rt:      rtStatus(true, ini("i1", 0, cri.StateExited, 1)),
			waiting: map[string]cri.Waiting{"i1": {Reason: cri.ReasonCrashLoopBackOff, Message: "back-off 10s"}},
			phase:   v1.PodPending,
			check: map[string]func(*testing.T, v1.ContainerStatus){
				"init:i1": func(t *testing.T, cs v1.ContainerStatus) {
					waitingReason(cri.ReasonCrashLoopBackOff, "back-off 10s")(t, cs)
					lastExit(1, "Error")(t, cs)
				},
			},
			conds: map[v1.PodConditionType]wantCond{v1.PodInitialized: {fls, "ContainersNotInitialized", "containers with incomplete status: [i1]"}},
		},
		"Never: init failed: Failed": {
			pod:   testutil.Pod(v1.RestartPolicyNever, []string{"i1"}, "a"),
			rt:    rtStatus(true, ini("i1", 0, cri.StateExited, 1)),
			phase: v1.PodFailed,
		},
		"all running: Running and Ready": {
			pod:   testutil.Pod(v1.RestartPolicyAlways, []string{"i1"}, "a", "b"),
			rt:    rtStatus(true, reg("a", 0, cri.StateRunning, 0), reg("b", 0, cri.StateRunning, 0), ini("i1", 0, cri.StateExited, 0)),
			phase: v1.PodRunning,
			check: map[string]func(*testing.T, v1.ContainerStatus){
				"a": func(t *testing.T, cs v1.ContainerStatus) {
					isRunning(t, cs)
					if !cs.Ready || cs.Started == nil || !*cs.Started {
						t.Errorf("ready=%v started=%v, want both true", cs.Ready, cs.Started)
					}
					if cs.ContainerID != "containerd://a-0" || cs.ImageID != "sha256:bb" || cs.Image != "busybox:1.36" {
						t.Errorf("containerID %q imageID %q image %q", cs.ContainerID, cs.ImageID, cs.Image)
					}
					if !cs.State.Running.StartedAt.Time.Equal(t0) {
						t.Errorf("startedAt %v, want %v", cs.State.Running.StartedAt, t0)
					}
				},
				"init:i1": terminatedAs(0, "Completed"),
			},
			conds: map[v1.PodConditionType]wantCond{
				v1.PodReadyToStartContainers: {status: tru},
				v1.PodInitialized:            {status: tru},
				v1.ContainersReady:           {status: tru},
				v1.PodReady:                  {status: tru},
			},
		},
		"readiness probe not yet run: running but not ready": {
			pod: func() *v1.Pod {
				p := testutil.Pod(v1.RestartPolicyAlways, nil, "a")
				p.Spec.Containers[0].ReadinessProbe = &v1.Probe{}
				return p
			}(),
			rt:    rtStatus(true, reg("a", 0, cri.StateRunning, 0)),
			phase: v1.PodRunning,
			conds: map[v1.PodConditionType]wantCond{v1.PodReady: unready("a")},
		},
		"Never, all exited 0: Succeeded, PodCompleted": {
			pod:   testutil.Pod(v1.RestartPolicyNever, nil, "a", "b"),
			rt:    rtStatus(false, reg("a", 0, cri.StateExited, 0), reg("b", 0, cri.StateExited, 0)),
			phase: v1.PodSucceeded,
			check: map[string]func(*testing.T, v1.ContainerStatus){"a": terminatedAs(0, "Completed")},
			conds: map[v1.PodConditionType]wantCond{
				v1.PodReadyToStartContainers: {fls, "PodSandboxNotReady", "pod sandbox is not ready"},
				v1.ContainersReady:           {fls, "PodCompleted", ""},
				v1.PodReady:                  {fls, "PodCompleted", ""},
			},
		},
		"newest sandbox not ready, an older one ready: not ready to start containers": {
			pod: testutil.Pod(v1.RestartPolicyAlways, nil, "a"),
			rt: func() *cri.PodStatus {
				st := rtStatus(false, reg("a", 0, cri.StateRunning, 0))
				st.Sandboxes = append(st.Sandboxes, cri.SandboxStatus{ID: "sb-old", Ready: true})
				return st
			}(),
			phase: v1.PodRunning,
			conds: map[v1.PodConditionType]wantCond{
				v1.PodReadyToStartContainers: {fls, "PodSandboxNotReady", "pod sandbox is not ready"},
			},
		},
		"Succeeded: Initialized says PodCompleted": {
			pod:   testutil.Pod(v1.RestartPolicyNever, []string{"i1"}, "a"),
			rt:    rtStatus(false, reg("a", 0, cri.StateExited, 0), ini("i1", 0, cri.StateExited, 0)),
			phase: v1.PodSucceeded,
			conds: map[v1.PodConditionType]wantCond{v1.PodInitialized: {tru, "PodCompleted", ""}},
		},
		"Never, one exited 1: Failed": {
			pod:   testutil.Pod(v1.RestartPolicyNever, nil, "a", "b"),
			rt:    rtStatus(false, reg("a", 0, cri.StateExited, 0), reg("b", 0, cri.StateExited, 1)),
			phase: v1.PodFailed,
			check: map[string]func(*testing.T, v1.ContainerStatus){"b": terminatedAs(1, "Error")},
		},
		"Failed: ContainersReady and Ready say PodFailed": {
			pod:   testutil.Pod(v1.RestartPolicyNever, nil, "a"),
			rt:    rtStatus(false, reg("a", 0, cri.StateExited, 1)),
			phase: v1.PodFailed,
			conds: map[v1.PodConditionType]wantCond{
				v1.ContainersReady: {fls, "PodFailed", ""},
				v1.PodReady:        {fls, "PodFailed", ""},
			},
		},
		"OnFailure, exit 1 in back-off: Running": {
			pod:     testutil.Pod(v1.RestartPolicyOnFailure, nil, "a"),
			rt:      rtStatus(true, reg("a", 3, cri.StateExited, 1)),
			waiting: map[string]cri.Waiting{"a": {Reason: cri.ReasonCrashLoopBackOff, Message: "back-off 40s restarting failed container=a pod=web_prod(uid-1)"}},
			phase:   v1.PodRunning,
			check: map[string]func(*testing.T, v1.ContainerStatus){"a": func(t *testing.T, cs v1.ContainerStatus) {
				waitingReason(cri.ReasonCrashLoopBackOff, "back-off 40s restarting failed container=a pod=web_prod(uid-1)")(t, cs)
				lastExit(1, "Error")(t, cs)
				if cs.RestartCount != 3 || cs.Ready {
					t.Errorf("restartCount %d ready %v, want 3 and not ready", cs.RestartCount, cs.Ready)
				}
			}},
		},
		"OnFailure, exit 1 between syncs: Running": {
			pod:   testutil.Pod(v1.RestartPolicyOnFailure, nil, "a"),
			rt:    rtStatus(true, reg("a", 0, cri.StateExited, 1)),
			phase: v1.PodRunning,
		},
		"Always, all exited 0: Running": {
			pod:   testutil.Pod(v1.RestartPolicyAlways, nil, "a"),
			rt:    rtStatus(true, reg("a", 0, cri.StateExited, 0)),
			phase: v1.PodRunning,
		},
		"waiting with a last termination counts as stopped": {
			pod:     testutil.Pod(v1.RestartPolicyAlways, nil, "a", "b"),
			rt:      rtStatus(true, reg("a", 0, cri.StateRunning, 0), reg("b", 1, cri.StateExited, 2)),
			waiting: map[string]cri.Waiting{"b": {Reason: cri.ReasonCrashLoopBackOff}},
			phase:   v1.PodRunning,
		},
		"restart count, last state and container IDs": {
			pod:   testutil.Pod(v1.RestartPolicyAlways, nil, "a"),
			rt:    rtStatus(true, reg("a", 2, cri.StateRunning, 0), reg("a", 1, cri.StateExited, 137), reg("a", 0, cri.StateExited, 1)),
			phase: v1.PodRunning,
			check: map[string]func(*testing.T, v1.ContainerStatus){"a": func(t *testing.T, cs v1.ContainerStatus) {
				isRunning(t, cs)
				if cs.RestartCount != 2 || cs.ContainerID != "containerd://a-2" {
					t.Errorf("restartCount %d containerID %q, want 2 and containerd://a-2", cs.RestartCount, cs.ContainerID)
				}
				lastExit(137, "Error")(t, cs)
				if lt := cs.LastTerminationState.Terminated; lt != nil && lt.ContainerID != "containerd://a-1" {
					t.Errorf("last state containerID %q, want containerd://a-1", lt.ContainerID)
				}
			}},
		},
		"terminated keeps the attempt before as last state": {
			pod:   testutil.Pod(v1.RestartPolicyNever, nil, "a"),
			rt:    rtStatus(false, reg("a", 1, cri.StateExited, 0), reg("a", 0, cri.StateExited, 3)),
			phase: v1.PodSucceeded,
			check: map[string]func(*testing.T, v1.ContainerStatus){"a": func(t *testing.T, cs v1.ContainerStatus) {
				terminatedAs(0, "Completed")(t, cs)
				lastExit(3, "Error")(t, cs)
			}},
		},
		"OOMKilled": {
			pod: testutil.Pod(v1.RestartPolicyNever, nil, "a"),
			rt: func() *cri.PodStatus {
				c := reg("a", 0, cri.StateExited, 137)
				c.Reason = "OOMKilled"
				return rtStatus(false, c)
			}(),
			phase: v1.PodFailed,
			check: map[string]func(*testing.T, v1.ContainerStatus){"a": terminatedAs(137, "OOMKilled")},
		},
		"image pull failure before the container exists": {
			pod:     testutil.Pod(v1.RestartPolicyAlways, nil, "a"),
			rt:      rtStatus(true),
			waiting: map[string]cri.Waiting{"a": {Reason: cri.ReasonErrImagePull, Message: "manifest unknown"}},
			phase:   v1.PodPending,
			check:   map[string]func(*testing.T, v1.ContainerStatus){"a": waitingReason(cri.ReasonErrImagePull, "manifest unknown")},
		},
		"created but not started: ContainerCreating": {
			pod:   testutil.Pod(v1.RestartPolicyAlways, nil, "a"),
			rt:    rtStatus(true, reg("a", 0, cri.StateCreated, 0)),
			phase: v1.PodPending,
			check: map[string]func(*testing.T, v1.ContainerStatus){"a": waitingReason(ReasonContainerCreating, "")},
		},
		"deleted, Always, stopped with 0: Succeeded and terminated, not waiting": {
			pod:     testutil.Pod(v1.RestartPolicyAlways, nil, "a"),
			rt:      rtStatus(false, reg("a", 0, cri.StateExited, 0)),
			waiting: map[string]cri.Waiting{"a": {Reason: cri.ReasonCrashLoopBackOff}},
			deleted: true,
			phase:   v1.PodSucceeded,
			check:   map[string]func(*testing.T, v1.ContainerStatus){"a": terminatedAs(0, "Completed")},
		},
		"deleted, Always, killed with 143: Failed": {
			pod:     testutil.Pod(v1.RestartPolicyAlways, nil, "a"),
			rt:      rtStatus(false, reg("a", 0, cri.StateExited, 143)),
			deleted: true,
			phase:   v1.PodFailed,
		},
		"deleted static pod, Always, killed with 143: Running (the kubelet's TODO(#116484))": {
			pod: func() *v1.Pod {
				p := testutil.Pod(v1.RestartPolicyAlways, nil, "a")
				p.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
				return p
			}(),
			rt:      rtStatus(false, reg("a", 0, cri.StateExited, 143)),
			deleted: true,
			phase:   v1.PodRunning,
			check:   map[string]func(*testing.T, v1.ContainerStatus){"a": terminatedAs(143, "Error")},
		},
		"deleted before anything ran: Failed": {
			pod:     testutil.Pod(v1.RestartPolicyAlways, nil, "a"),
			rt:      &cri.PodStatus{},
			deleted: true,
			phase:   v1.PodFailed,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := Generate(Input{
				Pod: tc.pod, Runtime: tc.rt, Waiting: tc.waiting, Deleted: tc.deleted,
				RuntimeName: "containerd", NodeIP: "192.0.2.10", PodIPs: tc.rt.IPs(), Now: now,
			})
			if s.Phase != tc.phase {
				t.Errorf("phase %s, want %s", s.Phase, tc.phase)
			}
			if len(s.ContainerStatuses) != len(tc.pod.Spec.Containers) || len(s.InitContainerStatuses) != len(tc.pod.Spec.InitContainers) {
				t.Fatalf("%d container and %d init statuses, want one per container", len(s.ContainerStatuses), len(s.InitContainerStatuses))
			}
			for key, check := range tc.check {
				var cs *v1.ContainerStatus
				list, name := s.ContainerStatuses, key
				if len(key) > 5 && key[:5] == "init:" {
					list, name = s.InitContainerStatuses, key[5:]
				}
				for i := range list {
					if list[i].Name == name {
						cs = &list[i]
					}
				}
				if cs == nil {
					t.Errorf("no status for %s", key)
					continue
				}
				t.Run(key, func(t *testing.T) { check(t, *cs) })
			}
			for typ, w := range tc.conds {
				checkCond(t, s, typ, w)
			}
			if s.HostIP != "192.0.2.10" || len(s.HostIPs) != 1 {
				t.Errorf("hostIP %q hostIPs %v", s.HostIP, s.HostIPs)
			}
			if s.StartTime == nil || !s.StartTime.Time.Equal(now) {
				t.Errorf("startTime %v, want %v on the first status", s.StartTime, now)
			}
		})
	}
}

func isRunning(t *testing.T, cs v1.ContainerStatus) {
	t.Helper()
	if cs.State.Running == nil {
		t.Errorf("state %+v, want running", cs.State)
	}
}

func waitingReason(reason, msg string) func(*testing.T, v1.ContainerStatus) {
	return func(t *testing.T, cs v1.ContainerStatus) {
		t.Helper()
		w := cs.State.Waiting
		if w == nil || w.Reason != reason || w.Message != msg {
			t.Errorf("state %+v, want waiting %q %q", cs.State, reason, msg)
		}
		if cs.Ready {
			t.Errorf("a waiting container is ready")
		}
	}
}

func terminatedAs(code int32, reason string) func(*testing.T, v1.ContainerStatus) {
	return func(t *testing.T, cs v1.ContainerStatus) {
		t.Helper()
		tm := cs.State.Terminated
		if tm == nil || tm.ExitCode != code || tm.Reason != reason {
			t.Errorf("state %+v, want terminated %d %s", cs.State, code, reason)
			return
		}
		if tm.FinishedAt.IsZero() || tm.ContainerID == "" {
			t.Errorf("terminated %+v without finishedAt or containerID", tm)
		}
	}
}

func lastExit(code int32, reason string) func(*testing.T, v1.ContainerStatus) {
	return func(t *testing.T, cs v1.ContainerStatus) {
		t.Helper()
		lt := cs.LastTerminationState.Terminated
		if lt == nil || lt.ExitCode != code || lt.Reason != reason {
			t.Errorf("lastState %+v, want terminated %d %s", cs.LastTerminationState, code, reason)
		}
	}
}

func TestGenerateStatusConditionsOverTime(t *testing.T) {
	earlier := metav1.NewTime(t0)
	pod := testutil.Pod(v1.RestartPolicyAlways, nil, "a")
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/gate"}}
	scheduled := v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: earlier}
	gate := v1.PodCondition{Type: "example.com/gate", Status: v1.ConditionTrue, LastTransitionTime: earlier, Reason: "LBReady"}
	prev := v1.PodStatus{
		StartTime: &earlier,
		Conditions: []v1.PodCondition{
			scheduled, gate,
			{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: earlier},
			{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: earlier},
			{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: earlier},
			{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue, LastTransitionTime: earlier},
		},
	}
	tests := map[string]struct {
		rt        *cri.PodStatus
		moved     []v1.PodConditionType // transition time is now
		kept      []v1.PodConditionType // transition time stays earlier
		wantReady v1.ConditionStatus
	}{
		"unchanged status keeps every transition time": {
			rt:        rtStatus(true, reg("a", 0, cri.StateRunning, 0)),
			kept:      []v1.PodConditionType{v1.PodReady, v1.ContainersReady, v1.PodInitialized, v1.PodReadyToStartContainers},
			wantReady: v1.ConditionTrue,
		},
		"a crash moves Ready and ContainersReady only": {
			rt:        rtStatus(true, reg("a", 0, cri.StateExited, 1)),
			moved:     []v1.PodConditionType{v1.PodReady, v1.ContainersReady},
			kept:      []v1.PodConditionType{v1.PodInitialized, v1.PodReadyToStartContainers},
			wantReady: v1.ConditionFalse,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := Generate(Input{Pod: pod, Previous: *prev.DeepCopy(), Runtime: tc.rt, RuntimeName: "containerd", Now: now})
			for _, typ := range tc.kept {
				if c := findCond(s, typ); c == nil || !c.LastTransitionTime.Equal(&earlier) {
					t.Errorf("%s = %+v, want transition time kept at %v", typ, c, earlier)
				}
			}
			for _, typ := range tc.moved {
				if c := findCond(s, typ); c == nil || !c.LastTransitionTime.Time.Equal(now) {
					t.Errorf("%s = %+v, want transition time moved to %v", typ, c, now)
				}
			}
			if c := findCond(s, v1.PodReady); c == nil || c.Status != tc.wantReady {
				t.Errorf("Ready = %+v, want %s", c, tc.wantReady)
			}
			for _, foreign := range []v1.PodCondition{scheduled, gate} {
				c := findCond(s, foreign.Type)
				if c == nil || c.Status != foreign.Status || c.Reason != foreign.Reason || !c.LastTransitionTime.Equal(&foreign.LastTransitionTime) {
					t.Errorf("condition %s = %+v, want it kept as %+v", foreign.Type, c, foreign)
				}
			}
			seen := map[v1.PodConditionType]int{}
			for _, c := range s.Conditions {
				seen[c.Type]++
			}
			for typ, n := range seen {
				if n != 1 {
					t.Errorf("condition %s appears %d times", typ, n)
				}
			}
			if s.StartTime == nil || !s.StartTime.Equal(&earlier) {
				t.Errorf("startTime %v, want the previous %v", s.StartTime, earlier)
			}
		})
	}
}

func TestGenerateStatusReadinessGates(t *testing.T) {
	tests := map[string]struct {
		gate      *v1.PodCondition
		wantReady wantCond
	}{
		"gate True: Ready": {
			gate:      &v1.PodCondition{Type: "example.com/gate", Status: v1.ConditionTrue},
			wantReady: wantCond{status: v1.ConditionTrue},
		},
		"gate False: not Ready": {
			gate:      &v1.PodCondition{Type: "example.com/gate", Status: v1.ConditionFalse},
			wantReady: wantCond{v1.ConditionFalse, "ReadinessGatesNotReady", `the status of pod readiness gate "example.com/gate" is not "True", but False`},
		},
		"gate missing: not Ready": {
			wantReady: wantCond{v1.ConditionFalse, "ReadinessGatesNotReady", `corresponding condition of pod readiness gate "example.com/gate" does not exist.`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := testutil.Pod(v1.RestartPolicyAlways, nil, "a")
			pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/gate"}}
			var prev v1.PodStatus
			if tc.gate != nil {
				prev.Conditions = []v1.PodCondition{*tc.gate}
			}
			s := Generate(Input{Pod: pod, Previous: prev, Runtime: rtStatus(true, reg("a", 0, cri.StateRunning, 0)), Now: now})
			checkCond(t, s, v1.PodReady, tc.wantReady)
			checkCond(t, s, v1.ContainersReady, wantCond{status: v1.ConditionTrue})
		})
	}
}

func TestGenerateStatusTerminalPhaseIsFinal(t *testing.T) {
	tests := map[string]struct {
		prev v1.PodPhase
		rt   *cri.PodStatus
	}{
		"Succeeded, containers gone":  {prev: v1.PodSucceeded, rt: rtStatus(false)},
		"Failed, container restarted": {prev: v1.PodFailed, rt: rtStatus(true, reg("a", 1, cri.StateRunning, 0))},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := testutil.Pod(v1.RestartPolicyNever, nil, "a")
			s := Generate(Input{Pod: pod, Previous: v1.PodStatus{Phase: tc.prev}, Runtime: tc.rt, Now: now})
			if s.Phase != tc.prev {
				t.Errorf("phase %s, want it to stay %s", s.Phase, tc.prev)
			}
		})
	}
}

func TestContainerIDPrefix(t *testing.T) {
	tests := map[string]struct{ runtime, want string }{
		"containerd":   {"containerd", "containerd://abc"},
		"cri-o":        {"cri-o", "cri-o://abc"},
		"unknown name": {"", "cri://abc"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := containerID(tc.runtime, "abc"); got != tc.want {
				t.Errorf("containerID = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestGenerateStatusPodScheduled: a pod bound by spec.nodeName without the
// scheduler gets PodScheduled=True from the node (the kubelet's
// generateAPIPodStatus); a scheduler's condition is kept as it is.
func TestGenerateStatusPodScheduled(t *testing.T) {
	earlier := metav1.NewTime(t0)
	pod := testutil.Pod(v1.RestartPolicyAlways, nil, "a")
	rt := rtStatus(true, reg("a", 0, cri.StateRunning, 0))
	s := Generate(Input{Pod: pod, Runtime: rt, RuntimeName: "containerd", Now: now})
	if c := findCond(s, v1.PodScheduled); c == nil || c.Status != v1.ConditionTrue || !c.LastTransitionTime.Time.Equal(now) {
		t.Errorf("bound without a scheduler: PodScheduled %+v, want True since now", c)
	}
	byScheduler := v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: earlier}
	s = Generate(Input{Pod: pod, Previous: v1.PodStatus{Conditions: []v1.PodCondition{byScheduler}}, Runtime: rt, RuntimeName: "containerd", Now: now})
	if c := findCond(s, v1.PodScheduled); c == nil || !reflect.DeepEqual(*c, byScheduler) {
		t.Errorf("scheduled: PodScheduled %+v, want the scheduler's %+v", c, byScheduler)
	}
	n := 0
	for _, c := range s.Conditions {
		if c.Type == v1.PodScheduled {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d PodScheduled conditions, want 1", n)
	}
}

// TestGenerateStatusImageOfTheRunningContainer: after the spec's image
// changed, the container status shows the image of the container that
// exists until the new one replaces it (the kubelet reports the runtime's
// image), and the spec's image while none exists yet.
func TestGenerateStatusImageOfTheRunningContainer(t *testing.T) {
	pod := testutil.Pod(v1.RestartPolicyAlways, nil, "a")
	pod.Spec.Containers[0].Image = "busybox:2"
	s := Generate(Input{Pod: pod, Runtime: rtStatus(true, reg("a", 0, cri.StateRunning, 0)), RuntimeName: "containerd", Now: now})
	if got := s.ContainerStatuses[0].Image; got != "busybox:1.36" {
		t.Errorf("running old container: image %q, want the running one's busybox:1.36", got)
	}
	s = Generate(Input{Pod: pod, Runtime: rtStatus(true), RuntimeName: "containerd", Now: now})
	if got := s.ContainerStatuses[0].Image; got != "busybox:2" {
		t.Errorf("no container yet: image %q, want the spec's busybox:2", got)
	}
}

// TestGenerateStatusAfterKill: the status after a kill that carried a
// status function (Input.Killed: an eviction's or a preemption's, laid
// over the previous status), as the kubelet's generateAPIPodStatus makes
// it after SyncTerminatingPod's kill with that status cached: a terminal
// phase of the stopped containers wins (all exited 0: Succeeded), and the
// kill's reason and message stay only when the phases agree; the kill's
// DisruptionTarget stays either way. A static pod gets no terminal phase
// from its containers, so the kill's Failed stands.
func TestGenerateStatusAfterKill(t *testing.T) {
	dt := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonTerminationByKubelet,
		Message: "Pod was preempted by Kubelet to accommodate a critical pod.", LastTransitionTime: metav1.NewTime(t0)}
	killed := func(prev v1.PodStatus) *v1.PodStatus {
		k := prev.DeepCopy()
		k.Phase, k.Reason, k.Message = v1.PodFailed, "Preempting", "Preempted in order to admit critical pod"
		k.Conditions = append(k.Conditions, dt)
		return k
	}
	running := v1.PodStatus{Phase: v1.PodRunning}
	static := testutil.Pod(v1.RestartPolicyAlways, nil, "a", "b")
	static.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	for name, tc := range map[string]struct {
		pod                     *v1.Pod
		prev                    *v1.PodStatus
		rt                      *cri.PodStatus
		killed                  *v1.PodStatus
		wantPhase               v1.PodPhase
		wantReason, wantMessage string
		wantDisruption          bool
	}{
		"all exited 0: Succeeded, without the kill's reason": {
			rt:        rtStatus(false, reg("a", 0, cri.StateExited, 0), reg("b", 0, cri.StateExited, 0)),
			killed:    killed(running),
			wantPhase: v1.PodSucceeded, wantDisruption: true,
		},
		"one killed (137): Failed, with the kill's reason": {
			rt:        rtStatus(false, reg("a", 0, cri.StateExited, 0), reg("b", 0, cri.StateExited, 137)),
			killed:    killed(running),
			wantPhase: v1.PodFailed, wantReason: "Preempting", wantMessage: "Preempted in order to admit critical pod", wantDisruption: true,
		},
		"static pod, all exited 0: the kill's Failed": {
			pod:       static,
			rt:        rtStatus(false, reg("a", 0, cri.StateExited, 0), reg("b", 0, cri.StateExited, 0)),
			killed:    killed(running),
			wantPhase: v1.PodFailed, wantReason: "Preempting", wantMessage: "Preempted in order to admit critical pod", wantDisruption: true,
		},
		// Exited before the kill was asked (an OOM kill seen by the
		// relist just before the eviction): the status before the kill
		// was already Failed, with no reason; the kubelet cached the
		// kill's Failed, Evicted and DisruptionTarget over it, and keeps
		// them.
		"already Failed before the kill: the kill's reason and condition": {
			prev:      &v1.PodStatus{Phase: v1.PodFailed},
			rt:        rtStatus(false, reg("a", 0, cri.StateExited, 0), reg("b", 0, cri.StateExited, 137)),
			killed:    killed(v1.PodStatus{Phase: v1.PodFailed}),
			wantPhase: v1.PodFailed, wantReason: "Preempting", wantMessage: "Preempted in order to admit critical pod", wantDisruption: true,
		},
		"no kill status, all exited 0: Succeeded": {
			rt:        rtStatus(false, reg("a", 0, cri.StateExited, 0), reg("b", 0, cri.StateExited, 0)),
			wantPhase: v1.PodSucceeded,
		},
	} {
		t.Run(name, func(t *testing.T) {
			pod := tc.pod
			if pod == nil {
				pod = testutil.Pod(v1.RestartPolicyAlways, nil, "a", "b")
			}
			prev := running
			if tc.prev != nil {
				prev = *tc.prev
			}
			s := Generate(Input{Pod: pod, Previous: prev, Killed: tc.killed, Runtime: tc.rt, Deleted: true, Now: now})
			if s.Phase != tc.wantPhase || s.Reason != tc.wantReason || s.Message != tc.wantMessage {
				t.Errorf("status %s %q %q, want %s %q %q", s.Phase, s.Reason, s.Message, tc.wantPhase, tc.wantReason, tc.wantMessage)
			}
			if c := findCond(s, v1.DisruptionTarget); (c != nil) != tc.wantDisruption || (c != nil && !reflect.DeepEqual(*c, dt)) {
				t.Errorf("DisruptionTarget %+v, want it: %v", c, tc.wantDisruption)
			}
			reason, _ := terminalReason(tc.wantPhase)
			checkCond(t, s, v1.PodReady, wantCond{status: v1.ConditionFalse, reason: reason})
			checkCond(t, s, v1.ContainersReady, wantCond{status: v1.ConditionFalse, reason: reason})
		})
	}
}
