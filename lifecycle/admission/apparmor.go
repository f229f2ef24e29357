package admission

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
)

// ReasonAppArmor is the kubelet's rejection reason for a pod whose
// AppArmor profile the node cannot enforce
// (pkg/kubelet/lifecycle.AppArmorNotAdmittedReason).
const ReasonAppArmor = "AppArmor"

// errAppArmorDisabled is the kubelet's host check's error
// (pkg/security/apparmor validateHost).
var errAppArmorDisabled = errors.New("AppArmor is not enabled on the host")

// AppArmor is the node's AppArmor admission: the kubelet's
// appArmorAdmitHandler over its apparmor.Validator. The host is checked
// once, when the value is made, as the kubelet does at start (enabling or
// disabling AppArmor needs a restart of the agent).
type AppArmor struct {
	// hostErr says why the host cannot enforce profiles; nil: it can.
	hostErr error
}

// NewAppArmor is the admission of a node whose kernel enforces AppArmor
// profiles (enabled) or does not.
func NewAppArmor(enabled bool) *AppArmor {
	if enabled {
		return &AppArmor{}
	}
	return &AppArmor{hostErr: errAppArmorDisabled}
}

// HostAppArmor is the admission of this machine, probed once per process
// (AppArmorEnabled).
var HostAppArmor = sync.OnceValue(func() *AppArmor { return NewAppArmor(AppArmorEnabled()) })

// AppArmorEnabled reports whether the kernel enforces AppArmor: the
// securityfs directory exists and the module's "enabled" parameter is Y
// (the kubelet's forked libcontainer apparmor.IsEnabled).
func AppArmorEnabled() bool {
	if _, err := os.Stat("/sys/kernel/security/apparmor"); err != nil {
		return false
	}
	b, err := os.ReadFile("/sys/module/apparmor/parameters/enabled")
	return err == nil && len(b) > 1 && b[0] == 'Y'
}

// Admit refuses a pending pod that asks for an AppArmor profile other
// than Unconfined (pod or container securityContext, or a deprecated
// container.apparmor.security.beta.kubernetes.io/<container> annotation)
// when the host cannot enforce it, and a Localhost profile without a
// name, with the kubelet's reason and message ("Cannot enforce AppArmor:
// ..."). Pods past Pending were admitted before and are not checked again
// (an empty phase, which the API never gives, counts as Pending).
func (a *AppArmor) Admit(pod *v1.Pod) Result {
	pending := pod.Status.Phase == v1.PodPending || pod.Status.Phase == ""
	if a == nil || !pending || !appArmorRequired(pod) {
		return admitted
	}
	err := a.hostErr
	if err == nil {
		podutil.AllContainers(pod, func(c *v1.Container) bool {
			p := podutil.AppArmorProfile(pod, c)
			if p != nil && p.Type == v1.AppArmorProfileTypeLocalhost &&
				(p.LocalhostProfile == nil || strings.TrimSpace(*p.LocalhostProfile) == "") {
				err = fmt.Errorf("invalid empty AppArmor profile name: %q", p)
				return false
			}
			return true
		})
	}
	if err == nil {
		return admitted
	}
	return Result{Reason: ReasonAppArmor, Message: "Cannot enforce AppArmor: " + err.Error()}
}

// appArmorRequired reports whether the pod asks for a profile other than
// Unconfined anywhere (the kubelet's apparmor.isRequired). The kubelet
// decides on the first deprecated annotation it meets in map order; here
// any annotation that is not unconfined counts, so that the answer does
// not depend on that order and errs on the side of refusing.
func appArmorRequired(pod *v1.Pod) bool {
	confined := func(p *v1.AppArmorProfile) bool {
		return p != nil && p.Type != v1.AppArmorProfileTypeUnconfined
	}
	if sc := pod.Spec.SecurityContext; sc != nil && confined(sc.AppArmorProfile) {
		return true
	}
	required := false
	podutil.AllContainers(pod, func(c *v1.Container) bool {
		if c.SecurityContext != nil && confined(c.SecurityContext.AppArmorProfile) {
			required = true
		}
		return !required
	})
	if required {
		return true
	}
	for k, v := range pod.Annotations {
		if strings.HasPrefix(k, v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix) && v != v1.DeprecatedAppArmorBetaProfileNameUnconfined {
			return true
		}
	}
	return false
}
