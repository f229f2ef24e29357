package cri

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/crivk/crivk/podutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	utilexec "k8s.io/utils/exec"
)

// ExecSync runs cmd in the container and waits for it, at most timeout (the
// runtime kills the command then; no exec session stays open). A command
// that ran returns its exit code and a nil error, whatever the code; an
// error means the command could not be run or wraps
// podutil.ErrExecTimedOut.
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
	if errors.Is(err, podutil.ErrExecTimedOut) || status.Code(err) == codes.DeadlineExceeded ||
		errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "deadline exceeded") {
		return stdout, stderr, -1, fmt.Errorf("%w: %q in container %s after %s", podutil.ErrExecTimedOut, strings.Join(cmd, " "), containerID, timeout)
	}
	return stdout, stderr, -1, fmt.Errorf("exec %q in container %s: %w", strings.Join(cmd, " "), containerID, err)
}
