package admission

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
)

// ReasonSysctl is the kubelet's rejection reason for a sysctl it does not
// allow (pkg/kubelet/sysctl.ForbiddenReason).
const ReasonSysctl = "SysctlForbidden"

// safeSysctls are the kubelet v1.35 safe sysctls (namespaced and isolated
// from other pods), with the kernel version that namespaced each (""
// always) (pkg/kubelet/sysctl/safe_sysctls.go).
var safeSysctls = []struct{ name, kernel string }{
	{"kernel.shm_rmid_forced", ""},
	{"net.ipv4.ip_local_port_range", ""},
	{"net.ipv4.tcp_syncookies", ""},
	{"net.ipv4.ping_group_range", ""},
	{"net.ipv4.ip_unprivileged_port_start", ""},
	{"net.ipv4.ip_local_reserved_ports", "3.16"},
	{"net.ipv4.tcp_keepalive_time", "4.5"},
	{"net.ipv4.tcp_fin_timeout", "4.6"},
	{"net.ipv4.tcp_keepalive_intvl", "4.5"},
	{"net.ipv4.tcp_keepalive_probes", "4.5"},
	{"net.ipv4.tcp_rmem", "4.15"},
	{"net.ipv4.tcp_wmem", "4.15"},
}

// sysctlPattern is the API's sysctl pattern: dot- or slash-separated
// segments, optionally ending in * (policy validation's
// SysctlContainSlashPatternFmt).
var sysctlPattern = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]$`)

// Sysctls is the node's sysctl allowlist: the safe sysctls its kernel
// namespaces plus --allowed-unsafe-sysctls (names or prefixes ending in
// *), each known to be namespaced by the kernel.
type Sysctls struct {
	names    map[string]utilsysctl.Namespace
	prefixes map[string]utilsysctl.Namespace
}

// NewSysctls builds the allowlist for a kernel release (e.g. "6.1.0-18";
// "" reads /proc/sys/kernel/osrelease) and the unsafe patterns the
// operator allows. A pattern the kernel does not namespace is an error,
// as on the kubelet.
func NewSysctls(kernelRelease string, unsafe []string) (*Sysctls, error) {
	if kernelRelease == "" {
		b, err := os.ReadFile("/proc/sys/kernel/osrelease")
		if err != nil {
			return nil, fmt.Errorf("reading the kernel version: %w", err)
		}
		kernelRelease = strings.TrimSpace(string(b))
	}
	kernel, err := version.ParseGeneric(kernelRelease)
	if err != nil {
		return nil, fmt.Errorf("parsing the kernel version %q: %w", kernelRelease, err)
	}
	var patterns []string
	for _, s := range safeSysctls {
		if s.kernel == "" || kernel.AtLeast(version.MustParseGeneric(s.kernel)) {
			patterns = append(patterns, s.name)
		}
	}
	patterns = append(patterns, unsafe...)
	w := &Sysctls{names: map[string]utilsysctl.Namespace{}, prefixes: map[string]utilsysctl.Namespace{}}
	for _, p := range patterns {
		if len(p) > 253 || !sysctlPattern.MatchString(p) {
			return nil, fmt.Errorf("sysctl %q must have at most 253 characters and match regex %s", p, sysctlPattern)
		}
		ns, nameOrPrefix, prefixed := utilsysctl.GetNamespace(p)
		if ns == utilsysctl.UnknownNamespace {
			return nil, fmt.Errorf("the sysctls %q are not known to be namespaced", nameOrPrefix)
		}
		if prefixed {
			w.prefixes[nameOrPrefix] = ns
		} else {
			w.names[nameOrPrefix] = ns
		}
	}
	return w, nil
}

// Admit checks the pod's sysctls against the allowlist and the namespaces
// the pod shares with the host (a net sysctl with hostNetwork, an IPC one
// with hostIPC), with the kubelet's reason and message.
func (w *Sysctls) Admit(pod *v1.Pod) Result {
	if w == nil || pod.Spec.SecurityContext == nil {
		return admitted
	}
	for _, s := range pod.Spec.SecurityContext.Sysctls {
		if err := w.validate(s.Name, pod.Spec.HostNetwork, pod.Spec.HostIPC); err != nil {
			return Result{Reason: ReasonSysctl, Message: "forbidden sysctl: " + err.Error()}
		}
	}
	return admitted
}

func (w *Sysctls) validate(name string, hostNet, hostIPC bool) error {
	name = utilsysctl.NormalizeName(name)
	ns, found := w.names[name]
	if !found {
		for p, pns := range w.prefixes {
			if strings.HasPrefix(name, p) {
				ns, found = pns, true
				break
			}
		}
	}
	if !found {
		return fmt.Errorf("%q not allowlisted", name)
	}
	if (ns == utilsysctl.IPCNamespace && hostIPC) || (ns == utilsysctl.NetNamespace && hostNet) {
		return fmt.Errorf("%q not allowed with host %s enabled", name, ns)
	}
	return nil
}
