package podutil

import v1 "k8s.io/api/core/v1"

// The restart decision of a container that exited (ContainerRestartRules,
// beta and on in v1.35; the kubelet's pkg/api/v1/pod ContainerShouldRestart),
// for regular and non-sidecar init containers alike:
//
//	exit code ──> a restartPolicyRules entry matches? ──yes──> action Restart: restart
//	                  │                                        action RestartAllContainers:
//	                  │                                          restart, with all the others
//	                  │ no (or no container restartPolicy)
//	                  v
//	              container restartPolicy set? ──yes──> Always: restart
//	                  │ no                              OnFailure: restart unless exit 0
//	                  v                                 Never: do not restart
//	              pod restartPolicy: Always (or empty): restart
//	                                 OnFailure: restart unless exit 0
//	                                 Never: do not restart
//
// Rules are only read when the container has a restartPolicy of its own
// (the API server refuses rules without one). A container that was killed
// while running (a failed probe) or whose exit is unknown has no exit code
// for the rules: RestartableWithoutExitCode decides then.
//
// The action RestartAllContainers (RestartAllContainersOnContainerExits,
// beta and on in v1.36 and v1.37) restarts the pod in place: every init,
// sidecar and regular container is stopped and removed, and the pod runs
// again from its first init container in the same sandbox
// (RestartsAllContainers, AllContainersCouldRestart, AllContainersRestarting;
// the plan is cri's, the status lifecycle/status's).

// ContainerShouldRestart reports whether container c of a pod with spec,
// which exited with exitCode, is started again.
func ContainerShouldRestart(c *v1.Container, spec *v1.PodSpec, exitCode int32) bool {
	if c.RestartPolicy != nil {
		if rule, ok := MatchingRestartRule(c, exitCode); ok {
			switch rule.Action {
			case v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleActionRestartAllContainers:
				return true
			}
		}
		switch *c.RestartPolicy {
		case v1.ContainerRestartPolicyAlways:
			return true
		case v1.ContainerRestartPolicyOnFailure:
			return exitCode != 0
		case v1.ContainerRestartPolicyNever:
			return false
		}
	}
	switch spec.RestartPolicy {
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	case v1.RestartPolicyNever:
		return false
	default:
		return true
	}
}

// MatchingRestartRule returns the first of c's restartPolicyRules whose
// exit codes match exitCode (operator In: listed; NotIn: not listed).
func MatchingRestartRule(c *v1.Container, exitCode int32) (v1.ContainerRestartRule, bool) {
	for _, rule := range c.RestartPolicyRules {
		if rule.ExitCodes == nil {
			continue
		}
		listed := false
		for _, code := range rule.ExitCodes.Values {
			if code == exitCode {
				listed = true
				break
			}
		}
		switch rule.ExitCodes.Operator {
		case v1.ContainerRestartRuleOnExitCodesOpIn:
			if listed {
				return rule, true
			}
		case v1.ContainerRestartRuleOnExitCodesOpNotIn:
			if !listed {
				return rule, true
			}
		}
	}
	return v1.ContainerRestartRule{}, false
}

// RestartableWithoutExitCode reports whether container c is started again
// after it stopped with no exit code the rules could read (killed for a
// failed liveness or startup probe, or in an unknown state): by its own
// restartPolicy if it has one, else by the pod's (anything but Never).
func RestartableWithoutExitCode(c *v1.Container, spec *v1.PodSpec) bool {
	if c.RestartPolicy != nil {
		return *c.RestartPolicy != v1.ContainerRestartPolicyNever
	}
	return spec.RestartPolicy != v1.RestartPolicyNever
}

// RunsOnce reports whether container c, once it succeeded, is not started
// again in a new sandbox: its own restartPolicy is OnFailure, or it has
// none and the pod's is OnFailure (the kubelet's computePodActions when it
// creates a sandbox; a pod whose policy is Never gets no new sandbox).
func RunsOnce(c *v1.Container, spec *v1.PodSpec) bool {
	if c.RestartPolicy != nil {
		return *c.RestartPolicy == v1.ContainerRestartPolicyOnFailure
	}
	return spec.RestartPolicy == v1.RestartPolicyOnFailure
}

// RestartsAllContainers reports whether container c's exit with exitCode
// restarts the whole pod in place: its first matching rule's action is
// RestartAllContainers (the kubelet's FindMatchingContainerRestartRule
// test in ShouldAllContainersRestart and getContainersToReset). Like the
// other rules it is read whatever c's restartPolicy: the API server
// accepts rules only with one.
func RestartsAllContainers(c *v1.Container, exitCode int32) bool {
	rule, ok := MatchingRestartRule(c, exitCode)
	return ok && rule.Action == v1.ContainerRestartRuleActionRestartAllContainers
}

// AllContainersCouldRestart reports whether one of the pod's init or
// regular containers has a rule with the action RestartAllContainers
// (the kubelet's AllContainersCouldRestart): only such a pod has the
// AllContainersRestarting condition, and its containers may leave the
// terminated state whatever their restart policies.
func AllContainersCouldRestart(spec *v1.PodSpec) bool {
	for _, list := range [][]v1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			for _, rule := range list[i].RestartPolicyRules {
				if rule.Action == v1.ContainerRestartRuleActionRestartAllContainers {
					return true
				}
			}
		}
	}
	return false
}

// AllContainersRestarting reports, from the pod's API status st alone,
// whether the pod is restarting all its containers in place: its
// AllContainersRestarting condition is True, or an init or regular
// container's status is terminated with an exit code whose rule says
// RestartAllContainers (the API half of the kubelet's
// ShouldAllContainersRestart; lifecycle/status adds the runtime's half).
func AllContainersRestarting(spec *v1.PodSpec, st *v1.PodStatus) bool {
	if st == nil {
		return false
	}
	for _, c := range st.Conditions {
		if c.Type == v1.AllContainersRestarting && c.Status == v1.ConditionTrue {
			return true
		}
	}
	for _, pair := range []struct {
		specs    []v1.Container
		statuses []v1.ContainerStatus
	}{{spec.InitContainers, st.InitContainerStatuses}, {spec.Containers, st.ContainerStatuses}} {
		for _, cs := range pair.statuses {
			t := cs.State.Terminated
			if t == nil {
				continue
			}
			for i := range pair.specs {
				if pair.specs[i].Name == cs.Name && RestartsAllContainers(&pair.specs[i], t.ExitCode) {
					return true
				}
			}
		}
	}
	return false
}
