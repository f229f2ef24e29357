package cri

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	utilexec "k8s.io/utils/exec"
)

// ErrExecTimedOut is returned (wrapped) by ExecSync when the command did not
// finish within its timeout: the kubelet's remote.ErrCommandTimedOut, with
// its message.
var ErrExecTimedOut = errors.New("command timed out")

// ExecSync runs cmd in the container and waits for it, at most timeout (the
// runtime kills the command then; no exec session stays open). A command
// that ran returns its exit code and a nil error, whatever the code; an
// error means the command could not be run or wraps ErrExecTimedOut.
func (r *Runtime) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout, stderr []byte, exitCode int32, err error) {
	if timeout <= 0 {
		timeout = time.Second
	}
	// The runtime enforces the timeout (whole seconds); the CRI client
	// gives the call the request timeout on top for the runtime's clean-up,
	// as the kubelet does.
	stdout, stderr, err = r.rs.ExecSync(ctx, containerID, cmd, timeout)
	if err == nil {
		return stdout, stderr, 0, nil
	}
	var exit utilexec.CodeExitError
	if errors.As(err, &exit) {
		return stdout, stderr, int32(exit.Code), nil
	}
	if errors.Is(err, ErrExecTimedOut) || status.Code(err) == codes.DeadlineExceeded ||
		errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "deadline exceeded") {
		return stdout, stderr, -1, fmt.Errorf("%w: %q in container %s after %s", ErrExecTimedOut, strings.Join(cmd, " "), containerID, timeout)
	}
	return stdout, stderr, -1, fmt.Errorf("exec %q in container %s: %w", strings.Join(cmd, " "), containerID, err)
}

// KillContainer stops one running container of pod as the kubelet's
// killContainer does for a failed liveness or startup probe: the Killing
// event with message, the preStop hook within the grace period, then
// StopContainer with the rest (never below the minimum grace). A container
// that is already gone is not an error.
func (r *Runtime) KillContainer(ctx context.Context, pod *v1.Pod, c *v1.Container, containerID string, podIPs []string, grace int64, message string) error {
	if err := r.stopContainer(ctx, pod, c, containerID, true, podIPs, grace, message); err != nil {
		return fmt.Errorf("stopping container %q (%s) of pod %s: %w", c.Name, containerID, RefOf(pod), err)
	}
	return nil
}
