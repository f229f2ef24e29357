package cri

import (
	"fmt"
	"reflect"
	"sort"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// Builders for ComputePodActions inputs. Container IDs are "<name>-<attempt>"
// so that expected kill maps can be written by hand.

func actionsPod(policy v1.RestartPolicy, inits []string, containers ...string) *v1.Pod {
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "web", "default", "uid-1"
	pod.Spec.RestartPolicy = policy
	for _, n := range inits {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: n, Image: "busybox:1"})
	}
	for _, n := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: n, Image: "busybox:1"})
	}
	return pod
}

func sandbox(id string, attempt uint32, ready bool) SandboxStatus {
	return SandboxStatus{ID: id, Attempt: attempt, Ready: ready}
}

func ctr(name string, typ ContainerType, attempt uint32, state State, exit int32) ContainerStatus {
	return ContainerStatus{ID: fmt.Sprintf("%s-%d", name, attempt), Name: name, Type: typ, Attempt: attempt, State: state, ExitCode: exit}
}

func running(name string) ContainerStatus { return ctr(name, ContainerTypeRegular, 0, StateRunning, 0) }
func exited(name string, code int32) ContainerStatus {
	return ctr(name, ContainerTypeRegular, 0, StateExited, code)
}
func initCtr(name string, state State, code int32) ContainerStatus {
	return ctr(name, ContainerTypeInit, 0, state, code)
}

func readyStatus(cs ...ContainerStatus) *PodStatus {
	return &PodStatus{Sandboxes: []SandboxStatus{sandbox("sb-1", 1, true)}, Containers: cs}
}

// want builds the expected plan; NextInit defaults to -1.
type want struct {
	kill, create bool
	attempt      uint32
	sandboxID    string
	nextInit     *int
	start        []int
	killIDs      []string
	initFailed   bool
}

func intp(i int) *int { return &i }

func (w want) plan() PodActions {
	p := PodActions{KillPod: w.kill, CreateSandbox: w.create, Attempt: w.attempt, SandboxID: w.sandboxID,
		NextInit: -1, ContainersToStart: w.start, InitFailed: w.initFailed}
	if w.nextInit != nil {
		p.NextInit = *w.nextInit
	}
	return p
}

// normalize makes nil and empty slices and maps compare equal and keeps only
// the IDs of the kill map (the reasons are free text for logs).
func normalize(p PodActions) (PodActions, []string) {
	var ids []string
	for id := range p.ContainersToKill {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	p.ContainersToKill = nil
	if len(p.ContainersToStart) == 0 {
		p.ContainersToStart = nil
	}
	return p, ids
}

func TestComputePodActions(t *testing.T) {
	const (
		always    = v1.RestartPolicyAlways
		onFailure = v1.RestartPolicyOnFailure
		never     = v1.RestartPolicyNever
	)
	notReady := func(attempt uint32, cs ...ContainerStatus) *PodStatus {
		return &PodStatus{Sandboxes: []SandboxStatus{sandbox("sb-old", attempt, false)}, Containers: cs}
	}
	inits := []string{"i1", "i2"}
	tests := map[string]struct {
		pod    *v1.Pod
		status *PodStatus
		want   want
	}{
		"no sandbox: create attempt 0 and start every container": {
			pod:    actionsPod(always, nil, "a", "b"),
			status: &PodStatus{},
			want:   want{create: true, attempt: 0, start: []int{0, 1}},
		},
		"sandbox not ready: kill and create the next attempt": {
			pod:    actionsPod(always, nil, "a", "b"),
			status: notReady(2, running("a"), exited("b", 0)),
			want:   want{kill: true, create: true, attempt: 3, start: []int{0, 1}},
		},
		"the newest sandbox decides, older ready ones don't count": {
			pod: actionsPod(always, nil, "a"),
			status: &PodStatus{Sandboxes: []SandboxStatus{sandbox("sb-new", 4, false), sandbox("sb-old", 3, true)},
				Containers: []ContainerStatus{running("a")}},
			want: want{kill: true, create: true, attempt: 5, start: []int{0}},
		},
		"Never: sandbox gone after containers ran: no new sandbox": {
			pod:    actionsPod(never, nil, "a", "b"),
			status: notReady(1, exited("a", 0), exited("b", 1)),
			want:   want{kill: true, create: false, attempt: 2},
		},
		"Never: sandbox gone before any container ran: new sandbox": {
			pod:    actionsPod(never, nil, "a", "b"),
			status: notReady(2),
			want:   want{kill: true, create: true, attempt: 3, start: []int{0, 1}},
		},
		"OnFailure: new sandbox skips containers that succeeded": {
			pod:    actionsPod(onFailure, nil, "a", "b"),
			status: notReady(1, exited("a", 0), exited("b", 1)),
			want:   want{kill: true, create: true, attempt: 2, start: []int{1}},
		},
		"OnFailure: sandbox gone and every container succeeded: no new sandbox": {
			pod:    actionsPod(onFailure, nil, "a", "b"),
			status: notReady(1, exited("a", 0), exited("b", 0)),
			want:   want{kill: true, create: false, attempt: 2},
		},
		"Always: new sandbox restarts containers that succeeded": {
			pod:    actionsPod(always, nil, "a"),
			status: notReady(1, exited("a", 0)),
			want:   want{kill: true, create: true, attempt: 2, start: []int{0}},
		},
		"new sandbox with init containers starts the first init only": {
			pod:    actionsPod(always, inits, "a"),
			status: notReady(1, initCtr("i1", StateExited, 0), initCtr("i2", StateExited, 0), running("a")),
			want:   want{kill: true, create: true, attempt: 2, nextInit: intp(0)},
		},
		"ready sandbox, everything running: nothing to do": {
			pod:    actionsPod(always, nil, "a", "b"),
			status: readyStatus(running("a"), running("b")),
			want:   want{sandboxID: "sb-1"},
		},
		"ready sandbox, a container never created: start it": {
			pod:    actionsPod(always, nil, "a", "b"),
			status: readyStatus(running("a")),
			want:   want{sandboxID: "sb-1", start: []int{1}},
		},

		// Init containers run one at a time, in order.
		"init: first not started": {
			pod:    actionsPod(always, inits, "a"),
			status: readyStatus(),
			want:   want{sandboxID: "sb-1", nextInit: intp(0)},
		},
		"init: first running: wait": {
			pod:    actionsPod(always, inits, "a"),
			status: readyStatus(initCtr("i1", StateRunning, 0)),
			want:   want{sandboxID: "sb-1"},
		},
		"init: first succeeded: start the next": {
			pod:    actionsPod(always, inits, "a"),
			status: readyStatus(initCtr("i1", StateExited, 0)),
			want:   want{sandboxID: "sb-1", nextInit: intp(1)},
		},
		"init: all succeeded: start the regular containers": {
			pod:    actionsPod(always, inits, "a", "b"),
			status: readyStatus(initCtr("i2", StateExited, 0), initCtr("i1", StateExited, 0)),
			want:   want{sandboxID: "sb-1", start: []int{0, 1}},
		},
		"init: failed under Never: the pod failed": {
			pod:    actionsPod(never, inits, "a"),
			status: readyStatus(initCtr("i1", StateExited, 1)),
			want:   want{sandboxID: "sb-1", initFailed: true},
		},
		"init: failed under OnFailure: run it again": {
			pod:    actionsPod(onFailure, inits, "a"),
			status: readyStatus(initCtr("i1", StateExited, 1)),
			want:   want{sandboxID: "sb-1", nextInit: intp(0)},
		},
		"init: second failed under Always: run it again, not the first": {
			pod:    actionsPod(always, inits, "a"),
			status: readyStatus(initCtr("i2", StateExited, 2), initCtr("i1", StateExited, 0)),
			want:   want{sandboxID: "sb-1", nextInit: intp(1)},
		},
		"init: newest attempt decides (older failure, newer success)": {
			pod: actionsPod(never, []string{"i1"}, "a"),
			status: readyStatus(ctr("i1", ContainerTypeInit, 1, StateExited, 0),
				ctr("i1", ContainerTypeInit, 0, StateExited, 1)),
			want: want{sandboxID: "sb-1", start: []int{0}},
		},
		"init: created but not started: kill and replace": {
			pod:    actionsPod(always, inits, "a"),
			status: readyStatus(initCtr("i1", StateCreated, 0)),
			want:   want{sandboxID: "sb-1", nextInit: intp(0), killIDs: []string{"i1-0"}},
		},
		"init: unknown under OnFailure: kill and replace": {
			pod:    actionsPod(onFailure, inits, "a"),
			status: readyStatus(initCtr("i1", StateUnknown, 0)),
			want:   want{sandboxID: "sb-1", nextInit: intp(0), killIDs: []string{"i1-0"}},
		},
		"init: unknown under Never: the pod failed": {
			pod:    actionsPod(never, inits, "a"),
			status: readyStatus(initCtr("i1", StateUnknown, 0)),
			want:   want{sandboxID: "sb-1", initFailed: true},
		},
		"init status is looked up by type: a regular container of the same name does not count": {
			pod:    actionsPod(always, []string{"x"}, "a"),
			status: readyStatus(ctr("x", ContainerTypeRegular, 0, StateExited, 0)),
			want:   want{sandboxID: "sb-1", nextInit: intp(0)},
		},

		// Regular containers follow the restart policy.
		"Always, exit 0: restart":      {pod: actionsPod(always, nil, "a"), status: readyStatus(exited("a", 0)), want: want{sandboxID: "sb-1", start: []int{0}}},
		"Always, exit 1: restart":      {pod: actionsPod(always, nil, "a"), status: readyStatus(exited("a", 1)), want: want{sandboxID: "sb-1", start: []int{0}}},
		"OnFailure, exit 0: leave it":  {pod: actionsPod(onFailure, nil, "a"), status: readyStatus(exited("a", 0)), want: want{sandboxID: "sb-1"}},
		"OnFailure, exit 1: restart":   {pod: actionsPod(onFailure, nil, "a"), status: readyStatus(exited("a", 1)), want: want{sandboxID: "sb-1", start: []int{0}}},
		"Never, exit 0: leave it":      {pod: actionsPod(never, nil, "a"), status: readyStatus(exited("a", 0)), want: want{sandboxID: "sb-1"}},
		"Never, exit 1: leave it":      {pod: actionsPod(never, nil, "a"), status: readyStatus(exited("a", 1)), want: want{sandboxID: "sb-1"}},
		"empty policy means Always":    {pod: actionsPod("", nil, "a"), status: readyStatus(exited("a", 0)), want: want{sandboxID: "sb-1", start: []int{0}}},
		"only the exited one restarts": {pod: actionsPod(always, nil, "a", "b"), status: readyStatus(running("a"), exited("b", 137)), want: want{sandboxID: "sb-1", start: []int{1}}},
		"newest attempt decides (older exited, newer running)": {
			pod:    actionsPod(always, nil, "a"),
			status: readyStatus(ctr("a", ContainerTypeRegular, 1, StateRunning, 0), ctr("a", ContainerTypeRegular, 0, StateExited, 1)),
			want:   want{sandboxID: "sb-1"},
		},
		"created: kill and replace": {
			pod:    actionsPod(always, nil, "a", "b"),
			status: readyStatus(running("a"), ctr("b", ContainerTypeRegular, 0, StateCreated, 0)),
			want:   want{sandboxID: "sb-1", start: []int{1}, killIDs: []string{"b-0"}},
		},
		"unknown: kill and replace": {
			pod:    actionsPod(onFailure, nil, "a"),
			status: readyStatus(ctr("a", ContainerTypeRegular, 2, StateUnknown, 0)),
			want:   want{sandboxID: "sb-1", start: []int{0}, killIDs: []string{"a-2"}},
		},
		"Never, unknown: kill and replace (kubelet always restarts unknown)": {
			pod:    actionsPod(never, nil, "a"),
			status: readyStatus(ctr("a", ContainerTypeRegular, 0, StateUnknown, 0)),
			want:   want{sandboxID: "sb-1", start: []int{0}, killIDs: []string{"a-0"}},
		},
		"Never, created: replace (kubelet always restarts created)": {
			pod:    actionsPod(never, nil, "a"),
			status: readyStatus(ctr("a", ContainerTypeRegular, 0, StateCreated, 0)),
			want:   want{sandboxID: "sb-1", start: []int{0}, killIDs: []string{"a-0"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, gotKill := normalize(ComputePodActions(tc.pod, tc.status, PlanInputs{}))
			wantPlan, wantKill := normalize(tc.want.plan())
			if len(tc.want.killIDs) > 0 {
				wantKill = append([]string(nil), tc.want.killIDs...)
				sort.Strings(wantKill)
			}
			if !reflect.DeepEqual(got, wantPlan) {
				t.Errorf("plan:\n got  %+v (%s)\n want %+v (%s)", got, got, wantPlan, wantPlan)
			}
			if !reflect.DeepEqual(gotKill, wantKill) {
				t.Errorf("containers to kill: got %v, want %v", gotKill, wantKill)
			}
		})
	}
}

func TestShouldRestart(t *testing.T) {
	tests := map[string]struct {
		policy v1.RestartPolicy
		exit   int32
		want   bool
	}{
		"Always 0":    {v1.RestartPolicyAlways, 0, true},
		"Always 1":    {v1.RestartPolicyAlways, 1, true},
		"OnFailure 0": {v1.RestartPolicyOnFailure, 0, false},
		"OnFailure 1": {v1.RestartPolicyOnFailure, 1, true},
		"Never 0":     {v1.RestartPolicyNever, 0, false},
		"Never 137":   {v1.RestartPolicyNever, 137, false},
		"empty 0":     {"", 0, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ShouldRestart(tc.policy, tc.exit); got != tc.want {
				t.Errorf("ShouldRestart(%q, %d) = %v, want %v", tc.policy, tc.exit, got, tc.want)
			}
		})
	}
}

func TestPodActionsString(t *testing.T) {
	tests := map[string]struct {
		plan PodActions
		want string
	}{
		"empty":    {PodActions{NextInit: -1}, "none"},
		"all":      {PodActions{KillPod: true, CreateSandbox: true, Attempt: 2, NextInit: 1, ContainersToStart: []int{0}, ContainersToKill: map[string]string{"x": "y"}, InitFailed: true}, "kill-pod,create-sandbox(attempt 2),start-init[1],start[0],kill(1),init-failed"},
		"starting": {PodActions{NextInit: -1, ContainersToStart: []int{0, 2}}, "start[0 2]"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.plan.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestComputePodActionsEphemeral: an ephemeral container starts once in a
// running sandbox, even while the pod initializes, and never again after
// it ran; none starts in a sandbox about to be created.
func TestComputePodActionsEphemeral(t *testing.T) {
	withDebug := func(pod *v1.Pod) *v1.Pod {
		pod.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug", Image: "busybox:1"}}}
		return pod
	}
	running := []SandboxStatus{sandbox("sb", 0, true)}
	for name, tc := range map[string]struct {
		pod    *v1.Pod
		status *PodStatus
		want   []int
	}{
		"added to a running pod": {pod: withDebug(actionsPod(v1.RestartPolicyAlways, nil, "a")),
			status: &PodStatus{Sandboxes: running, Containers: []ContainerStatus{ctr("a", ContainerTypeRegular, 0, StateRunning, 0)}}, want: []int{0}},
		"while an init container runs": {pod: withDebug(actionsPod(v1.RestartPolicyAlways, []string{"i"}, "a")),
			status: &PodStatus{Sandboxes: running, Containers: []ContainerStatus{ctr("i", ContainerTypeInit, 0, StateRunning, 0)}}, want: []int{0}},
		"exited: never restarted": {pod: withDebug(actionsPod(v1.RestartPolicyAlways, nil, "a")),
			status: &PodStatus{Sandboxes: running, Containers: []ContainerStatus{ctr("a", ContainerTypeRegular, 0, StateRunning, 0), ctr("debug", ContainerTypeEphemeral, 0, StateExited, 1)}}},
		"running: nothing to do": {pod: withDebug(actionsPod(v1.RestartPolicyAlways, nil, "a")),
			status: &PodStatus{Sandboxes: running, Containers: []ContainerStatus{ctr("a", ContainerTypeRegular, 0, StateRunning, 0), ctr("debug", ContainerTypeEphemeral, 0, StateRunning, 0)}}},
		"no sandbox yet": {pod: withDebug(actionsPod(v1.RestartPolicyAlways, nil, "a")), status: &PodStatus{}},
	} {
		t.Run(name, func(t *testing.T) {
			got := ComputePodActions(tc.pod, tc.status, PlanInputs{})
			if fmt.Sprint(got.EphemeralToStart) != fmt.Sprint(tc.want) {
				t.Errorf("EphemeralToStart %v, want %v (plan %s)", got.EphemeralToStart, tc.want, got)
			}
			if len(tc.want) == 0 && len(got.EphemeralToStart) == 0 {
				return
			}
			if got.Empty() {
				t.Error("a plan that starts an ephemeral container reports Empty")
			}
		})
	}
}
