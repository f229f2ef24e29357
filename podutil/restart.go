package podutil

import v1 "k8s.io/api/core/v1"

// The restart decision of a container that exited (ContainerRestartRules,
// beta and on in v1.35; the kubelet's pkg/api/v1/pod ContainerShouldRestart),
// for regular and non-sidecar init containers alike:
//
//	exit code ──> a restartPolicyRules entry matches? ──yes──> action Restart: restart
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

// ContainerShouldRestart reports whether container c of a pod with spec,
// which exited with exitCode, is started again.
func ContainerShouldRestart(c *v1.Container, spec *v1.PodSpec, exitCode int32) bool {
	if c.RestartPolicy != nil {
		if rule, ok := MatchingRestartRule(c, exitCode); ok && rule.Action == v1.ContainerRestartRuleActionRestart {
			return true
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
