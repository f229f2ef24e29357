package podutil

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func rule(action v1.ContainerRestartRuleAction, op v1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) v1.ContainerRestartRule {
	return v1.ContainerRestartRule{Action: action, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes}}
}

func TestContainerShouldRestart(t *testing.T) {
	const (
		in    = v1.ContainerRestartRuleOnExitCodesOpIn
		notIn = v1.ContainerRestartRuleOnExitCodesOpNotIn
		again = v1.ContainerRestartRuleActionRestart
	)
	pol := func(p v1.ContainerRestartPolicy) *v1.ContainerRestartPolicy { return &p }
	tests := map[string]struct {
		pod    v1.RestartPolicy
		policy *v1.ContainerRestartPolicy
		rules  []v1.ContainerRestartRule
		exit   int32
		want   bool
	}{
		// The pod's policy alone (no container policy).
		"pod Always 0":    {pod: v1.RestartPolicyAlways, exit: 0, want: true},
		"pod Always 1":    {pod: v1.RestartPolicyAlways, exit: 1, want: true},
		"pod OnFailure 0": {pod: v1.RestartPolicyOnFailure, exit: 0, want: false},
		"pod OnFailure 1": {pod: v1.RestartPolicyOnFailure, exit: 1, want: true},
		"pod Never 0":     {pod: v1.RestartPolicyNever, exit: 0, want: false},
		"pod Never 137":   {pod: v1.RestartPolicyNever, exit: 137, want: false},
		"pod empty 0":     {pod: "", exit: 0, want: true},
		// The container's policy over the pod's.
		"Never pod, Always container":         {pod: v1.RestartPolicyNever, policy: pol(v1.ContainerRestartPolicyAlways), exit: 0, want: true},
		"Never pod, OnFailure container 1":    {pod: v1.RestartPolicyNever, policy: pol(v1.ContainerRestartPolicyOnFailure), exit: 1, want: true},
		"Never pod, OnFailure container 0":    {pod: v1.RestartPolicyNever, policy: pol(v1.ContainerRestartPolicyOnFailure), exit: 0, want: false},
		"Always pod, Never container":         {pod: v1.RestartPolicyAlways, policy: pol(v1.ContainerRestartPolicyNever), exit: 1, want: false},
		"Always pod, OnFailure container 0":   {pod: v1.RestartPolicyAlways, policy: pol(v1.ContainerRestartPolicyOnFailure), exit: 0, want: false},
		"unknown container policy: the pod's": {pod: v1.RestartPolicyOnFailure, policy: pol("Sometimes"), exit: 1, want: true},
		// Rules first, in order.
		"rule In matches": {pod: v1.RestartPolicyNever, policy: pol(v1.ContainerRestartPolicyNever),
			rules: []v1.ContainerRestartRule{rule(again, in, 42, 43)}, exit: 42, want: true},
		"rule In does not match: the container's policy": {pod: v1.RestartPolicyAlways, policy: pol(v1.ContainerRestartPolicyNever),
			rules: []v1.ContainerRestartRule{rule(again, in, 42)}, exit: 1, want: false},
		"rule NotIn matches": {pod: v1.RestartPolicyNever, policy: pol(v1.ContainerRestartPolicyNever),
			rules: []v1.ContainerRestartRule{rule(again, notIn, 0)}, exit: 3, want: true},
		"rule NotIn listed code: no match": {pod: v1.RestartPolicyNever, policy: pol(v1.ContainerRestartPolicyNever),
			rules: []v1.ContainerRestartRule{rule(again, notIn, 0)}, exit: 0, want: false},
		"rule RestartAllContainers matches: restarted (with the others)": {pod: v1.RestartPolicyNever, policy: pol(v1.ContainerRestartPolicyNever),
			rules: []v1.ContainerRestartRule{rule(v1.ContainerRestartRuleActionRestartAllContainers, in, 42)}, exit: 42, want: true},
		"rule RestartAllContainers does not match: the container's policy": {pod: v1.RestartPolicyAlways, policy: pol(v1.ContainerRestartPolicyNever),
			rules: []v1.ContainerRestartRule{rule(v1.ContainerRestartRuleActionRestartAllContainers, in, 42)}, exit: 1, want: false},
		"unknown action falls back to the container's policy": {pod: v1.RestartPolicyAlways, policy: pol(v1.ContainerRestartPolicyNever),
			rules: []v1.ContainerRestartRule{rule("Reboot", in, 42)}, exit: 42, want: false},
		"rules without a container policy are not read": {pod: v1.RestartPolicyNever,
			rules: []v1.ContainerRestartRule{rule(again, in, 42)}, exit: 42, want: false},
		"rule without exit codes is skipped": {pod: v1.RestartPolicyNever, policy: pol(v1.ContainerRestartPolicyNever),
			rules: []v1.ContainerRestartRule{{Action: again}}, exit: 42, want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := &v1.Container{Name: "c", RestartPolicy: tc.policy, RestartPolicyRules: tc.rules}
			if got := ContainerShouldRestart(c, &v1.PodSpec{RestartPolicy: tc.pod}, tc.exit); got != tc.want {
				t.Errorf("ContainerShouldRestart = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRestartableWithoutExitCodeAndRunsOnce(t *testing.T) {
	tests := map[string]struct {
		pod                   v1.RestartPolicy
		policy                *v1.ContainerRestartPolicy
		rules                 []v1.ContainerRestartRule
		wantRestart, wantOnce bool
	}{
		"pod Always":                      {pod: v1.RestartPolicyAlways, wantRestart: true},
		"pod OnFailure":                   {pod: v1.RestartPolicyOnFailure, wantRestart: true, wantOnce: true},
		"pod Never":                       {pod: v1.RestartPolicyNever},
		"Never pod, Always container":     {pod: v1.RestartPolicyNever, policy: ptr.To(v1.ContainerRestartPolicyAlways), wantRestart: true},
		"Never pod, OnFailure container":  {pod: v1.RestartPolicyNever, policy: ptr.To(v1.ContainerRestartPolicyOnFailure), wantRestart: true, wantOnce: true},
		"OnFailure pod, Always container": {pod: v1.RestartPolicyOnFailure, policy: ptr.To(v1.ContainerRestartPolicyAlways), wantRestart: true},
		"Always pod, Never container":     {pod: v1.RestartPolicyAlways, policy: ptr.To(v1.ContainerRestartPolicyNever)},
		"Never container with a Restart rule: still no exit code to match": {pod: v1.RestartPolicyAlways,
			policy: ptr.To(v1.ContainerRestartPolicyNever),
			rules:  []v1.ContainerRestartRule{rule(v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleOnExitCodesOpIn, 137)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := &v1.Container{Name: "c", RestartPolicy: tc.policy, RestartPolicyRules: tc.rules}
			spec := &v1.PodSpec{RestartPolicy: tc.pod}
			if got := RestartableWithoutExitCode(c, spec); got != tc.wantRestart {
				t.Errorf("RestartableWithoutExitCode = %v, want %v", got, tc.wantRestart)
			}
			if got := RunsOnce(c, spec); got != tc.wantOnce {
				t.Errorf("RunsOnce = %v, want %v", got, tc.wantOnce)
			}
		})
	}
}

// TestRestartAllContainersRules: the first matching rule decides whether
// an exit restarts the whole pod; a pod has the AllContainersRestarting
// condition only with such a rule; from the API status alone a pod is
// restarting all its containers while the condition is True or a
// container's terminated state matches such a rule, as the kubelet's
// ShouldAllContainersRestart.
func TestRestartAllContainersRules(t *testing.T) {
	const (
		in  = v1.ContainerRestartRuleOnExitCodesOpIn
		all = v1.ContainerRestartRuleActionRestartAllContainers
	)
	all42 := rule(all, in, 42)
	restart42 := rule(v1.ContainerRestartRuleActionRestart, in, 42)
	terminated := func(name string, code int32) v1.ContainerStatus {
		return v1.ContainerStatus{Name: name, State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}}
	}
	tests := map[string]struct {
		inits, regular []v1.ContainerRestartRule // rules of init "i" and regular "c"
		status         *v1.PodStatus
		exit           int32 // of "c", for RestartsAllContainers
		wantRestarts   bool  // RestartsAllContainers("c", exit)
		wantCould      bool
		wantRestarting bool
	}{
		"no rules": {exit: 42},
		"Restart rule only": {regular: []v1.ContainerRestartRule{restart42}, exit: 42,
			status: &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{terminated("c", 42)}}},
		"the first matching rule decides": {regular: []v1.ContainerRestartRule{restart42, all42}, exit: 42, wantCould: true,
			status: &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{terminated("c", 42)}}},
		"regular container exited 42": {regular: []v1.ContainerRestartRule{all42}, exit: 42, wantRestarts: true, wantCould: true,
			status: &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{terminated("c", 42)}}, wantRestarting: true},
		"regular container exited 1": {regular: []v1.ContainerRestartRule{all42}, exit: 1, wantCould: true,
			status: &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{terminated("c", 1)}}},
		"init container exited 42": {inits: []v1.ContainerRestartRule{all42}, exit: 42, wantCould: true,
			status: &v1.PodStatus{InitContainerStatuses: []v1.ContainerStatus{terminated("i", 42)}}, wantRestarting: true},
		"init rule read in the init statuses only": {inits: []v1.ContainerRestartRule{all42}, exit: 42, wantCould: true,
			status: &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{terminated("i", 42)}}},
		"condition True": {regular: []v1.ContainerRestartRule{all42}, exit: 0, wantCould: true,
			status: &v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.AllContainersRestarting, Status: v1.ConditionTrue}}}, wantRestarting: true},
		"condition False": {regular: []v1.ContainerRestartRule{all42}, exit: 0, wantCould: true,
			status: &v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.AllContainersRestarting, Status: v1.ConditionFalse}}}},
		"no status": {regular: []v1.ContainerRestartRule{all42}, exit: 42, wantRestarts: true, wantCould: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			never := ptr.To(v1.ContainerRestartPolicyNever)
			spec := &v1.PodSpec{
				RestartPolicy:  v1.RestartPolicyNever,
				InitContainers: []v1.Container{{Name: "i", RestartPolicy: never, RestartPolicyRules: tc.inits}},
				Containers:     []v1.Container{{Name: "c", RestartPolicy: never, RestartPolicyRules: tc.regular}},
			}
			if got := RestartsAllContainers(&spec.Containers[0], tc.exit); got != tc.wantRestarts {
				t.Errorf("RestartsAllContainers(c, %d) = %v, want %v", tc.exit, got, tc.wantRestarts)
			}
			if got := AllContainersCouldRestart(spec); got != tc.wantCould {
				t.Errorf("AllContainersCouldRestart = %v, want %v", got, tc.wantCould)
			}
			if got := AllContainersRestarting(spec, tc.status); got != tc.wantRestarting {
				t.Errorf("AllContainersRestarting = %v, want %v", got, tc.wantRestarting)
			}
		})
	}
}
