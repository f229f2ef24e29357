package cri

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// This file holds what the runtime is told of a pod's confinement, as the
// kubelet tells it (kuberuntime's security_context.go, helpers.go,
// kuberuntime_sandbox.go, pkg/kubelet/userns): the RuntimeClass handler,
// the user namespace, the AppArmor and seccomp profiles and the masked
// /proc paths. Each field is either passed on or the pod (or container)
// is refused; none is dropped.

// RuntimeClasses resolves a pod's spec.runtimeClassName to the CRI runtime
// handler of that RuntimeClass (the kubelet's runtimeclass.Manager). An
// unknown class is an error whose text is the API's NotFound
// (`runtimeclass.node.k8s.io "<name>" not found`).
type RuntimeClasses interface {
	LookupRuntimeHandler(name string) (string, error)
}

// SetRuntimeClasses installs the RuntimeClass lookup. It must be called
// before the first SyncPod; without one, a pod naming a RuntimeClass never
// gets a sandbox (FailedCreatePodSandBox), rather than running on the
// default handler.
func (r *Runtime) SetRuntimeClasses(rc RuntimeClasses) { r.classes = rc }

// errNoRuntimeClasses: no lookup was installed.
var errNoRuntimeClasses = errors.New("no RuntimeClass lookup configured")

// runtimeHandler is the CRI runtime handler of pod's sandbox:
// Config.RuntimeHandler without a RuntimeClass, the class's handler with
// one.
func (r *Runtime) runtimeHandler(pod *v1.Pod) (string, error) {
	name := pod.Spec.RuntimeClassName
	if name == nil || *name == "" {
		return r.cfg.RuntimeHandler, nil
	}
	if r.classes == nil {
		return "", fmt.Errorf("RuntimeClass %q: %w", *name, errNoRuntimeClasses)
	}
	return r.classes.LookupRuntimeHandler(*name)
}

// userNamespace is the user namespace of pod's sandbox and containers run
// by handler (the kubelet's UsernsManager.GetOrCreateUserNamespaceMappings):
// the node's without spec.hostUsers: false; with it, the pod's own ID
// mappings (Config.UserNamespaces), or an error, in the kubelet's words,
// where the runtime (or the handler) does not support user namespaces (as
// containerd 1.6 does not), checked before anything is allocated. Without
// an allocator the pod is refused: a pod that asks for a user namespace
// must not run in the host's.
//
// For a sandbox that runs already (creating false), the handler was
// checked when it was made: the pod's mappings are its range again, with
// no runtime call, so that a runtime's passing Status error (or a
// RuntimeClass deleted since) never stops the sync of a running pod (the
// kubelet generates the sandbox config only when it starts containers,
// against its cached runtime state).
func (r *Runtime) userNamespace(ctx context.Context, pod *v1.Pod, handler string, creating bool) (*runtimeapi.UserNamespace, error) {
	if pod.Spec.HostUsers == nil || *pod.Spec.HostUsers {
		return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}, nil
	}
	if !creating && r.cfg.UserNamespaces != nil {
		return r.cfg.UserNamespaces.PodMappings(pod.UID)
	}
	supported, err := r.handlerSupportsUserns(ctx, handler)
	if err != nil || !supported {
		msg := "can't set `spec.hostUsers: false`, runtime does not support user namespaces"
		if handler != "" {
			msg = fmt.Sprintf("can't set `spec.hostUsers: false`, RuntimeClass handler %q does not support user namespaces", handler)
		}
		if err != nil {
			return nil, fmt.Errorf("%v: %w", msg, err)
		}
		return nil, errors.New(msg)
	}
	if r.cfg.UserNamespaces == nil {
		return nil, errors.New("can't set `spec.hostUsers: false`, this crivk has no user namespace ID mappings configured")
	}
	return r.cfg.UserNamespaces.PodMappings(pod.UID)
}

// handlerSupportsUserns asks the runtime's Status which handlers it has
// and whether handler supports user namespaces (the kubelet's
// HandlerSupportsUserNamespaces over its cached runtime state): a runtime
// that reports no handlers (older than CRI's runtime_handlers) supports
// none; a handler it does not report is an error.
func (r *Runtime) handlerSupportsUserns(ctx context.Context, handler string) (bool, error) {
	resp, err := r.rs.Status(ctx, false)
	if err != nil {
		return false, fmt.Errorf("CRI Status on %s: %w", r.cfg.Endpoint, err)
	}
	handlers := resp.GetRuntimeHandlers()
	if len(handlers) == 0 {
		return false, nil
	}
	for _, h := range handlers {
		if h.GetName() == handler {
			return h.GetFeatures().GetUserNamespaces(), nil
		}
	}
	return false, fmt.Errorf("the handler %q is not known", handler)
}

// seccompProfile is the CRI seccomp profile of a container whose effective
// profile is p (container's, else pod's): Unconfined without one (the
// kubelet's default without SeccompDefault), a Localhost profile resolved
// under root (<root-dir>/seccomp, the kubelet's seccompProfileRoot; ""
// passes the name as given). A Localhost profile without a name is the
// kubelet's error (API validation forbids it).
func seccompProfile(p *v1.SeccompProfile, root string) (*runtimeapi.SecurityProfile, error) {
	if p == nil {
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	}
	switch p.Type {
	case v1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case v1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" {
			return nil, errors.New("localhostProfile must be set if seccompProfile type is Localhost.")
		}
		ref := *p.LocalhostProfile
		if root != "" {
			ref = filepath.Join(root, ref)
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: ref}, nil
	default:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	}
}

// appArmorProfile is the CRI AppArmor profile of container c, in the
// current field and in the deprecated string older runtimes read (the
// kubelet's getAppArmorProfile). No profile: nil and "" (the runtime's
// default). Admission (lifecycle/admission) has already refused a pod
// whose profile the host cannot enforce.
func appArmorProfile(pod *v1.Pod, c *v1.Container) (*runtimeapi.SecurityProfile, string, error) {
	p := podutil.AppArmorProfile(pod, c)
	if p == nil {
		return nil, "", nil
	}
	switch p.Type {
	case v1.AppArmorProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, v1.DeprecatedAppArmorBetaProfileRuntimeDefault, nil
	case v1.AppArmorProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, v1.DeprecatedAppArmorBetaProfileNameUnconfined, nil
	case v1.AppArmorProfileTypeLocalhost:
		if p.LocalhostProfile == nil {
			return nil, "", errors.New("missing localhost apparmor profile name")
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: *p.LocalhostProfile},
			v1.DeprecatedAppArmorBetaProfileNamePrefix + *p.LocalhostProfile, nil
	default:
		return nil, "", fmt.Errorf("unknown apparmor profile type: %q", p.Type)
	}
}

// procPaths are the masked and read-only paths of a container with
// procMount pm (the kubelet's ConvertToRuntimeMaskedPaths and
// ConvertToRuntimeReadonlyPaths): none with Unmasked (which API
// validation allows only with hostUsers: false), the defaults otherwise.
// Privileged containers get none (container.go).
func procPaths(pm *v1.ProcMountType) (masked, readonly []string) {
	if pm != nil && *pm == v1.UnmaskedProcMount {
		return []string{}, []string{}
	}
	return defaultMaskedPaths(), defaultReadonlyPaths
}

// The kubelet's default masked and read-only paths (pkg/securitycontext,
// kept in sync with moby): the fixed list plus each possible CPU's
// thermal_throttle directory that exists on this machine.
var (
	defaultMaskedPaths = sync.OnceValue(func() []string {
		paths := []string{
			"/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
			"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
			"/sys/firmware", "/sys/devices/virtual/powercap",
		}
		for cpu := range possibleCPUs() {
			p := fmt.Sprintf("/sys/devices/system/cpu/cpu%d/thermal_throttle", cpu)
			if _, err := os.Stat(p); err == nil {
				paths = append(paths, p)
			}
		}
		return paths
	})
	defaultReadonlyPaths = []string{
		"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
	}
)

// possibleCPUs is how many CPUs the kernel may bring online: the highest
// index in /sys/devices/system/cpu/possible plus one, else
// runtime.NumCPU().
func possibleCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return runtime.NumCPU()
	}
	last := -1
	n := -1
	for _, ch := range string(b) {
		switch {
		case ch >= '0' && ch <= '9':
			if n < 0 {
				n = 0
			}
			n = n*10 + int(ch-'0')
		default:
			last = max(last, n)
			n = -1
		}
	}
	last = max(last, n)
	if last < 0 {
		return runtime.NumCPU()
	}
	return last + 1
}

// kubeletPod is how the kubelet names a pod in its messages (format.Pod).
func kubeletPod(pod *v1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// verifyRunAsNonRoot is the kubelet's rule (verifyRunAsNonRoot): a
// container whose effective runAsNonRoot is true must not run as UID 0,
// whether runAsUser says so or, without runAsUser, its image does; an image
// that names a user by name cannot be checked and is refused, one that
// names no user runs as root. The error is the kubelet's
// CreateContainerConfigError message.
func verifyRunAsNonRoot(pod *v1.Pod, c *v1.Container, runAsNonRoot *bool, runAsUser *int64, image *ImageUser) error {
	if runAsNonRoot == nil || !*runAsNonRoot {
		return nil
	}
	if runAsUser != nil {
		if *runAsUser == 0 {
			return fmt.Errorf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", kubeletPod(pod), c.Name)
		}
		return nil
	}
	switch {
	case image == nil || (image.UID == nil && image.Username == ""):
		return fmt.Errorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", kubeletPod(pod), c.Name)
	case image.UID == nil:
		return fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)", image.Username, kubeletPod(pod), c.Name)
	case *image.UID == 0:
		return fmt.Errorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", kubeletPod(pod), c.Name)
	case *image.UID < 0 || *image.UID > math.MaxInt32:
		return fmt.Errorf("container has runAsNonRoot and image has an invalid user id (%d). (Must be 1-(%d)) (pod: %q, container: %s)", *image.UID, math.MaxInt32, kubeletPod(pod), c.Name)
	}
	return nil
}

// needsImageUser reports whether verifyRunAsNonRoot will look at the
// image's user: runAsNonRoot without runAsUser (container over pod).
func needsImageUser(pod *v1.Pod, c *v1.Container) bool {
	var psc v1.PodSecurityContext
	if pod.Spec.SecurityContext != nil {
		psc = *pod.Spec.SecurityContext
	}
	var csc v1.SecurityContext
	if c.SecurityContext != nil {
		csc = *c.SecurityContext
	}
	nonRoot, user := csc.RunAsNonRoot, csc.RunAsUser
	if nonRoot == nil {
		nonRoot = psc.RunAsNonRoot
	}
	if user == nil {
		user = psc.RunAsUser
	}
	return nonRoot != nil && *nonRoot && user == nil
}
