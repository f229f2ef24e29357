package cri

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// sidecarPod has init containers "i1" (plain), "s1" and "s2" (sidecars)
// in that order and regular container "a".
func sidecarPod(policy v1.RestartPolicy) *v1.Pod {
	pod := testutil.Pod(policy, []string{"i1", "s1", "s2"}, "a")
	always := ptr.To(v1.ContainerRestartPolicyAlways)
	pod.Spec.InitContainers[1].RestartPolicy = always
	pod.Spec.InitContainers[2].RestartPolicy = always
	return pod
}

func TestComputePodActionsSidecars(t *testing.T) {
	tests := map[string]struct {
		policy   v1.RestartPolicy
		status   *PodStatus
		nextInit int
		start    []int
		sidecars []int
		killIDs  []string
	}{
		"new sandbox: the init sequence starts at the first": {
			status: &PodStatus{}, nextInit: 0,
		},
		"plain init done: the first sidecar starts": {
			status: readyStatus(initCtr("i1", StateExited, 0)), nextInit: 1,
		},
		"a running sidecar counts as initialized: the next one starts": {
			status: readyStatus(initCtr("i1", StateExited, 0), initCtr("s1", StateRunning, 0)), nextInit: 2,
		},
		"all sidecars running: the regular containers start": {
			status:   readyStatus(initCtr("i1", StateExited, 0), initCtr("s1", StateRunning, 0), initCtr("s2", StateRunning, 0)),
			nextInit: -1, start: []int{0},
		},
		"a sidecar that exits during initialization is started again": {
			status:   readyStatus(initCtr("i1", StateExited, 0), initCtr("s1", StateExited, 1)),
			nextInit: 1,
		},
		"initialized: an exited sidecar restarts beside the running containers": {
			status:   readyStatus(initCtr("i1", StateExited, 0), initCtr("s1", StateExited, 0), initCtr("s2", StateRunning, 0), running("a")),
			nextInit: -1, sidecars: []int{1},
		},
		"initialized: a sidecar in created state is replaced": {
			status:   readyStatus(initCtr("i1", StateExited, 0), initCtr("s1", StateRunning, 0), initCtr("s2", StateCreated, 0), running("a")),
			nextInit: -1, sidecars: []int{2}, killIDs: []string{"s2-0"},
		},
		"initialized: plain init containers are not looked at again": {
			status:   readyStatus(initCtr("s1", StateRunning, 0), initCtr("s2", StateRunning, 0), running("a")),
			nextInit: -1,
		},
		"Never: the regular container finished: sidecars are stopped, not restarted": {
			policy:   v1.RestartPolicyNever,
			status:   readyStatus(initCtr("i1", StateExited, 0), initCtr("s1", StateExited, 1), initCtr("s2", StateRunning, 0), exited("a", 0)),
			nextInit: -1, killIDs: []string{"s2-0"},
		},
		// An exited regular container does not make the pod initialized
		// (it may be of a sandbox gone since): the last init container
		// decides, and an exited last sidecar runs again first, as on the
		// kubelet; the sync after it stops the sidecars (the case above).
		"Never: the regular container and the last sidecar exited: the sidecar starts again first": {
			policy:   v1.RestartPolicyNever,
			status:   readyStatus(initCtr("i1", StateExited, 0), initCtr("s1", StateRunning, 0), initCtr("s2", StateExited, 1), exited("a", 0)),
			nextInit: 2,
		},
		"OnFailure: the regular container restarts, so do sidecars": {
			policy:   v1.RestartPolicyOnFailure,
			status:   readyStatus(initCtr("i1", StateExited, 0), initCtr("s1", StateExited, 1), initCtr("s2", StateRunning, 0), exited("a", 1)),
			nextInit: -1, start: []int{0}, sidecars: []int{1},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			policy := tc.policy
			if policy == "" {
				policy = v1.RestartPolicyAlways
			}
			got := ComputePodActions(sidecarPod(policy), tc.status, PlanInputs{})
			if got.NextInit != tc.nextInit || !reflect.DeepEqual(got.ContainersToStart, tc.start) || !reflect.DeepEqual(got.SidecarsToStart, tc.sidecars) {
				t.Errorf("plan %s (next init %d, start %v, sidecars %v), want next init %d, start %v, sidecars %v",
					got, got.NextInit, got.ContainersToStart, got.SidecarsToStart, tc.nextInit, tc.start, tc.sidecars)
			}
			var ids []string
			for id := range got.ContainersToKill {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			if !reflect.DeepEqual(ids, tc.killIDs) {
				t.Errorf("kill %v, want %v", ids, tc.killIDs)
			}
		})
	}
}

// TestKillPodStopsSidecarsLast checks the termination order: the regular
// container first, then the sidecars in reverse order.
func TestKillPodStopsSidecarsLast(t *testing.T) {
	f := newSyncFixture(t)
	pod := sidecarPod(v1.RestartPolicyAlways)
	f.rs.addSandbox(&runtimeapi.PodSandboxStatus{Id: "sb", State: runtimeapi.PodSandboxState_SANDBOX_READY})
	for _, id := range []string{"s1", "s2", "a"} {
		f.rs.addContainer(&fakeContainer{ContainerStatus: runtimeapi.ContainerStatus{Id: id, State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	}
	st := &PodStatus{
		Ref:       RefOf(pod),
		Sandboxes: []SandboxStatus{{ID: "sb", Ready: true}},
		Containers: []ContainerStatus{
			{ID: "s1", Name: "s1", Type: ContainerTypeInit, State: StateRunning},
			{ID: "a", Name: "a", Type: ContainerTypeRegular, State: StateRunning},
			{ID: "s2", Name: "s2", Type: ContainerTypeInit, State: StateRunning},
		},
	}
	if err := f.rt.KillPod(context.Background(), pod, st, 30); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, c := range f.rs.GetCalls() {
		if c == "StopContainer" || c == "StopPodSandbox" {
			order = append(order, c)
		}
	}
	if got := f.rs.stopOrder(); !reflect.DeepEqual(got, []string{"a", "s2", "s1"}) {
		t.Errorf("stop order %v, want [a s2 s1]", got)
	}
	if len(order) != 4 || order[3] != "StopPodSandbox" {
		t.Errorf("calls %v, want three stops then the sandbox", order)
	}
}

// TestSyncPodSidecarFlow drives a pod with a plain init container, a
// sidecar and a regular container through successive syncs on the fake
// runtime: one init step per sync, the sidecar keeps running, and once
// the Never pod's container finished the sidecar is stopped.
func TestSyncPodSidecarFlow(t *testing.T) {
	f := newSyncFixture(t)
	f.is.SetFakeImages([]string{testutil.Image})
	pod := testutil.Pod(v1.RestartPolicyNever, []string{"i1", "s1"}, "a")
	pod.Spec.InitContainers[1].RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
	for i := range pod.Spec.InitContainers {
		pod.Spec.InitContainers[i].ImagePullPolicy = v1.PullIfNotPresent
	}
	pod.Spec.Containers[0].ImagePullPolicy = v1.PullIfNotPresent
	exit := func(name string, typ ContainerType, code int32) {
		t.Helper()
		c := f.status(t, pod).Latest(name, typ)
		if err := f.rs.setContainer(c.ID, func(fc *fakeContainer) {
			fc.State = runtimeapi.ContainerState_CONTAINER_EXITED
			fc.ExitCode = code
			fc.FinishedAt = f.clock.Now().UnixNano()
		}); err != nil {
			t.Fatal(err)
		}
	}
	step := func(wantStarted ...string) {
		t.Helper()
		res, plan := f.sync(t, pod)
		if res.Error() != nil {
			t.Fatalf("plan %s: %v", plan, res.Error())
		}
		if !reflect.DeepEqual(res.Started, wantStarted) && !(len(res.Started) == 0 && len(wantStarted) == 0) {
			t.Fatalf("plan %s started %v, want %v", plan, res.Started, wantStarted)
		}
	}
	step("i1")
	exit("i1", ContainerTypeInit, 0)
	step("s1")
	step("a")
	if c := f.status(t, pod).Latest("s1", ContainerTypeInit); c.State != StateRunning {
		t.Fatalf("sidecar %s, want running beside the container", c.State)
	}
	exit("a", ContainerTypeRegular, 0)
	step()
	if c := f.status(t, pod).Latest("s1", ContainerTypeInit); c.State != StateExited {
		t.Errorf("sidecar %s after the pod's container finished, want stopped", c.State)
	}
}

// TestComputePodActionsSidecarStartupProbe: a running sidecar with a
// startup probe gates the containers after it until the probe succeeded
// (the kubelet's computeInitContainerActions); once initialized, it no
// longer gates anything.
func TestComputePodActionsSidecarStartupProbe(t *testing.T) {
	pod := sidecarPod(v1.RestartPolicyAlways)
	pod.Spec.InitContainers[1].StartupProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
	passed := map[string]bool{}
	in := PlanInputs{Started: func(id string) bool { return passed[id] }}
	waiting := readyStatus(initCtr("i1", StateExited, 0), initCtr("s1", StateRunning, 0))
	if got := ComputePodActions(pod, waiting, in); got.NextInit != -1 || len(got.ContainersToStart) != 0 || len(got.ContainersToKill) != 0 {
		t.Errorf("s1 running, startup probe not passed: plan %s, want nothing (wait for the probe)", got)
	}
	passed["s1-0"] = true
	if got := ComputePodActions(pod, waiting, in); got.NextInit != 2 {
		t.Errorf("s1 passed its startup probe: plan %s, want the next init container s2 (index 2)", got)
	}
	// Without probe inputs (no prober), a running sidecar counts as started.
	if got := ComputePodActions(pod, waiting, PlanInputs{}); got.NextInit != 2 {
		t.Errorf("no probe inputs: plan %s, want s2 next", got)
	}
	// Initialized: a restarted sidecar without its startup probe passed
	// does not stop the regular containers.
	passed["s1-0"] = false
	init := readyStatus(initCtr("i1", StateExited, 0), initCtr("s1", StateRunning, 0), initCtr("s2", StateRunning, 0), running("a"))
	if got := ComputePodActions(pod, init, in); !got.Empty() {
		t.Errorf("initialized pod: plan %s, want nothing to do", got)
	}
}

// hookedSidecarPod is sidecarPod with a preStop hook on s1, s2 and a that
// never ends within the grace period (a sleep of 100 s), as the node e2e
// suite's "should terminate sidecars simultaneously if prestop doesn't
// exit" has.
func hookedSidecarPod(policy v1.RestartPolicy) *v1.Pod {
	pod := sidecarPod(policy)
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	hook := &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 100}}}
	pod.Spec.InitContainers[1].Lifecycle = hook
	pod.Spec.InitContainers[2].Lifecycle = hook
	pod.Spec.Containers[0].Lifecycle = hook
	return pod
}

// TestStopSidecarsPreStopAtOnce: the kubelet's killContainersWithSyncResult.
// When a pod stops, every container's preStop hook starts at once
// (sidecars' too); hooks that do not end within the grace period use it
// all, and each container then gets SIGTERM with the 2 s minimum before
// SIGKILL (a longer TERM trap is cut: exit 137). Run one after the other,
// the second sidecar's hook started only when the first's grace ended
// and its container outlived its grace period.
func TestStopSidecarsPreStopAtOnce(t *testing.T) {
	tests := map[string]struct {
		// kill stops the pod's running containers the way the case does.
		kill func(f *syncFixture, pod *v1.Pod, st *PodStatus) error
		// running are the containers running when it starts.
		running []string
	}{
		"KillPod: regular container and sidecars": {
			kill: func(f *syncFixture, pod *v1.Pod, st *PodStatus) error {
				return f.rt.KillPod(context.Background(), pod, st, 30)
			},
			running: []string{"s1", "s2", "a"},
		},
		"SyncPod: the Never pod's container finished, its sidecars stop": {
			kill: func(f *syncFixture, pod *v1.Pod, st *PodStatus) error {
				plan := ComputePodActions(pod, st, PlanInputs{})
				if n := len(plan.ContainersToKill); n != 2 {
					return fmt.Errorf("plan %s kills %d containers, want the 2 sidecars", plan, n)
				}
				return f.rt.SyncPod(context.Background(), pod, st, plan, f.b, f.clock.Now()).Error()
			},
			running: []string{"s1", "s2"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, _ := hookFixture(t)
			pod := hookedSidecarPod(v1.RestartPolicyNever)
			f.rs.addSandbox(&runtimeapi.PodSandboxStatus{Id: "sb", State: runtimeapi.PodSandboxState_SANDBOX_READY})
			st := &PodStatus{Ref: RefOf(pod), Sandboxes: []SandboxStatus{{ID: "sb", Ready: true}}}
			st.Containers = append(st.Containers, ContainerStatus{ID: "i1", Name: "i1", Type: ContainerTypeInit, State: StateExited})
			for _, n := range []string{"s1", "s2", "a"} {
				typ, state := ContainerTypeInit, StateExited
				if n == "a" {
					typ = ContainerTypeRegular
				}
				if contains(tc.running, n) {
					state = StateRunning
					f.rs.addContainer(&fakeContainer{ContainerStatus: runtimeapi.ContainerStatus{Id: n, State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
				}
				st.Containers = append(st.Containers, ContainerStatus{ID: n, Name: n, Type: typ, State: state})
			}
			killed := startKill(t, func() error { return tc.kill(f, pod, st) })
			// Each hook's sleep timer and its grace timer, all at once.
			want := 2 * len(tc.running)
			waitFor(t, fmt.Sprintf("%d preStop hooks started together", len(tc.running)), func() bool { return f.clock.Waiters() >= want })
			f.clock.Step(30 * time.Second)
			killed("the containers were not stopped after one grace period")
			got := f.rs.stopTimeouts()
			for _, n := range tc.running {
				if g, ok := got[n]; !ok || g != minGracePeriod {
					t.Errorf("container %s stopped with grace %d (stopped: %v), want %d after its hook used the grace period", n, g, ok, minGracePeriod)
				}
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestSyncPodNodeRebootRunsInitSequenceAgain drives the node e2e spec "A
// node running restartable init containers reboots should restart the
// containers in right order after the node reboot" on the fake runtime:
// a pod with init-1, restartable-init-2 (a sidecar), init-3 and regular-1
// runs; a crash of regular-1 restarts only it; then every container exits
// and the sandbox stops, nothing removed (the reboot). The next sync kills
// the pod, removes the old init containers (the kubelet's
// purgeInitContainers) and starts init-1 only in a new sandbox; each later
// sync takes one step of the sequence, regular-1 last.
func TestSyncPodNodeRebootRunsInitSequenceAgain(t *testing.T) {
	f := newSyncFixture(t)
	f.is.SetFakeImages([]string{testutil.Image})
	pod := testutil.Pod(v1.RestartPolicyAlways, []string{"init-1", "restartable-init-2", "init-3"}, "regular-1")
	pod.Spec.InitContainers[1].RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
	for i := range pod.Spec.InitContainers {
		pod.Spec.InitContainers[i].ImagePullPolicy = v1.PullIfNotPresent
	}
	pod.Spec.Containers[0].ImagePullPolicy = v1.PullIfNotPresent
	exit := func(name string, typ ContainerType, code int32) {
		t.Helper()
		c := f.status(t, pod).Latest(name, typ)
		if err := f.rs.setContainer(c.ID, func(fc *fakeContainer) {
			fc.State = runtimeapi.ContainerState_CONTAINER_EXITED
			fc.ExitCode = code
			fc.FinishedAt = f.clock.Now().UnixNano()
		}); err != nil {
			t.Fatal(err)
		}
	}
	step := func(wantStarted ...string) PodActions {
		t.Helper()
		// Past any restart back-off: the order is what is checked here.
		f.clock.Step(5 * time.Minute)
		res, plan := f.sync(t, pod)
		if res.Error() != nil {
			t.Fatalf("plan %s: %v", plan, res.Error())
		}
		if !reflect.DeepEqual(res.Started, wantStarted) && !(len(res.Started) == 0 && len(wantStarted) == 0) {
			t.Fatalf("plan %s started %v, want %v", plan, res.Started, wantStarted)
		}
		return plan
	}

	step("init-1")
	step()
	exit("init-1", ContainerTypeInit, 0)
	step("restartable-init-2")
	step("init-3")
	step()
	exit("init-3", ContainerTypeInit, 0)
	step("regular-1")
	step()

	// A crash in the ready sandbox: the init containers are done and
	// present, only regular-1 restarts.
	exit("regular-1", ContainerTypeRegular, 1)
	step("regular-1")

	// The reboot: every container exited, the sandbox stopped, nothing
	// removed.
	before := f.status(t, pod)
	var oldInits []string
	for _, c := range before.Containers {
		if c.State == StateRunning {
			exit(c.Name, c.Type, 137)
		}
		if c.Type == ContainerTypeInit {
			oldInits = append(oldInits, c.ID)
		}
	}
	if err := f.rs.StopPodSandbox(context.Background(), before.Sandboxes[0].ID); err != nil {
		t.Fatal(err)
	}
	if plan := step("init-1"); !plan.KillPod || !plan.CreateSandbox || plan.NextInit != 0 {
		t.Fatalf("plan after the reboot %s, want kill, a new sandbox and init 0", plan)
	}
	st := f.status(t, pod)
	for _, c := range st.Containers {
		for _, id := range oldInits {
			if c.ID == id {
				t.Errorf("init container %s (%s) of the old sandbox not removed", c.Name, id)
			}
		}
	}
	if c := st.Latest("regular-1", ContainerTypeRegular); c == nil || c.State != StateExited {
		t.Errorf("regular-1 %+v, want its exited instance kept", c)
	}
	step()
	exit("init-1", ContainerTypeInit, 0)
	step("restartable-init-2")
	step("init-3")
	step()
	exit("init-3", ContainerTypeInit, 0)
	step("regular-1")
	step()
	if c := f.status(t, pod).Latest("restartable-init-2", ContainerTypeInit); c == nil || c.State != StateRunning {
		t.Errorf("restartable-init-2 %+v, want running beside regular-1", c)
	}
}
