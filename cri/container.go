package cri

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/crivk/crivk/podutil"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerLogPath is the log file of one attempt, relative to the sandbox's
// log directory: <container>/<attempt>.log.
func ContainerLogPath(name string, attempt uint32) string {
	return filepath.Join(name, strconv.FormatUint(uint64(attempt), 10)+".log")
}

// logFileAttempt matches the log files a node writes for a container:
// <attempt>.log and its rotated copies (<attempt>.log.<timestamp>[.gz]).
var logFileAttempt = regexp.MustCompile(`^(\d+)\.log(\..*)?$`)

// AttemptFromLogDir is the attempt a container must start with when the
// runtime no longer knows any earlier one, read from the log files of the
// earlier attempts in dir (<pod log dir>/<container>): one more than the
// highest <attempt>.log there, or 0 when dir is missing or holds none. It is
// the kubelet's calcRestartCountByLogDir: after a reboot or a purge of the
// runtime's containers, the restart count goes on instead of starting at 0
// and the new attempt does not write into an earlier attempt's 0.log.
// Files that are not a node's log files are ignored.
func AttemptFromLogDir(dir string) (uint32, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	next := uint64(0)
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		m := logFileAttempt.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		n, err := strconv.ParseUint(m[1], 10, 32)
		if err != nil || n == 1<<32-1 {
			continue
		}
		if n+1 > next {
			next = n + 1
		}
	}
	return uint32(next), nil
}

// ConfigError is a container config that cannot be built from the pod spec.
// It is the kubelet's CreateContainerConfigError.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return e.Msg }

// ContainerConfig builds the CRI config of container c of pod. imageRef is
// the image as resolved by ensureImage; opts (may be nil) carries the
// resolved environment and the mounts.
func ContainerConfig(pod *v1.Pod, c *v1.Container, typ ContainerType, attempt uint32, imageRef string, opts *RunContainerOptions) (*runtimeapi.ContainerConfig, error) {
	if opts == nil {
		opts = &RunContainerOptions{}
	}
	var env []*runtimeapi.KeyValue
	vars := map[string]string{}
	if opts.Envs != nil {
		// Resolved by the caller, $(VAR) references included.
		env = opts.Envs
		for _, kv := range env {
			vars[kv.Key] = string(kv.Value)
		}
	} else {
		env = make([]*runtimeapi.KeyValue, 0, len(c.Env))
		for _, e := range c.Env {
			v := expand(e.Value, vars)
			vars[e.Name] = v
			env = append(env, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(v)})
		}
	}
	cmd := make([]string, len(c.Command))
	for i, s := range c.Command {
		cmd[i] = expand(s, vars)
	}
	args := make([]string, len(c.Args))
	for i, s := range c.Args {
		args[i] = expand(s, vars)
	}
	lc, err := linuxContainerConfig(pod, c, opts)
	if err != nil {
		return nil, err
	}
	lc.Resources = containerResources(pod, c, typ, opts.MemoryCapacity)
	configureOOMGroup(lc.Resources, opts.OOMKillGroup)
	configureNoSwap(lc.Resources, opts.Swap)
	restarts := int(attempt)
	a := containerAnnotations(pod, c, restarts)
	for k, v := range opts.Annotations {
		if _, ok := a[k]; !ok {
			a[k] = v
		}
	}
	a[AnnotationContainerHash] = strconv.FormatUint(HashContainer(c), 16)
	a[AnnotationContainerType] = string(typ)
	a[AnnotationMemoryRequest] = memoryRequestAnnotation(c)
	return &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: attempt},
		Image:       &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: c.Image},
		Command:     cmd,
		Args:        args,
		WorkingDir:  c.WorkingDir,
		Envs:        env,
		Mounts:      idmapped(opts.Mounts, lc.SecurityContext.NamespaceOptions.UsernsOptions),
		Devices:     opts.Devices,
		CDIDevices:  opts.CDIDevices,
		Labels:      containerLabels(pod, c.Name, typ, opts.Node),
		Annotations: a,
		LogPath:     ContainerLogPath(c.Name, attempt),
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Linux:       lc,
	}, nil
}

// idmapped is mounts for a container in user namespace un: in the pod's
// own, each mount carries the namespace's mappings, for the runtime to
// mount it idmapped (the kubelet's applyPlatformSpecificContainerConfig),
// so that the pod's root owns what the host's root owns; copies, the
// caller's mounts unchanged. In the node's, mounts as they are.
func idmapped(mounts []*runtimeapi.Mount, un *runtimeapi.UserNamespace) []*runtimeapi.Mount {
	if un.GetMode() != runtimeapi.NamespaceMode_POD || len(mounts) == 0 {
		return mounts
	}
	out := make([]*runtimeapi.Mount, 0, len(mounts))
	for _, m := range mounts {
		mc := proto.Clone(m).(*runtimeapi.Mount)
		mc.UidMappings, mc.GidMappings = un.GetUids(), un.GetGids()
		out = append(out, mc)
	}
	return out
}

// linuxContainerConfig is the container's security context for the runtime
// (ContainerConfig adds the resources). It stays one function, as the
// kubelet's determineEffectiveSecurityContext: each field is the container's
// value over the pod's, one after the other, with the refusals of
// runAsNonRoot, seccomp and AppArmor in their places.
func linuxContainerConfig(pod *v1.Pod, c *v1.Container, opts *RunContainerOptions) (*runtimeapi.LinuxContainerConfig, error) {
	sc := &runtimeapi.LinuxContainerSecurityContext{
		NamespaceOptions: namespaceOptions(pod, opts.UserNamespace),
	}
	psc := pod.Spec.SecurityContext
	if psc == nil {
		psc = &v1.PodSecurityContext{}
	}
	csc := c.SecurityContext
	if csc == nil {
		csc = &v1.SecurityContext{}
	}
	runAsUser := csc.RunAsUser
	if runAsUser == nil {
		runAsUser = psc.RunAsUser
	}
	runAsGroup := csc.RunAsGroup
	if runAsGroup == nil {
		runAsGroup = psc.RunAsGroup
	}
	runAsNonRoot := csc.RunAsNonRoot
	if runAsNonRoot == nil {
		runAsNonRoot = psc.RunAsNonRoot
	}
	if err := verifyRunAsNonRoot(pod, c, runAsNonRoot, runAsUser, opts.ImageUser); err != nil {
		return nil, &ConfigError{Msg: err.Error()}
	}
	if runAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *runAsUser}
	}
	if runAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *runAsGroup}
	}
	sc.SupplementalGroups = append(sc.SupplementalGroups, psc.SupplementalGroups...)
	if psc.FSGroup != nil {
		sc.SupplementalGroups = append(sc.SupplementalGroups, *psc.FSGroup)
	}
	if csc.Privileged != nil {
		sc.Privileged = *csc.Privileged
	}
	if csc.ReadOnlyRootFilesystem != nil {
		sc.ReadonlyRootfs = *csc.ReadOnlyRootFilesystem
	}
	if csc.AllowPrivilegeEscalation != nil {
		sc.NoNewPrivs = !*csc.AllowPrivilegeEscalation
	}
	if caps := csc.Capabilities; caps != nil {
		sc.Capabilities = &runtimeapi.Capability{}
		for _, a := range caps.Add {
			sc.Capabilities.AddCapabilities = append(sc.Capabilities.AddCapabilities, string(a))
		}
		for _, d := range caps.Drop {
			sc.Capabilities.DropCapabilities = append(sc.Capabilities.DropCapabilities, string(d))
		}
	}
	sp := csc.SeccompProfile
	if sp == nil {
		sp = psc.SeccompProfile
	}
	var err error
	if sc.Seccomp, err = seccompProfile(sp, opts.SeccompProfileRoot); err != nil {
		return nil, &ConfigError{Msg: err.Error()}
	}
	if sc.Apparmor, sc.ApparmorProfile, err = appArmorProfile(pod, c); err != nil {
		return nil, &ConfigError{Msg: err.Error()}
	}
	// The container's SELinux options as a whole, else the pod's (the
	// kubelet's DetermineEffectiveSecurityContext: no field-by-field merge).
	selinux := csc.SELinuxOptions
	if selinux == nil {
		selinux = psc.SELinuxOptions
	}
	if o := selinux; o != nil {
		sc.SelinuxOptions = &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
	}
	if !sc.Privileged {
		// The kubelet sets them for privileged containers too and the
		// runtime clears them; crivk leaves them out for those.
		sc.MaskedPaths, sc.ReadonlyPaths = procPaths(csc.ProcMount)
	}
	// ContainerConfig adds the resources (resources.go).
	return &runtimeapi.LinuxContainerConfig{SecurityContext: sc}, nil
}

// expand is Expand over a map of variables.
func expand(in string, vars map[string]string) string {
	return podutil.Expand(in, func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	})
}
