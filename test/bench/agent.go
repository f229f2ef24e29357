package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// agentProc is a node agent started through its hack/run-*.sh script (which
// execs it, so the PID is the agent's).
type agentProc struct {
	name string
	cmd  *exec.Cmd
	done chan error
	log  *os.File
}

// agentCommand is the command line of lane name's agent: the same QPS,
// burst and maxPods for both, talking to the API server through the
// counting proxy's kubeconfig. variant (crivk only) comes after
// -crivk-args: where both set a flag, the variant's wins. A variant's
// NAME=VALUE words (an upper-case name: GOGC=50, GOMEMLIMIT=40MiB) are
// crivk's environment, not arguments.
func agentCommand(root, name, kubeconfig string, o options, variant []string) (*exec.Cmd, error) {
	common := []string{
		// A cluster has a DNS service: without one each pod of dnsPolicy
		// ClusterFirst costs both agents a MissingClusterDNS warning event
		// no real node sends. Nothing listens there; the benchmark's pods
		// resolve no names.
		"--cluster-dns=" + benchClusterDNS,
		fmt.Sprintf("--max-pods=%d", o.maxPods),
		fmt.Sprintf("--kube-api-qps=%g", o.qps),
		fmt.Sprintf("--kube-api-burst=%d", o.burst),
	}
	switch name {
	case "kubelet":
		if len(variant) > 0 {
			return nil, fmt.Errorf("crivk arguments %q for the kubelet lane", variant)
		}
		cmd := exec.Command(filepath.Join(root, "hack/run-kubelet.sh"), common...)
		cmd.Env = append(os.Environ(), "KUBELET_KUBECONFIG="+kubeconfig)
		return cmd, nil
	case "crivk", tracedLane:
		args := append([]string{"--kubeconfig=" + kubeconfig}, common...)
		args = append(args, strings.Fields(o.crivkArgs)...)
		flags, env := splitVariant(variant)
		args = append(args, flags...)
		switch {
		case o.profilingAddress != "":
			args = append(args, "--profiling-address="+o.profilingAddress)
		case name == tracedLane:
			// Traces are kept for zpages there.
			args = append(args, "--profiling-address=127.0.0.1:10262")
		}
		if name == tracedLane {
			args = append(args, "--tracing")
		}
		cmd := exec.Command(filepath.Join(root, "hack/run-crivk.sh"), args...)
		// Not the node's bootstrap identity: its own kubeconfig would
		// bypass the counting proxy (the kubelet lane uses the proxy's
		// kubeconfig too).
		cmd.Env = append(append(os.Environ(), "CRIVK_ADMIN_KUBECONFIG=1"), env...)
		return cmd, nil
	}
	return nil, fmt.Errorf("no agent for lane %q", name)
}

// benchClusterDNS is the DNS service IP both agents are given: the
// conventional .10 of the local cluster's service range (hack/lib/local.sh
// SERVICE_CIDR 10.96.0.0/16).
const benchClusterDNS = "10.96.0.10"

// envWord is a variant's environment setting: NAME=VALUE, NAME upper case.
var envWord = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`)

// splitVariant separates a variant's arguments from its environment.
func splitVariant(variant []string) (args, env []string) {
	for _, w := range variant {
		if envWord.MatchString(w) {
			env = append(env, w)
		} else {
			args = append(args, w)
		}
	}
	return args, env
}

func startAgent(cmd *exec.Cmd, name, logPath string) (*agentProc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	a := &agentProc{name: name, cmd: cmd, done: make(chan error, 1), log: f}
	go func() { a.done <- cmd.Wait() }()
	return a, nil
}

func (a *agentProc) pid() int { return a.cmd.Process.Pid }

// stop sends SIGTERM, then SIGKILL after 30 s.
func (a *agentProc) stop() error {
	defer a.log.Close()
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
		return nil
	case <-time.After(30 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.done
		return fmt.Errorf("%s ignored SIGTERM for 30 s, killed", a.name)
	}
}

// waitNodeReady waits for the Node to report Ready, failing early if the
// agent exits.
func waitNodeReady(ctx context.Context, c kubernetes.Interface, a *agentProc, nodeName string, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-a.done:
			a.done <- err
			return false, fmt.Errorf("%s exited before node %s was Ready: %v (log %s)", a.name, nodeName, err, a.log.Name())
		default:
		}
		n, err := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == v1.NodeReady && cond.Status == v1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}
