package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// fleet is one agent's N nodes: the processes it starts and stops.
type fleet interface {
	// Start starts the nodes' processes (it does not wait for Ready).
	Start(ctx context.Context) error
	// PIDs returns the agent's processes and the fake runtime's
	// (crivk: fakecri apart; the hollow nodes hold theirs in-process).
	PIDs() (agent, fake []int)
	// Stop stops every process it started: SIGTERM, then SIGKILL after
	// grace.
	Stop(grace time.Duration)
}

// env is what both fleets need of the local cluster.
type env struct {
	bin                 string // _output/bin
	bootstrapKubeconfig string
	caCert              string
	servingCert         string
	servingKey          string
	nodeIP              string
	qps                 int
	burst               int
}

// proc is a started process with its log file.
type proc struct {
	cmd *exec.Cmd
	log *os.File
}

func startProc(dir, logName string, extraEnv []string, name string, args ...string) (*proc, error) {
	f, err := os.Create(filepath.Join(dir, logName))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), extraEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	return &proc{cmd: cmd, log: f}, nil
}

// stopProcs sends SIGTERM to every process, waits up to grace for them
// all, then SIGKILLs the rest (their process groups: a process' own
// children go with it).
func stopProcs(ps []*proc, grace time.Duration) {
	done := make(chan struct{}, len(ps))
	for _, p := range ps {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		go func() { _ = p.cmd.Wait(); done <- struct{}{} }()
	}
	deadline := time.After(grace)
	for n := 0; n < len(ps); n++ {
		select {
		case <-done:
		case <-deadline:
			for _, p := range ps {
				if p.cmd.ProcessState == nil {
					_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
				}
			}
			for ; n < len(ps); n++ {
				<-done
			}
		}
	}
	for _, p := range ps {
		p.log.Close()
	}
}

func pids(ps []*proc) []int {
	out := make([]int, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.cmd.Process.Pid)
	}
	return out
}

// crivkFleet is one crivk process serving N nodes (--node-count) over one
// fakecri.
type crivkFleet struct {
	env   env
	dir   string
	n     int
	stem  string
	label string
	extra []string
	fake  *proc
	agent *proc
}

func (f *crivkFleet) Start(ctx context.Context) error {
	sock := "/run/crivk/bench-fleet-cri.sock"
	_ = os.Remove(sock)
	var err error
	if f.fake, err = startProc(f.dir, "fakecri.log", nil, filepath.Join(f.env.bin, "fakecri"),
		"-listen", "unix://"+sock, "-fs-dir", filepath.Join(f.dir, "fs")); err != nil {
		return err
	}
	if err := waitFile(ctx, sock, 30*time.Second); err != nil {
		return fmt.Errorf("fakecri: %w (log %s)", err, filepath.Join(f.dir, "fakecri.log"))
	}
	args := []string{
		"--node-count=" + strconv.Itoa(f.n),
		"--node-name=" + f.stem,
		"--node-labels=" + f.label,
		"--node-ip=" + f.env.nodeIP,
		"--cri-endpoint=unix://" + sock,
		"--bootstrap-kubeconfig=" + f.env.bootstrapKubeconfig,
		"--kubeconfig=" + filepath.Join(f.dir, "kubeconfig"),
		"--root-dir=" + filepath.Join(f.dir, "root"),
		"--pod-log-dir=" + filepath.Join(f.dir, "pods"),
		"--tls-cert-file=" + f.env.servingCert,
		"--tls-private-key-file=" + f.env.servingKey,
		"--client-ca-file=" + f.env.caCert,
		"--port=20250",
		"--healthz-port=0",
		"--pod-manifest-path=",
		// As the hollow kubelet (kubemark sets CgroupsPerQOS false): no
		// pod cgroups, the fake runs nothing in them.
		"--cgroups-per-qos=false",
		// This machine's cgroups are v1, which crivk refuses by default,
		// as the kubelet (hack/run-crivk.sh says why).
		"--fail-cgroupv1=false",
		// The task events are containerd's API, which the fake lacks.
		"--runtime-events=false",
		"--image-gc-high-threshold=100", "--image-gc-low-threshold=99",
		"--eviction-hard=memory.available<100Mi,nodefs.available<2Gi,nodefs.inodesFree<5%,imagefs.available<2Gi",
		"--kube-api-qps=" + strconv.Itoa(f.env.qps),
		"--kube-api-burst=" + strconv.Itoa(f.env.burst),
	}
	args = append(args, f.extra...)
	f.agent, err = startProc(f.dir, "crivk.log", nil, filepath.Join(f.env.bin, "crivk"), args...)
	return err
}

func (f *crivkFleet) PIDs() (agent, fake []int) {
	if f.agent != nil {
		agent = []int{f.agent.cmd.Process.Pid}
	}
	if f.fake != nil {
		fake = []int{f.fake.cmd.Process.Pid}
	}
	return agent, fake
}

func (f *crivkFleet) Stop(grace time.Duration) {
	if f.agent != nil {
		stopProcs([]*proc{f.agent}, grace)
	}
	if f.fake != nil {
		stopProcs([]*proc{f.fake}, grace)
	}
}

// hollowFleet is N kubemark --morph=kubelet processes, one per node, each
// with its own in-process fake runtime (as kubemark runs them).
type hollowFleet struct {
	env   env
	dir   string
	n     int
	stem  string
	label string
	procs []*proc
}

func (f *hollowFleet) Start(ctx context.Context) error {
	for i := 0; i < f.n; i++ {
		name := fmt.Sprintf("%s-%d", f.stem, i)
		d := filepath.Join(f.dir, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		// The hollow kubelet makes its root dir with os.MkdirTemp: TMPDIR
		// keeps it under the bench's directory.
		p, err := startProc(f.dir, name+".log", []string{"TMPDIR=" + d}, filepath.Join(f.env.bin, "kubemark"),
			"--morph=kubelet",
			"--name="+name,
			"--node-labels="+f.label,
			"--bootstrap-kubeconfig="+f.env.bootstrapKubeconfig,
			"--kubeconfig="+filepath.Join(d, "kubeconfig"),
			"--cert-dir="+filepath.Join(d, "pki"),
			"--kubelet-port="+strconv.Itoa(30250+i),
			"--kubelet-read-only-port=0",
			"--use-host-image-service=false",
			"--kube-api-qps="+strconv.Itoa(f.env.qps),
			"--kube-api-burst="+strconv.Itoa(f.env.burst),
		)
		if err != nil {
			return err
		}
		f.procs = append(f.procs, p)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

func (f *hollowFleet) PIDs() (agent, fake []int) { return pids(f.procs), nil }

func (f *hollowFleet) Stop(grace time.Duration) { stopProcs(f.procs, grace) }

// waitFile waits until path exists.
func waitFile(ctx context.Context, path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear within %s", path, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
