package hostruntime

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/crivk/crivk/cm"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// hostRuntimeOptions are `crivk runtime`'s flags.
type hostRuntimeOptions struct {
	hostPID             int
	hostRoot            string
	containerd          string
	endpoint            string
	configDir           string
	rootDir             string
	stateDir            string
	runcRoot            string
	cniBinDir           string
	cniBridge           string
	podCIDR             string
	sandboxImage        string
	restrictOOMScoreAdj bool
	cgroupRoot          string
	logFile             string
	interval            time.Duration
}

func parseHostRuntimeFlags(args []string) (*hostRuntimeOptions, error) {
	o := &hostRuntimeOptions{}
	fs := flag.NewFlagSet("crivk runtime", flag.ContinueOnError)
	fs.IntVar(&o.hostPID, "host-pid", 0, "a process in the host's namespaces whose root is the host's (hostPID); 0: the host's init (1) if its /proc entries can be read, else this container's parent (the host runtime's shim)")
	fs.StringVar(&o.containerd, "containerd", "", "the host's containerd binary (default: the first of /usr/local/bin/containerd, /usr/bin/containerd on the host)")
	fs.StringVar(&o.endpoint, "cri-endpoint", "unix:///run/crivk/containerd/containerd.sock", "crivk's CRI endpoint: the socket the containerd listens on (a host path, mounted at the same path in this container)")
	fs.StringVar(&o.configDir, "config-dir", "/etc/crivk-containerd", "host directory of the generated config.toml, net.d/ and the containerd's pid file")
	fs.StringVar(&o.rootDir, "root", "/var/lib/crivk-containerd", "the containerd's root (images, snapshots)")
	fs.StringVar(&o.stateDir, "state", "/run/crivk/containerd/state", "the containerd's state directory (network namespaces live under it)")
	fs.StringVar(&o.runcRoot, "runc-root", "/run/crivk/runc", "runc's state root for the containerd's shims")
	fs.StringVar(&o.cniBinDir, "cni-bin-dir", "/opt/cni/bin", "host directory of the CNI plugins (bridge, host-local, portmap)")
	fs.StringVar(&o.cniBridge, "cni-bridge", "crivk0", "the Linux bridge of crivk's pod network")
	fs.StringVar(&o.podCIDR, "pod-cidr", "10.89.0.0/16", "the pods' subnet (host-local IPAM)")
	fs.StringVar(&o.sandboxImage, "sandbox-image", "registry.k8s.io/pause:3.10.2", "the CRI plugin's sandbox (pause) image")
	fs.BoolVar(&o.restrictOOMScoreAdj, "restrict-oom-score-adj", false, "the CRI plugin's restrict_oom_score_adj (for hosts whose processes lack CAP_SYS_RESOURCE)")
	fs.StringVar(&o.cgroupRoot, "cgroup-root", "/crivk", "crivk's cgroup root: the containerd and its shims live in <cgroup-root>/runtime")
	fs.StringVar(&o.logFile, "log-file", "/var/log/crivk-containerd.log", "host file the containerd writes its log to")
	fs.DurationVar(&o.interval, "check-interval", 5*time.Second, "how often the containerd is checked")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return o, o.validate()
}

func (o *hostRuntimeOptions) validate() error {
	if !strings.HasPrefix(o.endpoint, "unix://") || !filepath.IsAbs(strings.TrimPrefix(o.endpoint, "unix://")) {
		return fmt.Errorf("--cri-endpoint %q: want unix:///absolute/path", o.endpoint)
	}
	if o.hostPID < 0 {
		return fmt.Errorf("--host-pid %d is negative", o.hostPID)
	}
	for name, p := range map[string]string{"--config-dir": o.configDir, "--root": o.rootDir, "--state": o.stateDir,
		"--runc-root": o.runcRoot, "--cni-bin-dir": o.cniBinDir, "--cgroup-root": o.cgroupRoot, "--log-file": o.logFile} {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("%s %q is not an absolute path", name, p)
		}
	}
	if o.containerd != "" && !filepath.IsAbs(o.containerd) {
		return fmt.Errorf("--containerd %q is not an absolute path", o.containerd)
	}
	if _, _, err := net.ParseCIDR(o.podCIDR); err != nil {
		return fmt.Errorf("--pod-cidr: %v", err)
	}
	// IFNAMSIZ: 15 characters and a NUL.
	if o.cniBridge == "" || len(o.cniBridge) > 15 || strings.ContainsAny(o.cniBridge, "/ \t\n:") {
		return fmt.Errorf("--cni-bridge %q is not a network interface name (1-15 characters, no '/', ':' or spaces)", o.cniBridge)
	}
	if o.sandboxImage == "" {
		return errors.New("--sandbox-image is empty")
	}
	if o.interval <= 0 {
		return fmt.Errorf("--check-interval %s is not positive", o.interval)
	}
	return nil
}

func (o *hostRuntimeOptions) socket() string { return strings.TrimPrefix(o.endpoint, "unix://") }

// configPath is where the containerd's config lives, as the host sees it.
func (o *hostRuntimeOptions) configPath() string { return filepath.Join(o.configDir, "config.toml") }

func (o *hostRuntimeOptions) pidFile() string { return filepath.Join(o.configDir, "containerd.pid") }

// resolveHost picks the process whose namespaces and root are the host's:
// --host-pid, or the host's init, or (where pid 1's /proc entries are
// closed even to root, as on container-based machines) this container's
// parent, the shim the host's runtime started, which lives in the host's
// mount, network, UTS and IPC namespaces.
func (o *hostRuntimeOptions) resolveHost() error {
	cands := []int{o.hostPID}
	if o.hostPID == 0 {
		cands = []int{1, os.Getppid()}
	}
	var errs []error
	for _, pid := range cands {
		root := fmt.Sprintf("/proc/%d/root", pid)
		if _, err := os.ReadDir(root); err != nil {
			errs = append(errs, err)
			continue
		}
		f, err := os.Open(fmt.Sprintf("/proc/%d/ns/mnt", pid))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		f.Close()
		o.hostPID, o.hostRoot = pid, root
		return nil
	}
	return fmt.Errorf("no process in the host's namespaces can be read (the pod needs hostPID and privileged): %w", errors.Join(errs...))
}

// onHost is a host path as this process reaches it.
func (o *hostRuntimeOptions) onHost(p string) string { return filepath.Join(o.hostRoot, p) }

// files are the runtime's files of the flags for containerd v: the
// chart's network is "crivk", its IPAM state beside the containerd's state;
// containerd 2's registry hosts are read from certs.d in the config dir
// (empty: the registries' defaults; an operator may add hosts.toml files).
func (o *hostRuntimeOptions) files(v ContainerdVersion) Files {
	return Files{
		WrittenBy: "crivk runtime (charts/crivk)", Containerd: v, Root: o.rootDir, State: o.stateDir, Socket: o.socket(),
		SandboxImage: o.sandboxImage, RestrictOOMScoreAdj: o.restrictOOMScoreAdj, RuncRoot: o.runcRoot,
		CNIBinDir: o.cniBinDir, CNIConfDir: filepath.Join(o.configDir, "net.d"),
		CNIDataDir: filepath.Join(filepath.Dir(o.stateDir), "cni"), Network: "crivk", Bridge: o.cniBridge, PodCIDR: o.podCIDR,
		RegistryConfigPath: filepath.Join(o.configDir, "certs.d"),
	}
}

// writeRuntimeFiles writes the config, the conflist and the registry hosts
// (none: the chart configures no registry) for containerd v on the host.
func (o *hostRuntimeOptions) writeRuntimeFiles(v ContainerdVersion) error {
	f := o.files(v)
	config, err := f.ContainerdConfig()
	if err != nil {
		return err
	}
	conflist, err := f.CNIConflist()
	if err != nil {
		return err
	}
	netd := o.onHost(filepath.Join(o.configDir, "net.d"))
	for _, d := range []string{netd, o.onHost(o.rootDir), o.onHost(o.stateDir), o.onHost(filepath.Dir(o.socket())), o.onHost(filepath.Dir(o.logFile))} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(o.onHost(o.configPath()), config, 0o644); err != nil {
		return err
	}
	if _, err := f.WriteRegistryHosts(o.onHost(f.RegistryConfigPath)); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(netd, "10-crivk.conflist"), conflist, 0o644)
}

// hostCommand is bin (a host path) with args, to run chrooted to the
// host's root in this process's namespaces (the host's network and PID
// namespaces: hostNetwork, hostPID).
func (o *hostRuntimeOptions) hostCommand(bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: o.hostRoot}
	return cmd
}

// containerdVersion is the version of the host's containerd bin, refused
// (ErrUnsupportedContainerd) when crivk writes no config for it.
func (o *hostRuntimeOptions) containerdVersion(bin string) (ContainerdVersion, error) {
	v, err := versionOf(o.hostCommand(bin, "--version"))
	if err != nil {
		return v, fmt.Errorf("reading the version of the host's containerd: %w", err)
	}
	if _, err := v.configVersion(); err != nil {
		return v, fmt.Errorf("the host's %s: %w; set runtime.containerd to another containerd binary", bin, err)
	}
	return v, nil
}

// containerdBinary is the host's containerd, as the host names it.
func (o *hostRuntimeOptions) containerdBinary() (string, error) {
	cands := []string{o.containerd}
	if o.containerd == "" {
		cands = []string{"/usr/local/bin/containerd", "/usr/bin/containerd"}
	}
	for _, c := range cands {
		if st, err := os.Stat(o.onHost(c)); err == nil && st.Mode().IsRegular() {
			return c, nil
		}
	}
	return "", fmt.Errorf("no containerd on the host (looked for %s under %s); install containerd on the machine or set runtime.containerd", strings.Join(cands, ", "), o.hostRoot)
}

// criAnswers dials the socket and asks for the runtime's version.
func criAnswers(ctx context.Context, socket string, timeout time.Duration) (runtimeapi.RuntimeServiceClient, func(), error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	rs := runtimeapi.NewRuntimeServiceClient(conn)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := rs.Version(cctx, &runtimeapi.VersionRequest{}); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return rs, func() { conn.Close() }, nil
}

// hostRuntime is one run of `crivk runtime`.
type hostRuntime struct {
	o   *hostRuntimeOptions
	log *logrus.Entry
	// started is the containerd this process started (nil: adopted).
	started *exec.Cmd
	exited  chan error
}

// Run is `crivk runtime` with its arguments (after "runtime"): it returns
// when containerd fails (an error: the kubelet restarts the container) or
// after ctx ends and the runtime was left or stopped (doc.go).
func Run(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "render" {
		return Render(args[1:], os.Stdout)
	}
	o, err := parseHostRuntimeFlags(args)
	if err != nil {
		return err
	}
	if err := o.resolveHost(); err != nil {
		return err
	}
	h := &hostRuntime{o: o, log: logrus.WithField("endpoint", o.endpoint)}
	h.log.Infof("the host is seen through pid %d (%s)", o.hostPID, o.hostRoot)
	if _, done, err := criAnswers(ctx, o.socket(), 2*time.Second); err == nil {
		done()
		h.log.Info("crivk's runtime already answers: adopting it (started by an earlier pod of this DaemonSet)")
	} else if err := h.start(); err != nil {
		return err
	}
	if err := h.waitReady(ctx, 2*time.Minute); err != nil {
		return err
	}
	err = h.watch(ctx)
	if ctx.Err() == nil {
		return err
	}
	return h.stop(ctx)
}

// start writes the files, joins the runtime cgroup and starts containerd
// in the host's namespaces.
func (h *hostRuntime) start() error {
	o := h.o
	bin, err := o.containerdBinary()
	if err != nil {
		return err
	}
	// Refused before anything is changed on the host.
	v, err := o.containerdVersion(bin)
	if err != nil {
		return err
	}
	if pid, err := h.containerdPID(); err == nil {
		// A containerd of this config runs but does not answer (hung, or
		// its socket removed): a second one would block on its database.
		h.log.Warnf("crivk's containerd (pid %d) runs but does not answer: stopping it before starting another", pid)
		h.kill(pid)
	}
	if err := o.writeRuntimeFiles(v); err != nil {
		return fmt.Errorf("writing crivk's runtime config for containerd %s: %w", v, err)
	}
	cg, err := cm.New(cm.Config{Root: o.cgroupRoot})
	if err != nil {
		return err
	}
	if err := cg.Join("runtime", os.Getpid()); err != nil {
		return err
	}
	logf, err := os.OpenFile(o.onHost(o.logFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	// The host's nsenter, run in the host's root, joins the host process's
	// namespaces (resolveHost) and runs the host's containerd there; no
	// fork: the PID namespace is the host's already (hostPID).
	nsenter := "/usr/bin/nsenter"
	if _, err := os.Stat(o.onHost(nsenter)); err != nil {
		nsenter = "/bin/nsenter"
		if _, err := os.Stat(o.onHost(nsenter)); err != nil {
			return fmt.Errorf("no nsenter on the host (/usr/bin/nsenter, /bin/nsenter under %s): crivk's runtime starts the host's containerd with it (util-linux)", o.hostRoot)
		}
	}
	cmd := exec.Command(nsenter, "--target="+strconv.Itoa(o.hostPID), "--mount", "--uts", "--ipc", "--net", "--",
		bin, "--config", o.configPath())
	cmd.Dir = "/"
	cmd.Env = containerdEnv(os.Environ(), bin)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: o.hostRoot, Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s on the host through nsenter: %w", bin, err)
	}
	h.started, h.exited = cmd, make(chan error, 1)
	go func() { h.exited <- cmd.Wait() }()
	if err := os.WriteFile(o.onHost(o.pidFile()), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		h.log.WithError(err).Warn("writing the containerd's pid file")
	}
	h.log.WithFields(logrus.Fields{"pid": cmd.Process.Pid, "config": o.configPath(), "log": o.logFile,
		"cgroup": o.cgroupRoot + "/runtime"}).Infof("started crivk's runtime: %s (containerd %s)", bin, v)
	return nil
}

func (h *hostRuntime) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		_, done, err := criAnswers(ctx, h.o.socket(), 2*time.Second)
		if err == nil {
			done()
			h.log.Info("crivk's runtime is ready")
			return nil
		}
		select {
		case e := <-h.exited:
			return fmt.Errorf("crivk's containerd exited before it answered (%v); its log: %s on the host", e, h.o.logFile)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("crivk's containerd did not answer at %s within %s (last: %v); its log: %s on the host", h.o.endpoint, timeout, err, h.o.logFile)
		}
	}
}

// watch returns when ctx ends, or with an error when the containerd exits
// or stops answering (three checks in a row).
func (h *hostRuntime) watch(ctx context.Context) error {
	failures := 0
	t := time.NewTicker(h.o.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-h.exited:
			return fmt.Errorf("crivk's containerd exited (%v); its log: %s on the host", e, h.o.logFile)
		case <-t.C:
		}
		if h.started == nil {
			// An adopted containerd is no child to wait for: its pid.
			if _, err := h.containerdPID(); err != nil {
				return fmt.Errorf("crivk's containerd is gone (%v); its log: %s on the host", err, h.o.logFile)
			}
		}
		_, done, err := criAnswers(ctx, h.o.socket(), 5*time.Second)
		if err == nil {
			done()
			failures = 0
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		failures++
		h.log.WithError(err).Warnf("crivk's runtime does not answer (%d of 3)", failures)
		if failures >= 3 {
			return fmt.Errorf("crivk's runtime at %s stopped answering: %w", h.o.endpoint, err)
		}
	}
}

// stop is the SIGTERM path: containerd stays while a sandbox is ready
// (crivk's pods keep running across a restart or upgrade of the pod);
// otherwise the sandboxes left are removed and containerd is stopped.
func (h *hostRuntime) stop(runCtx context.Context) error {
	// A deadline of its own, not the run's cancellation: stop runs after
	// SIGTERM cancelled runCtx, within the pod's termination grace.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(runCtx), 25*time.Second)
	defer cancel()
	rs, done, err := criAnswers(ctx, h.o.socket(), 5*time.Second)
	if err != nil {
		h.log.WithError(err).Warn("stopping: crivk's runtime does not answer; leaving it")
		return nil
	}
	defer done()
	resp, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		h.log.WithError(err).Warn("stopping: listing sandboxes failed; leaving crivk's runtime running")
		return nil
	}
	var ready []string
	for _, s := range resp.Items {
		if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready = append(ready, s.GetMetadata().GetNamespace()+"/"+s.GetMetadata().GetName())
		}
	}
	if len(ready) > 0 {
		h.log.Infof("stopping: %d pods still run (%s): leaving crivk's runtime running for the next crivk to adopt them", len(ready), strings.Join(ready, ", "))
		return nil
	}
	for _, s := range resp.Items {
		if _, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			h.log.WithError(err).Warnf("stopping sandbox %s", s.Id)
		}
		if _, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			h.log.WithError(err).Warnf("removing sandbox %s", s.Id)
		}
	}
	pid, err := h.containerdPID()
	if err != nil {
		h.log.WithError(err).Warn("stopping: crivk's containerd not found; leaving it")
		return nil
	}
	h.log.Infof("stopping: no pod runs on crivk's runtime (%d sandboxes removed): stopping its containerd (pid %d)", len(resp.Items), pid)
	h.kill(pid)
	_ = os.Remove(h.o.onHost(h.o.pidFile()))
	h.removeBridge()
	h.log.Info("crivk's runtime stopped")
	return nil
}

// removeBridge deletes the pod network's bridge, which the CNI bridge
// plugin leaves when the last pod goes, with the host's ip in the host's
// network namespace. A failure is logged: the next start makes it again.
func (h *hostRuntime) removeBridge() {
	o := h.o
	if _, err := os.Stat(filepath.Join("/sys/class/net", o.cniBridge)); err != nil {
		return // none (this container has the host's network)
	}
	var ip string
	for _, c := range []string{"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"} {
		if _, err := os.Stat(o.onHost(c)); err == nil {
			ip = c
			break
		}
	}
	if ip == "" {
		h.log.Warnf("no ip command on the host: the bridge %s stays", o.cniBridge)
		return
	}
	cmd := o.hostCommand(ip, "link", "delete", o.cniBridge)
	if out, err := cmd.CombinedOutput(); err != nil {
		h.log.WithError(err).Warnf("deleting the bridge %s: %s", o.cniBridge, strings.TrimSpace(string(out)))
		return
	}
	h.log.Infof("bridge %s deleted", o.cniBridge)
}

// kill stops the containerd: SIGTERM, then SIGKILL after 10 s.
func (h *hostRuntime) kill(pid int) {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		h.log.WithError(err).Warnf("stopping crivk's containerd (pid %d)", pid)
		return
	}
	for i := 0; i < 100 && processAlive(pid); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if processAlive(pid) {
		h.log.Warnf("crivk's containerd (pid %d) still runs 10 s after SIGTERM: killing it", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		for i := 0; i < 50 && processAlive(pid); i++ {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// containerdPID is the containerd this process started, or the one its pid
// file names if that process runs with this config (an adopted runtime).
func (h *hostRuntime) containerdPID() (int, error) {
	if h.started != nil {
		return h.started.Process.Pid, nil
	}
	b, err := os.ReadFile(h.o.onHost(h.o.pidFile()))
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("pid file %s: %w", h.o.pidFile(), err)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !bytes.Contains(cmdline, []byte(h.o.configPath())) {
		return 0, fmt.Errorf("pid %d of %s is not a containerd with %s", pid, h.o.pidFile(), h.o.configPath())
	}
	return pid, nil
}

func processAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	// A zombie (our own child, not yet waited for) counts as gone.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}

// hostPath is the PATH of the host's containerd after the directory of its
// binary: the host's usual directories, not this image's.
const hostPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// containerdEnv is env with PATH the host containerd bin's directory, then
// hostPath: containerd looks its shim up in PATH (and only then beside
// itself) and the shim looks up runc in PATH, so a containerd installed
// with its shim and runc in a directory of their own (/usr/local/bin, as
// containerd's release tarball, or a build's output) runs with those, never
// with another containerd's shim that PATH names first.
func containerdEnv(env []string, bin string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "PATH=") {
			out = append(out, kv)
		}
	}
	return append(out, "PATH="+filepath.Dir(bin)+":"+hostPath)
}
