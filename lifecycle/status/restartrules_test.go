package status

import (
	"testing"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
)

// TestPodPhaseContainerRestartRules: a container's own restartPolicy and
// restartPolicyRules decide whether its exit ends the pod, as the
// kubelet's getPhase with ContainerRestartRules on.
func TestPodPhaseContainerRestartRules(t *testing.T) {
	const (
		always = v1.RestartPolicyAlways
		never  = v1.RestartPolicyNever
	)
	retry42 := []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
	s := func(ss ...v1.ContainerStatus) []v1.ContainerStatus { return ss }
	tests := map[string]struct {
		policy  v1.RestartPolicy
		own     v1.ContainerRestartPolicy // of "a" (or init "i")
		rules   []v1.ContainerRestartRule
		inits   []v1.ContainerStatus
		regular []v1.ContainerStatus
		want    v1.PodPhase
	}{
		"Never pod, Always container exited 0: restarting": {policy: never, own: v1.ContainerRestartPolicyAlways,
			regular: s(terminatedState("a", 0)), want: v1.PodRunning},
		"Never pod, Always container in back-off": {policy: never, own: v1.ContainerRestartPolicyAlways,
			regular: s(waitingWithLastTermination("a", 1)), want: v1.PodRunning},
		"Always pod, Never container failed: Failed": {policy: always, own: v1.ContainerRestartPolicyNever,
			regular: s(terminatedState("a", 1)), want: v1.PodFailed},
		"Always pod, OnFailure container succeeded: Succeeded": {policy: always, own: v1.ContainerRestartPolicyOnFailure,
			regular: s(terminatedState("a", 0)), want: v1.PodSucceeded},
		"Always pod, Never container failed, other restarting": {policy: always, own: v1.ContainerRestartPolicyNever,
			regular: s(terminatedState("a", 1), terminatedState("b", 0)), want: v1.PodRunning},
		"Never container, rule 42, exit 42: restarting": {policy: never, own: v1.ContainerRestartPolicyNever, rules: retry42,
			regular: s(terminatedState("a", 42)), want: v1.PodRunning},
		"Never container, rule 42, exit 1: Failed": {policy: never, own: v1.ContainerRestartPolicyNever, rules: retry42,
			regular: s(terminatedState("a", 1)), want: v1.PodFailed},
		"Never pod, OnFailure init failed: Pending": {policy: never, own: v1.ContainerRestartPolicyOnFailure,
			inits: s(terminatedState("i", 1)), regular: s(waitingState("a")), want: v1.PodPending},
		"Always pod, Never init failed: Failed": {policy: always, own: v1.ContainerRestartPolicyNever,
			inits: s(terminatedState("i", 1)), regular: s(waitingState("a")), want: v1.PodFailed},
		"Always pod, Never init in back-off after a failure: Failed": {policy: always, own: v1.ContainerRestartPolicyNever,
			inits: s(waitingWithLastTermination("i", 1)), regular: s(waitingState("a")), want: v1.PodFailed},
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
			target := &pod.Spec.Containers[0]
			if len(inits) > 0 {
				target = &pod.Spec.InitContainers[0]
			}
			own := tc.own
			target.RestartPolicy, target.RestartPolicyRules = &own, tc.rules
			if got := podPhase(pod, tc.inits, tc.regular, false); got != tc.want {
				t.Errorf("podPhase = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestCheckContainerStateTransitionRestartRules: a terminated container
// may run again when its own restartPolicy or rules restart it, not
// otherwise.
func TestCheckContainerStateTransitionRestartRules(t *testing.T) {
	retry42 := []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
	tests := map[string]struct {
		own     *v1.ContainerRestartPolicy
		rules   []v1.ContainerRestartRule
		exit    int32
		init    bool
		wantErr bool
	}{
		"pod's Never alone":           {exit: 1, wantErr: true},
		"container Always":            {own: ptrPolicy(v1.ContainerRestartPolicyAlways), exit: 0},
		"container OnFailure, exit 1": {own: ptrPolicy(v1.ContainerRestartPolicyOnFailure), exit: 1},
		"container OnFailure, exit 0": {own: ptrPolicy(v1.ContainerRestartPolicyOnFailure), exit: 0, wantErr: true},
		"rule matches":                {own: ptrPolicy(v1.ContainerRestartPolicyNever), rules: retry42, exit: 42},
		"rule does not match":         {own: ptrPolicy(v1.ContainerRestartPolicyNever), rules: retry42, exit: 1, wantErr: true},
		"init container OnFailure":    {own: ptrPolicy(v1.ContainerRestartPolicyOnFailure), exit: 1, init: true},
		"init container pod's Never":  {exit: 1, init: true, wantErr: true},
		// One exit can restart every container in place: any may run again.
		"RestartAllContainers rule, another exit code":       {own: ptrPolicy(v1.ContainerRestartPolicyNever), rules: restartAll42, exit: 1},
		"RestartAllContainers rule, init container exited 0": {own: ptrPolicy(v1.ContainerRestartPolicyNever), rules: restartAll42, exit: 0, init: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := testutil.Pod(v1.RestartPolicyNever, []string{"i"}, "a")
			target, old, cur := &pod.Spec.Containers[0], &v1.PodStatus{}, &v1.PodStatus{}
			was, now := terminatedState("a", tc.exit), runningState("a")
			if tc.init {
				target, was, now = &pod.Spec.InitContainers[0], terminatedState("i", tc.exit), runningState("i")
				old.InitContainerStatuses, cur.InitContainerStatuses = []v1.ContainerStatus{was}, []v1.ContainerStatus{now}
			} else {
				old.ContainerStatuses, cur.ContainerStatuses = []v1.ContainerStatus{was}, []v1.ContainerStatus{now}
			}
			target.RestartPolicy, target.RestartPolicyRules = tc.own, tc.rules
			err := checkContainerStateTransition(old, cur, &pod.Spec)
			if (err != nil) != tc.wantErr {
				t.Errorf("error %v, want error: %v", err, tc.wantErr)
			}
		})
	}
}

func ptrPolicy(p v1.ContainerRestartPolicy) *v1.ContainerRestartPolicy { return &p }
