package cri

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// restartAll42 is a restartPolicyRules entry: exit code 42 restarts all
// the pod's containers.
var restartAll42 = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestartAllContainers,
	ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}

// restartAllPod is a Never pod with init containers inits and regular
// containers names; the containers named in sources get restartPolicy
// Never and the rule restartAll42, "sc" is a sidecar.
func restartAllPod(inits []string, names []string, sources ...string) *v1.Pod {
	pod := testutil.Pod(v1.RestartPolicyNever, inits, names...)
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := &list[i]
			if c.Name == "sc" {
				c.RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
			}
			if slices.Contains(sources, c.Name) {
				c.RestartPolicy, c.RestartPolicyRules = ptr.To(v1.ContainerRestartPolicyNever), restartAll42
			}
		}
	}
	return pod
}

// TestComputePodActionsRestartAllContainers: while the pod's
// AllContainersRestarting condition is True the plan only resets its
// containers, every instance of every init and regular container, in the
// kubelet's order (getContainersToReset): the regular targets, the init
// targets, the regular sources, the init sources; instances not exited are
// killed first. Without the condition a source restarts as any container
// its rules restart.
func TestComputePodActionsRestartAllContainers(t *testing.T) {
	second := func(c ContainerStatus) ContainerStatus { c.Attempt, c.ID = 1, c.Name+"-1"; return c }
	tests := map[string]struct {
		pod        *v1.Pod
		status     *PodStatus
		restarting bool
		want       PodActions
	}{
		"not restarting: the source that exited 42 is started again like any": {
			pod:    restartAllPod(nil, []string{"src", "r"}, "src"),
			status: readyStatus(exited("src", 42), running("r")),
			want:   PodActions{SandboxID: "sb-1", NextInit: -1, ContainersToStart: []int{0}},
		},
		"regular source: regular targets, init targets, then the source": {
			pod: restartAllPod([]string{"i", "sc"}, []string{"src", "r"}, "src"),
			status: readyStatus(second(exited("src", 42)), exited("src", 1), running("r"),
				initCtr("i", StateExited, 0), initCtr("sc", StateRunning, 0),
				ctr("dbg", ContainerTypeEphemeral, 0, StateRunning, 0)),
			restarting: true,
			want: PodActions{SandboxID: "sb-1", NextInit: -1, ContainersToReset: []Reset{
				{ID: "src-0", Name: "src", Type: ContainerTypeRegular},
				{ID: "r-0", Name: "r", Type: ContainerTypeRegular, Kill: true},
				{ID: "i-0", Name: "i", Type: ContainerTypeInit},
				{ID: "sc-0", Name: "sc", Type: ContainerTypeInit, Kill: true},
				{ID: "src-1", Name: "src", Type: ContainerTypeRegular},
			}},
		},
		"init source: the sidecar and the init container before it, then the source": {
			pod:        restartAllPod([]string{"sc", "i", "si"}, []string{"r"}, "si"),
			status:     readyStatus(initCtr("sc", StateRunning, 0), initCtr("i", StateExited, 0), initCtr("si", StateExited, 42)),
			restarting: true,
			want: PodActions{SandboxID: "sb-1", NextInit: -1, ContainersToReset: []Reset{
				{ID: "sc-0", Name: "sc", Type: ContainerTypeInit, Kill: true},
				{ID: "i-0", Name: "i", Type: ContainerTypeInit},
				{ID: "si-0", Name: "si", Type: ContainerTypeInit},
			}},
		},
		"two sources, the second killed by the reset is a target": {
			pod:        restartAllPod(nil, []string{"src", "r"}, "src", "r"),
			status:     readyStatus(exited("src", 42), running("r")),
			restarting: true,
			want: PodActions{SandboxID: "sb-1", NextInit: -1, ContainersToReset: []Reset{
				{ID: "r-0", Name: "r", Type: ContainerTypeRegular, Kill: true},
				{ID: "src-0", Name: "src", Type: ContainerTypeRegular},
			}},
		},
		"sandbox not ready: a new one, nothing reset nor started yet": {
			pod: restartAllPod(nil, []string{"src", "r"}, "src"),
			status: &PodStatus{Sandboxes: []SandboxStatus{sandbox("sb-1", 1, false)},
				Containers: []ContainerStatus{exited("src", 42), exited("r", 137)}},
			restarting: true,
			want:       PodActions{KillPod: true, CreateSandbox: true, Attempt: 2, NextInit: -1},
		},
		"nothing left: nothing to do": {
			pod:        restartAllPod([]string{"i"}, []string{"src"}, "src"),
			status:     readyStatus(),
			restarting: true,
			want:       PodActions{SandboxID: "sb-1", NextInit: -1},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, kills := normalize(ComputePodActions(tc.pod, tc.status, PlanInputs{RestartAllContainers: tc.restarting, MaxDeadPerContainer: 1}))
			if len(kills) != 0 {
				t.Errorf("containers to kill %v, want none (the reset kills)", kills)
			}
			if want, _ := normalize(tc.want); !reflect.DeepEqual(got, want) {
				t.Errorf("plan:\n got  %+v (%s)\n want %+v (%s)", got, got, want, want)
			}
		})
	}
}

// TestSyncPodRestartAllContainers: the reset stops the containers still
// running with no grace (the minimum, 2 s; Killing "killing"), removes
// every instance in the plan's order and keeps their log files; the next
// plan runs the pod again from its first init container, with the next
// attempt (restart count) read from the logs and no back-off. A removal
// that fails stops the reset, which the next sync takes up again.
func TestSyncPodRestartAllContainers(t *testing.T) {
	f, rec := hookFixture(t)
	f.rs.writeLogs = true
	ctx := context.Background()
	pod := restartAllPod([]string{"i", "sc"}, []string{"src", "r"}, "src")
	pod.Name, pod.Namespace = "web", "prod"
	ids := map[string]string{}
	for n := 0; len(ids) < 4; n++ {
		if n == 5 {
			t.Fatalf("pod not running after 5 syncs: %+v", f.status(t, pod).Containers)
		}
		if res, _ := f.sync(t, pod); res.Error() != nil {
			t.Fatal(res.Error())
		}
		for _, c := range f.status(t, pod).Containers {
			ids[c.Name] = c.ID
			if c.Name == "i" && c.State == StateRunning {
				f.exit(t, c.ID, 0)
			}
		}
	}
	f.exit(t, ids["src"], 42)

	restartAll := func() (*SyncResult, PodActions) {
		st := f.status(t, pod)
		plan := ComputePodActions(pod, st, PlanInputs{RestartAllContainers: true, BackOff: f.b.View(f.clock.Now())})
		return f.rt.SyncPod(ctx, pod, st, plan, f.b, f.clock.Now()), plan
	}
	f.rs.InjectError("RemoveContainer", os.ErrPermission)
	res, plan := restartAll()
	if want := "reset(4)"; plan.String() != want {
		t.Fatalf("plan %s, want %s", plan, want)
	}
	if res.Error() == nil || len(res.Reset) != 0 || len(f.rs.removeOrder()) != 0 {
		t.Fatalf("failed removal: error %v, reset %v, removed %v; want the error and nothing removed", res.Error(), res.Reset, f.rs.removeOrder())
	}
	if got := f.rs.stopOrder(); !reflect.DeepEqual(got, []string{ids["r"]}) {
		t.Errorf("stopped %v before the failed removal, want only the first target %s", got, ids["r"])
	}

	res, _ = restartAll()
	if err := res.Error(); err != nil {
		t.Fatal(err)
	}
	want := []string{ids["r"], ids["i"], ids["sc"], ids["src"]}
	if got := f.rs.removeOrder(); !reflect.DeepEqual(got, want) || !reflect.DeepEqual(res.Reset, want) {
		t.Errorf("removed %v (reported %v), want %v", got, res.Reset, want)
	}
	if got := f.rs.stopTimeouts(); got[ids["sc"]] != minGracePeriod || got[ids["r"]] != minGracePeriod || len(got) != 2 {
		t.Errorf("stop timeouts %v, want %d s for the running r and sc only", got, minGracePeriod)
	}
	if !rec.has("Normal Killing killing") {
		t.Errorf("events %v, want Killing with the kubelet's message \"killing\"", rec.events)
	}
	if left := f.status(t, pod).Containers; len(left) != 0 {
		t.Fatalf("containers left after the reset: %+v", left)
	}
	for _, name := range []string{"i", "sc", "src", "r"} {
		if _, err := os.Stat(filepath.Join(f.rt.PodLogDir(RefOf(pod)), ContainerLogPath(name, 0))); err != nil {
			t.Errorf("log of %s's removed instance: %v, want it kept", name, err)
		}
	}

	res, plan = f.sync(t, pod)
	if res.Error() != nil || plan.NextInit != 0 || len(res.Waiting) != 0 {
		t.Fatalf("sync after the reset: plan %s, waiting %v, error %v; want the first init container started", plan, res.Waiting, res.Error())
	}
	if c := f.status(t, pod).Latest("i", ContainerTypeInit); c == nil || c.State != StateRunning || c.Attempt != 1 {
		t.Errorf("init container after the reset %+v, want running attempt 1", c)
	}
}

// exit makes container id exit with code now.
func (f *syncFixture) exit(t *testing.T, id string, code int32) {
	t.Helper()
	if err := f.rs.setContainer(id, func(c *fakeContainer) {
		c.State = runtimeapi.ContainerState_CONTAINER_EXITED
		c.ExitCode = code
		c.FinishedAt = f.clock.Now().UnixNano()
	}); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(time.Second)
}
