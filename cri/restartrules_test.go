package cri

import (
	"reflect"
	"testing"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
)

// TestComputePodActionsContainerRestartRules: a container's own
// restartPolicy and restartPolicyRules (ContainerRestartRules) decide over
// the pod's whether it runs again, for regular and init containers, as
// the kubelet's computePodActions with podutil.ContainerShouldRestart.
func TestComputePodActionsContainerRestartRules(t *testing.T) {
	const (
		always    = v1.RestartPolicyAlways
		onFailure = v1.RestartPolicyOnFailure
		never     = v1.RestartPolicyNever
	)
	rules := func(op v1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) []v1.ContainerRestartRule {
		return []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
			ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes}}}
	}
	// pod returns a pod of policy whose container (or init container, if
	// init) "a" has policy c and rules r.
	pod := func(policy v1.RestartPolicy, init bool, c v1.ContainerRestartPolicy, r []v1.ContainerRestartRule) *v1.Pod {
		var p *v1.Pod
		target := func() *v1.Container { return &p.Spec.Containers[0] }
		if init {
			p = testutil.Pod(policy, []string{"a"}, "b")
			target = func() *v1.Container { return &p.Spec.InitContainers[0] }
		} else {
			p = testutil.Pod(policy, nil, "a")
		}
		target().RestartPolicy = &c
		target().RestartPolicyRules = r
		return p
	}
	notReady := func(cs ...ContainerStatus) *PodStatus {
		return &PodStatus{Sandboxes: []SandboxStatus{sandbox("sb-old", 1, false)}, Containers: cs}
	}
	tests := map[string]struct {
		pod    *v1.Pod
		status *PodStatus
		failed string // container ID that failed its liveness probe
		want   want
	}{
		"Never pod, Always container: exited 0, started again": {
			pod:    pod(never, false, v1.ContainerRestartPolicyAlways, nil),
			status: readyStatus(exited("a", 0)),
			want:   want{sandboxID: "sb-1", start: []int{0}},
		},
		"Always pod, Never container: exited 1, stays exited": {
			pod:    pod(always, false, v1.ContainerRestartPolicyNever, nil),
			status: readyStatus(exited("a", 1)),
			want:   want{sandboxID: "sb-1"},
		},
		"Always pod, OnFailure container: exited 0, stays exited": {
			pod:    pod(always, false, v1.ContainerRestartPolicyOnFailure, nil),
			status: readyStatus(exited("a", 0)),
			want:   want{sandboxID: "sb-1"},
		},
		"Never container, rule In 42: exited 42, started again": {
			pod:    pod(always, false, v1.ContainerRestartPolicyNever, rules(v1.ContainerRestartRuleOnExitCodesOpIn, 42)),
			status: readyStatus(exited("a", 42)),
			want:   want{sandboxID: "sb-1", start: []int{0}},
		},
		"Never container, rule In 42: exited 1, stays exited": {
			pod:    pod(always, false, v1.ContainerRestartPolicyNever, rules(v1.ContainerRestartRuleOnExitCodesOpIn, 42)),
			status: readyStatus(exited("a", 1)),
			want:   want{sandboxID: "sb-1"},
		},
		"Never container, rule NotIn 0: exited 3, started again": {
			pod:    pod(never, false, v1.ContainerRestartPolicyNever, rules(v1.ContainerRestartRuleOnExitCodesOpNotIn, 0)),
			status: readyStatus(exited("a", 3)),
			want:   want{sandboxID: "sb-1", start: []int{0}},
		},
		"liveness kill, Never pod, Always container: restarted": {
			pod:    pod(never, false, v1.ContainerRestartPolicyAlways, nil),
			status: readyStatus(running("a")),
			failed: "a-0",
			want:   want{sandboxID: "sb-1", start: []int{0}, killIDs: []string{"a-0"}},
		},
		"liveness kill, Always pod, Never container with a Restart rule: not restarted (no exit code yet)": {
			pod:    pod(always, false, v1.ContainerRestartPolicyNever, rules(v1.ContainerRestartRuleOnExitCodesOpIn, 137)),
			status: readyStatus(running("a")),
			failed: "a-0",
			want:   want{sandboxID: "sb-1", killIDs: []string{"a-0"}},
		},
		"new sandbox, Always pod, OnFailure container that succeeded: not run again": {
			pod:    pod(always, false, v1.ContainerRestartPolicyOnFailure, nil),
			status: notReady(exited("a", 0)),
			want:   want{kill: true, attempt: 2},
		},
		"new sandbox, OnFailure pod, Always container that succeeded: run again": {
			pod:    pod(onFailure, false, v1.ContainerRestartPolicyAlways, nil),
			status: notReady(exited("a", 0)),
			want:   want{kill: true, create: true, attempt: 2, start: []int{0}},
		},
		"sidecar stops once the Always pod's only container, restartPolicy Never, exited": {
			pod: func() *v1.Pod {
				p := pod(always, false, v1.ContainerRestartPolicyNever, nil)
				sc := v1.ContainerRestartPolicyAlways
				p.Spec.InitContainers = []v1.Container{{Name: "sc", Image: testutil.Image, RestartPolicy: &sc}}
				return p
			}(),
			status: readyStatus(exited("a", 1), initCtr("sc", StateRunning, 0)),
			want:   want{sandboxID: "sb-1", killIDs: []string{"sc-0"}},
		},
		"init: Never pod, OnFailure init container failed: run again": {
			pod:    pod(never, true, v1.ContainerRestartPolicyOnFailure, nil),
			status: readyStatus(initCtr("a", StateExited, 1)),
			want:   want{sandboxID: "sb-1", nextInit: intp(0)},
		},
		"init: OnFailure pod, Never init container failed: the pod failed": {
			pod:    pod(onFailure, true, v1.ContainerRestartPolicyNever, nil),
			status: readyStatus(initCtr("a", StateExited, 1)),
			want:   want{sandboxID: "sb-1", initFailed: true},
		},
		"init: Never init container, rule In 7: exited 7, run again": {
			pod:    pod(always, true, v1.ContainerRestartPolicyNever, rules(v1.ContainerRestartRuleOnExitCodesOpIn, 7)),
			status: readyStatus(initCtr("a", StateExited, 7)),
			want:   want{sandboxID: "sb-1", nextInit: intp(0)},
		},
		"init: unknown, Always pod, Never init container: the pod failed": {
			pod:    pod(always, true, v1.ContainerRestartPolicyNever, nil),
			status: readyStatus(initCtr("a", StateUnknown, 0)),
			want:   want{sandboxID: "sb-1", initFailed: true},
		},
		"init: unknown, Never pod, OnFailure init container: replaced": {
			pod:    pod(never, true, v1.ContainerRestartPolicyOnFailure, nil),
			status: readyStatus(initCtr("a", StateUnknown, 0)),
			want:   want{sandboxID: "sb-1", nextInit: intp(0), killIDs: []string{"a-0"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := PlanInputs{}
			if tc.failed != "" {
				in.Failed = func(id string) (string, bool) { return "liveness", id == tc.failed }
				for i := range tc.pod.Spec.Containers {
					tc.pod.Spec.Containers[i].LivenessProbe = &v1.Probe{}
				}
			}
			got, gotKill := normalize(ComputePodActions(tc.pod, tc.status, in))
			wantPlan, wantKill := normalize(tc.want.plan())
			wantKill = tc.want.killIDs
			if !reflect.DeepEqual(got, wantPlan) {
				t.Errorf("plan:\n got  %+v (%s)\n want %+v (%s)", got, got, wantPlan, wantPlan)
			}
			if !reflect.DeepEqual(gotKill, wantKill) {
				t.Errorf("containers to kill: got %v, want %v", gotKill, wantKill)
			}
		})
	}
}
