package status

import (
	"testing"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

var restartAll42 = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestartAllContainers,
	ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}

// restartAllPod is the e2e spec's pod "should restart all containers on
// regular container exit": a Never pod with the init container "i", the
// sidecar "sc", the source "src" (restartPolicy Never, exit 42 restarts
// all) and "r".
func restartAllPod() *v1.Pod {
	pod := testutil.Pod(v1.RestartPolicyNever, []string{"i", "sc"}, "src", "r")
	pod.Spec.InitContainers[1].RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
	src := &pod.Spec.Containers[0]
	src.RestartPolicy, src.RestartPolicyRules = ptr.To(v1.ContainerRestartPolicyNever), restartAll42
	return pod
}

// TestGenerateStatusRestartAllContainers follows a pod through an in-place
// restart of all its containers, each status generated with the one
// before as the previous status, as the kubelet v1.37 reports it: the
// AllContainersRestarting condition, the containers' RestartingAllContainers
// waiting and last states once they are removed, their restart counts and
// last states carried over once they run again (the node e2e spec reads
// restartCount > 0 and a last terminated state of every container), the
// phase Running and Initialized True throughout.
func TestGenerateStatusRestartAllContainers(t *testing.T) {
	tru, fls := v1.ConditionTrue, v1.ConditionFalse
	pod := restartAllPod()
	restartingWait := waitingReason(ReasonRestartingAllContainers, messageRestartingAllContainers)
	restarted := func(count int32, lastReason string, lastCode int32) func(*testing.T, v1.ContainerStatus) {
		return func(t *testing.T, cs v1.ContainerStatus) {
			t.Helper()
			if cs.RestartCount != count {
				t.Errorf("restartCount %d, want %d", cs.RestartCount, count)
			}
			lastExit(lastCode, lastReason)(t, cs)
		}
	}
	never := func(t *testing.T, cs v1.ContainerStatus) {
		t.Helper()
		if cs.RestartCount != 0 || cs.LastTerminationState.Terminated != nil {
			t.Errorf("restartCount %d, last state %+v; want 0 and none", cs.RestartCount, cs.LastTerminationState)
		}
	}
	steps := []struct {
		name  string
		rt    *cri.PodStatus
		phase v1.PodPhase
		check map[string][]func(*testing.T, v1.ContainerStatus) // "init:" prefixes init containers
		conds map[v1.PodConditionType]wantCond
	}{{
		name:  "running",
		rt:    rtStatus(true, ini("i", 0, cri.StateExited, 0), ini("sc", 0, cri.StateRunning, 0), reg("src", 0, cri.StateRunning, 0), reg("r", 0, cri.StateRunning, 0)),
		phase: v1.PodRunning,
		check: map[string][]func(*testing.T, v1.ContainerStatus){"src": {isRunning, never}, "init:i": {never}},
		conds: map[v1.PodConditionType]wantCond{v1.AllContainersRestarting: {status: fls}, v1.PodInitialized: {status: tru}},
	}, {
		name:  "the source exited 42: restarting, still Running",
		rt:    rtStatus(true, ini("i", 0, cri.StateExited, 0), ini("sc", 0, cri.StateRunning, 0), reg("src", 0, cri.StateExited, 42), reg("r", 0, cri.StateRunning, 0)),
		phase: v1.PodRunning,
		check: map[string][]func(*testing.T, v1.ContainerStatus){"src": {terminatedAs(42, "Error"), never}, "r": {isRunning}},
		conds: map[v1.PodConditionType]wantCond{
			v1.AllContainersRestarting: {tru, reasonRestartAllContainersStarted, messageRestartAllContainersStarted},
			v1.PodInitialized:          {status: tru},
		},
	}, {
		name:  "every container removed: each waits RestartingAllContainers, one restart more",
		rt:    rtStatus(true),
		phase: v1.PodRunning,
		check: map[string][]func(*testing.T, v1.ContainerStatus){
			"init:i":  {restartingWait, restarted(1, ReasonRestartingAllContainers, 137)},
			"init:sc": {restartingWait, restarted(1, ReasonRestartingAllContainers, 137)},
			"src":     {restartingWait, restarted(1, ReasonRestartingAllContainers, 137)},
			"r":       {restartingWait, restarted(1, ReasonRestartingAllContainers, 137)},
		},
		conds: map[v1.PodConditionType]wantCond{v1.AllContainersRestarting: {status: fls}, v1.PodInitialized: {status: tru}},
	}, {
		name:  "the init container runs again: the others keep their counts and last states",
		rt:    rtStatus(true, ini("i", 1, cri.StateRunning, 0)),
		phase: v1.PodPending,
		check: map[string][]func(*testing.T, v1.ContainerStatus){
			"init:i":  {isRunning, restarted(1, ReasonRestartingAllContainers, 137)},
			"init:sc": {waitingReason(ReasonPodInitializing, ""), restarted(1, ReasonRestartingAllContainers, 137)},
			"src":     {waitingReason(ReasonPodInitializing, ""), restarted(1, ReasonRestartingAllContainers, 137)},
		},
		conds: map[v1.PodConditionType]wantCond{v1.AllContainersRestarting: {status: fls}, v1.PodInitialized: {status: tru}},
	}, {
		name:  "all run again",
		rt:    rtStatus(true, ini("i", 1, cri.StateExited, 0), ini("sc", 1, cri.StateRunning, 0), reg("src", 1, cri.StateRunning, 0), reg("r", 1, cri.StateRunning, 0)),
		phase: v1.PodRunning,
		check: map[string][]func(*testing.T, v1.ContainerStatus){
			"init:i":  {terminatedAs(0, "Completed"), restarted(1, ReasonRestartingAllContainers, 137)},
			"init:sc": {isRunning, restarted(1, ReasonRestartingAllContainers, 137)},
			"src":     {isRunning, restarted(1, ReasonRestartingAllContainers, 137)},
			"r":       {isRunning, restarted(1, ReasonRestartingAllContainers, 137)},
		},
		conds: map[v1.PodConditionType]wantCond{v1.AllContainersRestarting: {status: fls}, v1.PodInitialized: {status: tru}, v1.PodReady: {status: tru}},
	}, {
		name:  "a normal restart later: the runtime's earlier instance is the last state",
		rt:    rtStatus(true, ini("i", 1, cri.StateExited, 0), ini("sc", 1, cri.StateRunning, 0), reg("src", 1, cri.StateRunning, 0), reg("r", 2, cri.StateRunning, 0), reg("r", 1, cri.StateExited, 3)),
		phase: v1.PodRunning,
		check: map[string][]func(*testing.T, v1.ContainerStatus){"r": {isRunning, restarted(2, "Error", 3)}},
		conds: map[v1.PodConditionType]wantCond{v1.AllContainersRestarting: {status: fls}},
	}}
	var prev v1.PodStatus
	for _, step := range steps {
		ok := t.Run(step.name, func(t *testing.T) {
			s := Generate(Input{Pod: pod, Previous: prev, Runtime: step.rt, RuntimeName: "containerd", Now: now})
			if s.Phase != step.phase {
				t.Errorf("phase %s, want %s", s.Phase, step.phase)
			}
			for name, checks := range step.check {
				cs := findStatus(t, s, name)
				for _, check := range checks {
					check(t, cs)
				}
			}
			for typ, w := range step.conds {
				checkCond(t, s, typ, w)
			}
			prev = s
		})
		if !ok {
			return // the next steps build on this one
		}
	}
}

// findStatus is s's status of container name ("init:<name>" for an init
// container).
func findStatus(t *testing.T, s v1.PodStatus, name string) v1.ContainerStatus {
	t.Helper()
	list := s.ContainerStatuses
	if len(name) > 5 && name[:5] == "init:" {
		list, name = s.InitContainerStatuses, name[5:]
	}
	for _, cs := range list {
		if cs.Name == name {
			return cs
		}
	}
	t.Fatalf("no status of %s", name)
	return v1.ContainerStatus{}
}

// TestAllContainersRestartingCondition: only a pod with a
// RestartAllContainers rule has the condition; True while a source's exit
// (in the runtime, or in the previous status) or the previous True
// condition says so and a container is left, False with the phase's
// reason once the pod is terminal.
func TestAllContainersRestartingCondition(t *testing.T) {
	tru, fls := v1.ConditionTrue, v1.ConditionFalse
	started := wantCond{tru, reasonRestartAllContainersStarted, messageRestartAllContainersStarted}
	wasRestarting := v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.AllContainersRestarting, Status: v1.ConditionTrue}}}
	srcExited42 := v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{terminatedState("src", 42)}}
	tests := map[string]struct {
		pod  *v1.Pod
		prev v1.PodStatus
		rt   *cri.PodStatus
		want *wantCond // nil: no condition
	}{
		"no rule: no condition": {pod: testutil.Pod(v1.RestartPolicyNever, nil, "src"),
			rt: rtStatus(true, reg("src", 0, cri.StateExited, 42))},
		"the source's exit in the runtime": {pod: restartAllPod(),
			rt: rtStatus(true, reg("src", 0, cri.StateExited, 42), reg("r", 0, cri.StateRunning, 0)), want: &started},
		"another exit code: False": {pod: restartAllPod(),
			rt: rtStatus(true, reg("src", 0, cri.StateExited, 1), reg("r", 0, cri.StateRunning, 0)), want: &wantCond{status: fls}},
		"the source's exit in the previous status, a container left": {pod: restartAllPod(), prev: srcExited42,
			rt: rtStatus(true, reg("r", 0, cri.StateExited, 137)), want: &started},
		"previously True, an init container left": {pod: restartAllPod(), prev: wasRestarting,
			rt: rtStatus(true, ini("i", 0, cri.StateExited, 0)), want: &started},
		"previously True, nothing left: False": {pod: restartAllPod(), prev: wasRestarting,
			rt: rtStatus(true), want: &wantCond{status: fls}},
		"Failed pod: False, PodFailed": {pod: restartAllPod(),
			rt:   rtStatus(false, ini("i", 0, cri.StateExited, 0), ini("sc", 0, cri.StateExited, 0), reg("src", 0, cri.StateExited, 1), reg("r", 0, cri.StateExited, 0)),
			want: &wantCond{fls, reasonPodFailed, ""}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := Generate(Input{Pod: tc.pod, Previous: tc.prev, Runtime: tc.rt, RuntimeName: "containerd", Now: now})
			if tc.want == nil {
				if c := findCond(s, v1.AllContainersRestarting); c != nil {
					t.Errorf("condition %+v, want none", c)
				}
				return
			}
			checkCond(t, s, v1.AllContainersRestarting, *tc.want)
		})
	}
}

// TestPodPhaseRestartAllContainers: a container removed by the in-place
// restart (last state RestartingAllContainers) counts as restarting
// whatever its restart policy, and an init container that ran and waits
// is not pending, as the kubelet's getPhase: the pod stays Running while
// its containers are gone.
func TestPodPhaseRestartAllContainers(t *testing.T) {
	removed := func(name string) v1.ContainerStatus {
		s := waitingWithLastTermination(name, 137)
		s.LastTerminationState.Terminated.Reason = ReasonRestartingAllContainers
		return s
	}
	s := func(ss ...v1.ContainerStatus) []v1.ContainerStatus { return ss }
	tests := map[string]struct {
		inits, regular []v1.ContainerStatus
		want           v1.PodPhase
	}{
		"all removed: Running": {inits: s(removed("i"), removed("sc")), regular: s(removed("src"), removed("r")), want: v1.PodRunning},
		"a Never container that exited 137 otherwise: Failed": {inits: s(terminatedState("i", 0), terminatedState("sc", 137)),
			regular: s(terminatedState("src", 1), waitingWithLastTermination("r", 137)), want: v1.PodFailed},
		"the source exited 42: Running": {inits: s(terminatedState("i", 0), runningState("sc")),
			regular: s(terminatedState("src", 42), terminatedState("r", 137)), want: v1.PodRunning},
		"the init container runs again: Pending": {inits: s(runningState("i"), removed("sc")),
			regular: s(removed("src"), removed("r")), want: v1.PodPending},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := podPhase(restartAllPod(), tc.inits, tc.regular, false); got != tc.want {
				t.Errorf("podPhase = %s, want %s", got, tc.want)
			}
		})
	}
}
