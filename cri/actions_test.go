package cri

import (
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// Builders for ComputePodActions inputs (the pod is testutil.Pod). Container
// IDs are "<name>-<attempt>" so that expected kill maps can be written by
// hand.

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
	sidecars     []int
	killIDs      []string
	initFailed   bool
	remove       []string
}

func intp(i int) *int { return &i }

func (w want) plan() PodActions {
	p := PodActions{KillPod: w.kill, CreateSandbox: w.create, Attempt: w.attempt, SandboxID: w.sandboxID,
		NextInit: -1, ContainersToStart: w.start, SidecarsToStart: w.sidecars, InitFailed: w.initFailed, ContainersToRemove: w.remove}
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
			pod:    testutil.Pod(always, nil, "a", "b"),
			status: &PodStatus{},
			want:   want{create: true, attempt: 0, start: []int{0, 1}},
		},
		"sandbox not ready: kill and create the next attempt": {
			pod:    testutil.Pod(always, nil, "a", "b"),
			status: notReady(2, running("a"), exited("b", 0)),
			want:   want{kill: true, create: true, attempt: 3, start: []int{0, 1}},
		},
		"the newest sandbox decides, older ready ones don't count": {
			pod: testutil.Pod(always, nil, "a"),
			status: &PodStatus{Sandboxes: []SandboxStatus{sandbox("sb-new", 4, false), sandbox("sb-old", 3, true)},
				Containers: []ContainerStatus{running("a")}},
			want: want{kill: true, create: true, attempt: 5, start: []int{0}},
		},
		"Never: sandbox gone after containers ran: no new sandbox": {
			pod:    testutil.Pod(never, nil, "a", "b"),
			status: notReady(1, exited("a", 0), exited("b", 1)),
			want:   want{kill: true, create: false, attempt: 2},
		},
		"Never: sandbox gone before any container ran: new sandbox": {
			pod:    testutil.Pod(never, nil, "a", "b"),
			status: notReady(2),
			want:   want{kill: true, create: true, attempt: 3, start: []int{0, 1}},
		},
		"OnFailure: new sandbox skips containers that succeeded": {
			pod:    testutil.Pod(onFailure, nil, "a", "b"),
			status: notReady(1, exited("a", 0), exited("b", 1)),
			want:   want{kill: true, create: true, attempt: 2, start: []int{1}},
		},
		"OnFailure: sandbox gone and every container succeeded: no new sandbox": {
			pod:    testutil.Pod(onFailure, nil, "a", "b"),
			status: notReady(1, exited("a", 0), exited("b", 0)),
			want:   want{kill: true, create: false, attempt: 2},
		},
		"Always: new sandbox restarts containers that succeeded": {
			pod:    testutil.Pod(always, nil, "a"),
			status: notReady(1, exited("a", 0)),
			want:   want{kill: true, create: true, attempt: 2, start: []int{0}},
		},
		"new sandbox with init containers starts the first init only": {
			pod:    testutil.Pod(always, inits, "a"),
			status: notReady(1, initCtr("i1", StateExited, 0), initCtr("i2", StateExited, 0), running("a")),
			want:   want{kill: true, create: true, attempt: 2, nextInit: intp(0)},
		},
		"OnFailure with init containers: sandbox gone and every container succeeded: no new sandbox": {
			pod:    testutil.Pod(onFailure, inits, "a", "b"),
			status: notReady(1, exited("a", 0), exited("b", 0), initCtr("i2", StateExited, 0), initCtr("i1", StateExited, 0)),
			want:   want{kill: true, create: false, attempt: 2},
		},
		"OnFailure with init containers: sandbox gone, a container failed: new sandbox, first init": {
			pod:    testutil.Pod(onFailure, inits, "a", "b"),
			status: notReady(1, exited("a", 0), exited("b", 1), initCtr("i2", StateExited, 0), initCtr("i1", StateExited, 0)),
			want:   want{kill: true, create: true, attempt: 2, nextInit: intp(0)},
		},
		"ready sandbox, everything running: nothing to do": {
			pod:    testutil.Pod(always, nil, "a", "b"),
			status: readyStatus(running("a"), running("b")),
			want:   want{sandboxID: "sb-1"},
		},
		"ready sandbox, a container never created: start it": {
			pod:    testutil.Pod(always, nil, "a", "b"),
			status: readyStatus(running("a")),
			want:   want{sandboxID: "sb-1", start: []int{1}},
		},

		// Init containers run one at a time, in order.
		"init: first not started": {
			pod:    testutil.Pod(always, inits, "a"),
			status: readyStatus(),
			want:   want{sandboxID: "sb-1", nextInit: intp(0)},
		},
		"init: first running: wait": {
			pod:    testutil.Pod(always, inits, "a"),
			status: readyStatus(initCtr("i1", StateRunning, 0)),
			want:   want{sandboxID: "sb-1"},
		},
		"init: first succeeded: start the next": {
			pod:    testutil.Pod(always, inits, "a"),
			status: readyStatus(initCtr("i1", StateExited, 0)),
			want:   want{sandboxID: "sb-1", nextInit: intp(1)},
		},
		"init: all succeeded: start the regular containers": {
			pod:    testutil.Pod(always, inits, "a", "b"),
			status: readyStatus(initCtr("i2", StateExited, 0), initCtr("i1", StateExited, 0)),
			want:   want{sandboxID: "sb-1", start: []int{0, 1}},
		},
		"init: failed under Never: the pod failed": {
			pod:    testutil.Pod(never, inits, "a"),
			status: readyStatus(initCtr("i1", StateExited, 1)),
			want:   want{sandboxID: "sb-1", initFailed: true},
		},
		"init: failed under OnFailure: run it again": {
			pod:    testutil.Pod(onFailure, inits, "a"),
			status: readyStatus(initCtr("i1", StateExited, 1)),
			want:   want{sandboxID: "sb-1", nextInit: intp(0)},
		},
		"init: second failed under Always: run it again, not the first": {
			pod:    testutil.Pod(always, inits, "a"),
			status: readyStatus(initCtr("i2", StateExited, 2), initCtr("i1", StateExited, 0)),
			want:   want{sandboxID: "sb-1", nextInit: intp(1)},
		},
		"init: newest attempt decides (older failure, newer success); the older is removed": {
			pod: testutil.Pod(never, []string{"i1"}, "a"),
			status: readyStatus(ctr("i1", ContainerTypeInit, 1, StateExited, 0),
				ctr("i1", ContainerTypeInit, 0, StateExited, 1)),
			want: want{sandboxID: "sb-1", start: []int{0}, remove: []string{"i1-0"}},
		},
		"init: created but not started: kill and replace": {
			pod:    testutil.Pod(always, inits, "a"),
			status: readyStatus(initCtr("i1", StateCreated, 0)),
			want:   want{sandboxID: "sb-1", nextInit: intp(0), killIDs: []string{"i1-0"}},
		},
		"init: unknown under OnFailure: kill and replace": {
			pod:    testutil.Pod(onFailure, inits, "a"),
			status: readyStatus(initCtr("i1", StateUnknown, 0)),
			want:   want{sandboxID: "sb-1", nextInit: intp(0), killIDs: []string{"i1-0"}},
		},
		"init: unknown under Never: the pod failed": {
			pod:    testutil.Pod(never, inits, "a"),
			status: readyStatus(initCtr("i1", StateUnknown, 0)),
			want:   want{sandboxID: "sb-1", initFailed: true},
		},
		"init status is looked up by type: a regular container of the same name does not count": {
			pod:    testutil.Pod(always, []string{"x"}, "a"),
			status: readyStatus(ctr("x", ContainerTypeRegular, 0, StateExited, 0)),
			want:   want{sandboxID: "sb-1", nextInit: intp(0)},
		},

		// Regular containers follow the restart policy.
		"Always, exit 0: restart":      {pod: testutil.Pod(always, nil, "a"), status: readyStatus(exited("a", 0)), want: want{sandboxID: "sb-1", start: []int{0}}},
		"Always, exit 1: restart":      {pod: testutil.Pod(always, nil, "a"), status: readyStatus(exited("a", 1)), want: want{sandboxID: "sb-1", start: []int{0}}},
		"OnFailure, exit 0: leave it":  {pod: testutil.Pod(onFailure, nil, "a"), status: readyStatus(exited("a", 0)), want: want{sandboxID: "sb-1"}},
		"OnFailure, exit 1: restart":   {pod: testutil.Pod(onFailure, nil, "a"), status: readyStatus(exited("a", 1)), want: want{sandboxID: "sb-1", start: []int{0}}},
		"Never, exit 0: leave it":      {pod: testutil.Pod(never, nil, "a"), status: readyStatus(exited("a", 0)), want: want{sandboxID: "sb-1"}},
		"Never, exit 1: leave it":      {pod: testutil.Pod(never, nil, "a"), status: readyStatus(exited("a", 1)), want: want{sandboxID: "sb-1"}},
		"empty policy means Always":    {pod: testutil.Pod("", nil, "a"), status: readyStatus(exited("a", 0)), want: want{sandboxID: "sb-1", start: []int{0}}},
		"only the exited one restarts": {pod: testutil.Pod(always, nil, "a", "b"), status: readyStatus(running("a"), exited("b", 137)), want: want{sandboxID: "sb-1", start: []int{1}}},
		"newest attempt decides (older exited, newer running)": {
			pod:    testutil.Pod(always, nil, "a"),
			status: readyStatus(ctr("a", ContainerTypeRegular, 1, StateRunning, 0), ctr("a", ContainerTypeRegular, 0, StateExited, 1)),
			want:   want{sandboxID: "sb-1"},
		},
		"created: kill and replace": {
			pod:    testutil.Pod(always, nil, "a", "b"),
			status: readyStatus(running("a"), ctr("b", ContainerTypeRegular, 0, StateCreated, 0)),
			want:   want{sandboxID: "sb-1", start: []int{1}, killIDs: []string{"b-0"}},
		},
		"unknown: kill and replace": {
			pod:    testutil.Pod(onFailure, nil, "a"),
			status: readyStatus(ctr("a", ContainerTypeRegular, 2, StateUnknown, 0)),
			want:   want{sandboxID: "sb-1", start: []int{0}, killIDs: []string{"a-2"}},
		},
		"Never, unknown: kill and replace (kubelet always restarts unknown)": {
			pod:    testutil.Pod(never, nil, "a"),
			status: readyStatus(ctr("a", ContainerTypeRegular, 0, StateUnknown, 0)),
			want:   want{sandboxID: "sb-1", start: []int{0}, killIDs: []string{"a-0"}},
		},
		"Never, created: replace (kubelet always restarts created)": {
			pod:    testutil.Pod(never, nil, "a"),
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

// TestComputePodActionsInitSequence: the init sequence of the node e2e
// reboot spec's pod (init-1, the sidecar restartable-init-2, init-3, then
// regular-1), decided as the kubelet's computeInitContainerActions: the
// pod is initialized from the start only while a regular container is
// created or running, and the init containers are read from the last
// back.
func TestComputePodActionsInitSequence(t *testing.T) {
	pod := testutil.Pod(v1.RestartPolicyAlways, []string{"init-1", "restartable-init-2", "init-3"}, "regular-1")
	pod.Spec.InitContainers[1].RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
	// After the reboot: sandbox attempt 1 is ready, the old init
	// containers were purged, regular-1's instance of attempt 0 exited.
	rebooted := func(cs ...ContainerStatus) *PodStatus {
		return &PodStatus{Sandboxes: []SandboxStatus{sandbox("sb-2", 1, true), sandbox("sb-1", 0, false)}, Containers: cs}
	}
	again := func(name string, state State, code int32) ContainerStatus {
		return ctr(name, ContainerTypeInit, 1, state, code)
	}
	oldRegular := exited("regular-1", 137)
	tests := map[string]struct {
		status *PodStatus
		want   want
	}{
		"reboot: sandbox stopped, every container exited: kill, new sandbox, init-1 only": {
			status: &PodStatus{Sandboxes: []SandboxStatus{sandbox("sb-1", 0, false)}, Containers: []ContainerStatus{
				exited("regular-1", 137), initCtr("init-3", StateExited, 0),
				initCtr("restartable-init-2", StateExited, 137), initCtr("init-1", StateExited, 0)}},
			want: want{kill: true, create: true, attempt: 1, nextInit: intp(0)},
		},
		"after the reboot, init-1 runs: the exited regular-1 does not make the pod initialized": {
			status: rebooted(again("init-1", StateRunning, 0), oldRegular),
			want:   want{sandboxID: "sb-2"},
		},
		"after the reboot, init-1 exited 0: the sidecar next": {
			status: rebooted(again("init-1", StateExited, 0), oldRegular),
			want:   want{sandboxID: "sb-2", nextInit: intp(1)},
		},
		"after the reboot, the sidecar runs: init-3 next": {
			status: rebooted(again("restartable-init-2", StateRunning, 0), again("init-1", StateExited, 0), oldRegular),
			want:   want{sandboxID: "sb-2", nextInit: intp(2)},
		},
		"after the reboot, init-3 runs: wait": {
			status: rebooted(again("init-3", StateRunning, 0), again("restartable-init-2", StateRunning, 0), again("init-1", StateExited, 0), oldRegular),
			want:   want{sandboxID: "sb-2"},
		},
		"after the reboot, init-3 exited 0: regular-1 starts": {
			status: rebooted(again("init-3", StateExited, 0), again("restartable-init-2", StateRunning, 0), again("init-1", StateExited, 0), oldRegular),
			want:   want{sandboxID: "sb-2", start: []int{0}},
		},
		"after the reboot, the sidecar exited during initialization: it starts again, init-3 waits": {
			status: rebooted(again("restartable-init-2", StateExited, 1), again("init-1", StateExited, 0), oldRegular),
			want:   want{sandboxID: "sb-2", nextInit: intp(1)},
		},
		"regular-1 crashed in a ready sandbox, init containers done and present: only regular-1 restarts": {
			status: readyStatus(exited("regular-1", 1), initCtr("init-3", StateExited, 0),
				initCtr("restartable-init-2", StateRunning, 0), initCtr("init-1", StateExited, 0)),
			want: want{sandboxID: "sb-1", start: []int{0}},
		},
		"regular-1 crashed, the sidecar too: init-3's success says initialized, both start again": {
			status: readyStatus(exited("regular-1", 1), initCtr("init-3", StateExited, 0),
				initCtr("restartable-init-2", StateExited, 1), initCtr("init-1", StateExited, 0)),
			want: want{sandboxID: "sb-1", start: []int{0}, sidecars: []int{1}},
		},
		"init containers removed (the container GC), regular-1 running: only the sidecar starts again": {
			status: readyStatus(running("regular-1")),
			want:   want{sandboxID: "sb-1", sidecars: []int{1}},
		},
		"the first init containers removed, init-3's instance left: initialized, regular-1 restarts": {
			status: readyStatus(exited("regular-1", 1), initCtr("init-3", StateExited, 0), initCtr("restartable-init-2", StateRunning, 0)),
			want:   want{sandboxID: "sb-1", start: []int{0}},
		},
		// The kubelet's limit, kept: nothing tells an exited regular
		// container of this sandbox from one of a sandbox gone since.
		"init containers removed and regular-1 exited: the init sequence runs again from the first": {
			status: readyStatus(exited("regular-1", 1)),
			want:   want{sandboxID: "sb-1", nextInit: intp(0)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, gotKill := normalize(ComputePodActions(pod, tc.status, PlanInputs{}))
			wantPlan, wantKill := normalize(tc.want.plan())
			if !reflect.DeepEqual(got, wantPlan) {
				t.Errorf("plan:\n got  %+v (%s)\n want %+v (%s)", got, got, wantPlan, wantPlan)
			}
			if !reflect.DeepEqual(gotKill, wantKill) {
				t.Errorf("containers to kill: got %v, want %v", gotKill, wantKill)
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
		"all":      {PodActions{KillPod: true, CreateSandbox: true, Attempt: 2, NextInit: 1, ContainersToStart: []int{0}, ContainersToKill: map[string]Kill{"x": {Reason: "y"}}, InitFailed: true}, "kill-pod,create-sandbox(attempt 2),start-init[1],start[0],kill(1),init-failed"},
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
		"added to a running pod": {pod: withDebug(testutil.Pod(v1.RestartPolicyAlways, nil, "a")),
			status: &PodStatus{Sandboxes: running, Containers: []ContainerStatus{ctr("a", ContainerTypeRegular, 0, StateRunning, 0)}}, want: []int{0}},
		"while an init container runs": {pod: withDebug(testutil.Pod(v1.RestartPolicyAlways, []string{"i"}, "a")),
			status: &PodStatus{Sandboxes: running, Containers: []ContainerStatus{ctr("i", ContainerTypeInit, 0, StateRunning, 0)}}, want: []int{0}},
		"exited: never restarted": {pod: withDebug(testutil.Pod(v1.RestartPolicyAlways, nil, "a")),
			status: &PodStatus{Sandboxes: running, Containers: []ContainerStatus{ctr("a", ContainerTypeRegular, 0, StateRunning, 0), ctr("debug", ContainerTypeEphemeral, 0, StateExited, 1)}}},
		"running: nothing to do": {pod: withDebug(testutil.Pod(v1.RestartPolicyAlways, nil, "a")),
			status: &PodStatus{Sandboxes: running, Containers: []ContainerStatus{ctr("a", ContainerTypeRegular, 0, StateRunning, 0), ctr("debug", ContainerTypeEphemeral, 0, StateRunning, 0)}}},
		"no sandbox yet": {pod: withDebug(testutil.Pod(v1.RestartPolicyAlways, nil, "a")), status: &PodStatus{}},
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

// TestComputePodActionsProbeKills: a running container that failed its
// liveness or startup probe is killed by the plan with the kubelet's
// Killing message and the probe's grace override, and started again in the
// same plan unless the policy is Never (the kubelet's computePodActions);
// readiness never kills, nor does another container's result; a sidecar is
// always started again.
func TestComputePodActionsProbeKills(t *testing.T) {
	probed := func(policy v1.RestartPolicy, probeGrace *int64) *v1.Pod {
		pod := testutil.Pod(policy, nil, "a")
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](17)
		pod.Spec.Containers[0].LivenessProbe = &v1.Probe{TerminationGracePeriodSeconds: probeGrace}
		pod.Spec.Containers[0].StartupProbe = &v1.Probe{TerminationGracePeriodSeconds: probeGrace}
		return pod
	}
	failed := func(id, probe string) func(string) (string, bool) {
		return func(c string) (string, bool) { return probe, c == id && probe != "readiness" }
	}
	for name, tc := range map[string]struct {
		pod       *v1.Pod
		status    *PodStatus
		failed    func(string) (string, bool)
		wantKill  *Kill
		wantStart []int
	}{
		"liveness failure: killed and restarted": {pod: probed(v1.RestartPolicyAlways, nil), status: readyStatus(running("a")),
			failed:    failed("a-0", "liveness"),
			wantKill:  &Kill{Name: "a", Type: ContainerTypeRegular, Message: "Container a failed liveness probe, will be restarted", Grace: 17},
			wantStart: []int{0}},
		"liveness failure, probe's grace, OnFailure restarts": {pod: probed(v1.RestartPolicyOnFailure, ptr.To[int64](3)), status: readyStatus(running("a")),
			failed:    failed("a-0", "liveness"),
			wantKill:  &Kill{Name: "a", Type: ContainerTypeRegular, Message: "Container a failed liveness probe, will be restarted", Grace: 3},
			wantStart: []int{0}},
		"liveness failure, Never: killed, not restarted": {pod: probed(v1.RestartPolicyNever, nil), status: readyStatus(running("a")),
			failed:   failed("a-0", "liveness"),
			wantKill: &Kill{Name: "a", Type: ContainerTypeRegular, Message: "Container a failed liveness probe", Grace: 17}},
		"startup failure": {pod: probed(v1.RestartPolicyAlways, nil), status: readyStatus(running("a")),
			failed:    failed("a-0", "startup"),
			wantKill:  &Kill{Name: "a", Type: ContainerTypeRegular, Message: "Container a failed startup probe, will be restarted", Grace: 17},
			wantStart: []int{0}},
		"readiness failure kills nothing": {pod: probed(v1.RestartPolicyAlways, nil), status: readyStatus(running("a")),
			failed: failed("a-0", "readiness")},
		"result of another container": {pod: probed(v1.RestartPolicyAlways, nil), status: readyStatus(running("a")),
			failed: failed("b-0", "liveness")},
		"a container without that probe is not killed": {pod: testutil.Pod(v1.RestartPolicyAlways, nil, "a"), status: readyStatus(running("a")),
			failed: failed("a-0", "liveness")},
		"an exited container is not killed again": {pod: probed(v1.RestartPolicyAlways, nil), status: readyStatus(exited("a", 137)),
			failed: failed("a-0", "liveness"), wantStart: []int{0}},
	} {
		t.Run(name, func(t *testing.T) {
			got := ComputePodActions(tc.pod, tc.status, PlanInputs{Failed: tc.failed})
			if fmt.Sprint(got.ContainersToStart) != fmt.Sprint(tc.wantStart) {
				t.Errorf("start %v, want %v (plan %s)", got.ContainersToStart, tc.wantStart, got)
			}
			if tc.wantKill == nil {
				if len(got.ContainersToKill) != 0 {
					t.Errorf("kills %+v, want none", got.ContainersToKill)
				}
				return
			}
			k, ok := got.ContainersToKill["a-0"]
			if !ok || len(got.ContainersToKill) != 1 {
				t.Fatalf("kills %+v, want a-0 only", got.ContainersToKill)
			}
			k.Reason = ""
			if k != *tc.wantKill {
				t.Errorf("kill %+v, want %+v", k, *tc.wantKill)
			}
		})
	}
}

// TestComputePodActionsSidecarLivenessKill: a sidecar that failed its
// liveness probe is killed and started again, whatever the pod's policy,
// before and after the pod was initialized.
func TestComputePodActionsSidecarLivenessKill(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	pod := testutil.Pod(v1.RestartPolicyNever, []string{"sc"}, "a")
	pod.Spec.InitContainers[0].RestartPolicy = &always
	pod.Spec.InitContainers[0].LivenessProbe = &v1.Probe{}
	in := PlanInputs{Failed: func(id string) (string, bool) { return "liveness", id == "sc-0" }}
	initialized := readyStatus(initCtr("sc", StateRunning, 0), running("a"))
	got := ComputePodActions(pod, initialized, in)
	if k := got.ContainersToKill["sc-0"]; k.Message != "Init container sc failed liveness probe" || fmt.Sprint(got.SidecarsToStart) != "[0]" {
		t.Errorf("initialized: kill %+v, sidecars to start %v", k, got.SidecarsToStart)
	}
	// Before the regular container exists: the sidecar, the last init
	// container, has started, so the pod is initialized (the kubelet's
	// computeInitContainerActions counts it before looking at its probe):
	// it is killed and started again, and the regular container starts.
	initializing := readyStatus(initCtr("sc", StateRunning, 0))
	got = ComputePodActions(pod, initializing, in)
	if _, ok := got.ContainersToKill["sc-0"]; !ok || fmt.Sprint(got.SidecarsToStart) != "[0]" || fmt.Sprint(got.ContainersToStart) != "[0]" {
		t.Errorf("initializing: plan %s, kills %+v; want the sidecar killed and started again, then the container", got, got.ContainersToKill)
	}
}

// fakeBackOffView holds fixed back-offs: restart back-offs by key with
// the exit time they hold back, pull errors by key.
type fakeBackOffView struct {
	restart map[string]time.Time
	pull    map[string]string
}

func (f fakeBackOffView) Restart(key string, exitedAt time.Time) (time.Duration, bool) {
	t, ok := f.restart[key]
	return 20 * time.Second, ok && t.Equal(exitedAt)
}

func (f fakeBackOffView) Pull(key string) (string, bool) {
	msg, ok := f.pull[key]
	return msg, ok
}

// TestComputePodActionsBackOff: the back-offs are plan inputs. A container
// whose restart back-off runs is held in CrashLoopBackOff, measured from
// the exit of its newest dead instance (also when a newer instance is
// being replaced); a pull back-off holds it in ImagePullBackOff; a
// container that starts records the exit its back-off moves on from, and
// its dead instances but the newest are removed; a regular container held
// back keeps an OnFailure pod's sidecars running.
func TestComputePodActionsBackOff(t *testing.T) {
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	dead := func(name string, typ ContainerType, attempt uint32, finished time.Time) ContainerStatus {
		c := ctr(name, typ, attempt, StateExited, 1)
		c.FinishedAt = finished
		return c
	}
	always := v1.ContainerRestartPolicyAlways
	withSidecar := testutil.Pod(v1.RestartPolicyOnFailure, []string{"sc"}, "a")
	withSidecar.Spec.InitContainers[0].RestartPolicy = &always
	for name, tc := range map[string]struct {
		pod          *v1.Pod
		status       *PodStatus
		bo           fakeBackOffView
		wantStart    []int
		wantNextInit int
		wantWaiting  map[string]string // name -> reason
		wantRestarts map[string]time.Time
		wantRemove   []string
		wantKill     []string
	}{
		"in restart back-off: held in CrashLoopBackOff, dead instances beyond the newest removed": {
			pod:          testutil.Pod(v1.RestartPolicyAlways, nil, "a"),
			status:       readyStatus(dead("a", ContainerTypeRegular, 1, t0), dead("a", ContainerTypeRegular, 0, t0.Add(-time.Minute))),
			bo:           fakeBackOffView{restart: map[string]time.Time{testBackOffKey("a"): t0}},
			wantNextInit: -1, wantWaiting: map[string]string{"a": ReasonCrashLoopBackOff}, wantRemove: []string{"a-0"}},
		"back-off over: restarted, back-off moves on from the last exit, older dead removed": {
			pod:          testutil.Pod(v1.RestartPolicyAlways, nil, "a"),
			status:       readyStatus(dead("a", ContainerTypeRegular, 2, t0), dead("a", ContainerTypeRegular, 1, t0.Add(-time.Minute)), dead("a", ContainerTypeRegular, 0, t0.Add(-2*time.Minute))),
			wantNextInit: -1, wantStart: []int{0}, wantRestarts: map[string]time.Time{"a": t0}, wantRemove: []string{"a-1", "a-0"}},
		"a created instance replaced: back-off from the dead one before it": {
			pod:          testutil.Pod(v1.RestartPolicyAlways, nil, "a"),
			status:       readyStatus(ctr("a", ContainerTypeRegular, 1, StateCreated, 0), dead("a", ContainerTypeRegular, 0, t0)),
			bo:           fakeBackOffView{restart: map[string]time.Time{testBackOffKey("a"): t0}},
			wantNextInit: -1, wantWaiting: map[string]string{"a": ReasonCrashLoopBackOff}, wantKill: []string{"a-1"}},
		"pull back-off: held in ImagePullBackOff": {
			pod:          testutil.Pod(v1.RestartPolicyAlways, nil, "a"),
			status:       readyStatus(),
			bo:           fakeBackOffView{pull: map[string]string{testBackOffKey("a"): "ErrImagePull: not found"}},
			wantNextInit: -1, wantWaiting: map[string]string{"a": ReasonImagePullBackOff}},
		"failed init container in back-off: nothing after it starts": {
			pod:          testutil.Pod(v1.RestartPolicyOnFailure, []string{"i"}, "a"),
			status:       readyStatus(dead("i", ContainerTypeInit, 0, t0)),
			bo:           fakeBackOffView{restart: map[string]time.Time{testBackOffKey("i"): t0}},
			wantNextInit: -1, wantWaiting: map[string]string{"i": ReasonCrashLoopBackOff}},
		"OnFailure: a regular container in back-off keeps the sidecar": {
			pod:          withSidecar,
			status:       readyStatus(dead("a", ContainerTypeRegular, 0, t0), initCtr("sc", StateRunning, 0)),
			bo:           fakeBackOffView{restart: map[string]time.Time{testBackOffKey("a"): t0}},
			wantNextInit: -1, wantWaiting: map[string]string{"a": ReasonCrashLoopBackOff}},
	} {
		t.Run(name, func(t *testing.T) {
			got := ComputePodActions(tc.pod, tc.status, PlanInputs{BackOff: tc.bo})
			if fmt.Sprint(got.ContainersToStart) != fmt.Sprint(tc.wantStart) || got.NextInit != tc.wantNextInit {
				t.Errorf("start %v next init %d, want %v %d (plan %s)", got.ContainersToStart, got.NextInit, tc.wantStart, tc.wantNextInit, got)
			}
			waiting := map[string]string{}
			for n, w := range got.Waiting {
				waiting[n] = w.Reason
			}
			if len(waiting) != len(tc.wantWaiting) || (len(waiting) > 0 && !reflect.DeepEqual(waiting, tc.wantWaiting)) {
				t.Errorf("waiting %v, want %v", got.Waiting, tc.wantWaiting)
			}
			if len(got.Restarts) != len(tc.wantRestarts) || (len(got.Restarts) > 0 && !reflect.DeepEqual(got.Restarts, tc.wantRestarts)) {
				t.Errorf("restarts %v, want %v", got.Restarts, tc.wantRestarts)
			}
			if fmt.Sprint(got.ContainersToRemove) != fmt.Sprint(tc.wantRemove) {
				t.Errorf("remove %v, want %v", got.ContainersToRemove, tc.wantRemove)
			}
			_, kills := normalize(got)
			if fmt.Sprint(kills) != fmt.Sprint(tc.wantKill) {
				t.Errorf("kills %v, want %v", kills, tc.wantKill)
			}
			if got.Empty() {
				t.Error("a plan holding a container back reports Empty")
			}
		})
	}
	// The messages are the kubelet's.
	got := ComputePodActions(testutil.Pod(v1.RestartPolicyAlways, nil, "a"), readyStatus(dead("a", ContainerTypeRegular, 0, t0)),
		PlanInputs{BackOff: fakeBackOffView{restart: map[string]time.Time{testBackOffKey("a"): t0}}})
	if want := "back-off 20s restarting failed container=a pod=web_prod(uid-1)"; got.Waiting["a"].Message != want {
		t.Errorf("CrashLoopBackOff message %q, want %q", got.Waiting["a"].Message, want)
	}
	got = ComputePodActions(testutil.Pod(v1.RestartPolicyAlways, nil, "a"), readyStatus(),
		PlanInputs{BackOff: fakeBackOffView{pull: map[string]string{testBackOffKey("a"): "ErrImagePull: not found"}}})
	if want := `Back-off pulling image "busybox:1.36": ErrImagePull: not found`; got.Waiting["a"].Message != want {
		t.Errorf("ImagePullBackOff message %q, want %q", got.Waiting["a"].Message, want)
	}
}

// TestComputePodActionsDefinitionChanged: a running container whose spec
// hash is not its spec's any more (the image was changed) is killed with
// the kubelet's Killing message and started again in the same plan,
// whatever the restart policy; the restart back-off of the old image does
// not hold it back, one of its new spec does; a container without a hash is left alone; a
// running sidecar is restarted with the kubelet's init-container message.
func TestComputePodActionsDefinitionChanged(t *testing.T) {
	hashed := func(cs ContainerStatus, image string) ContainerStatus {
		cs.Hash, cs.HasHash = HashContainer(&v1.Container{Name: cs.Name, Image: image}), true
		return cs
	}
	now := time.Unix(1000, 0)
	olderExit := ctr("a", ContainerTypeRegular, 0, StateExited, 1)
	olderExit.FinishedAt = now.Add(-time.Second)
	for name, tc := range map[string]struct {
		policy    v1.RestartPolicy
		status    *PodStatus
		backOff   BackOffView
		wantKill  *Kill
		wantStart []int
		wantWait  string
	}{
		"image changed: killed and restarted": {policy: v1.RestartPolicyAlways,
			status:    readyStatus(hashed(running("a"), "busybox:0")),
			wantKill:  &Kill{Name: "a", Type: ContainerTypeRegular, Message: "Container a definition changed, will be restarted", Grace: 17},
			wantStart: []int{0}},
		"image changed, Never: restarted all the same": {policy: v1.RestartPolicyNever,
			status:    readyStatus(hashed(running("a"), "busybox:0")),
			wantKill:  &Kill{Name: "a", Type: ContainerTypeRegular, Message: "Container a definition changed, will be restarted", Grace: 17},
			wantStart: []int{0}},
		"same image: kept": {policy: v1.RestartPolicyAlways, status: readyStatus(hashed(running("a"), testutil.Image))},
		"no hash (made before hashes were written): kept": {policy: v1.RestartPolicyAlways, status: readyStatus(running("a"))},
		"an exited container's hash does not matter": {policy: v1.RestartPolicyNever,
			status: readyStatus(hashed(exited("a", 0), "busybox:0"))},
		// The back-off key holds the spec's hash (the kubelet's
		// getStableKey): the old image's back-off does not hold the new
		// image back; a back-off of the new spec does.
		"restart back-off of the old image does not hold the new one back": {policy: v1.RestartPolicyAlways,
			status:    readyStatus(hashed(ctr("a", ContainerTypeRegular, 1, StateRunning, 0), "busybox:0"), olderExit),
			backOff:   fakeBackOffView{restart: map[string]time.Time{oldImageBackOffKey("a", "busybox:0"): now.Add(-time.Second)}},
			wantKill:  &Kill{Name: "a", Type: ContainerTypeRegular, Message: "Container a definition changed, will be restarted", Grace: 17},
			wantStart: []int{0}},
		"restart back-off of the new spec holds it back": {policy: v1.RestartPolicyAlways,
			status:   readyStatus(hashed(ctr("a", ContainerTypeRegular, 1, StateRunning, 0), "busybox:0"), olderExit),
			backOff:  fakeBackOffView{restart: map[string]time.Time{testBackOffKey("a"): now.Add(-time.Second)}},
			wantKill: &Kill{Name: "a", Type: ContainerTypeRegular, Message: "Container a definition changed, will be restarted", Grace: 17},
			wantWait: ReasonCrashLoopBackOff},
	} {
		t.Run(name, func(t *testing.T) {
			pod := testutil.Pod(tc.policy, nil, "a")
			pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](17)
			got := ComputePodActions(pod, tc.status, PlanInputs{BackOff: tc.backOff})
			if fmt.Sprint(got.ContainersToStart) != fmt.Sprint(tc.wantStart) {
				t.Errorf("start %v, want %v (plan %s)", got.ContainersToStart, tc.wantStart, got)
			}
			if w := got.Waiting["a"]; w.Reason != tc.wantWait {
				t.Errorf("waiting %+v, want reason %q", w, tc.wantWait)
			}
			if tc.wantKill == nil {
				if len(got.ContainersToKill) != 0 {
					t.Errorf("kills %+v, want none", got.ContainersToKill)
				}
				return
			}
			var k Kill
			for _, kk := range got.ContainersToKill {
				k = kk
			}
			if len(got.ContainersToKill) != 1 {
				t.Fatalf("kills %+v, want one", got.ContainersToKill)
			}
			k.Reason = ""
			if k != *tc.wantKill {
				t.Errorf("kill %+v, want %+v", k, *tc.wantKill)
			}
		})
	}

	always := v1.ContainerRestartPolicyAlways
	pod := testutil.Pod(v1.RestartPolicyAlways, []string{"sc"}, "a")
	pod.Spec.InitContainers[0].RestartPolicy = &always
	sidecar := hashed(initCtr("sc", StateRunning, 0), "busybox:0")
	for name, status := range map[string]*PodStatus{
		"initialized":  readyStatus(sidecar, hashed(running("a"), testutil.Image)),
		"initializing": readyStatus(sidecar),
	} {
		got := ComputePodActions(pod, status, PlanInputs{})
		k := got.ContainersToKill["sc-0"]
		started := fmt.Sprint(got.SidecarsToStart) == "[0]" || got.NextInit == 0
		if k.Message != "Init container sc definition changed" || !started || len(got.ContainersToKill) != 1 {
			t.Errorf("sidecar %s: kills %+v, sidecars %v, next init %d", name, got.ContainersToKill, got.SidecarsToStart, got.NextInit)
		}
	}
}

// testBackOffKey is BackOffKey of testutil.Pod's container name (UID
// uid-1, image testutil.Image).
func testBackOffKey(name string) string {
	return BackOffKey(testutil.Pod(v1.RestartPolicyAlways, []string{name}, name), name)
}

// oldImageBackOffKey is BackOffKey of testutil.Pod's container name when it
// ran image.
func oldImageBackOffKey(name, image string) string {
	pod := testutil.Pod(v1.RestartPolicyAlways, nil, name)
	pod.Spec.Containers[0].Image = image
	return BackOffKey(pod, name)
}
