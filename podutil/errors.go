package podutil

import "errors"

// ErrExecTimedOut is wrapped by the error of a command run in a container
// (cri.Runtime.ExecSync) that did not finish within its timeout: the
// kubelet's remote.ErrCommandTimedOut, with its message. It lives here,
// below both, so that the runtime that returns it (cri) and the prober that
// tests for it with errors.Is (an exec probe that times out fails) share it
// without the prober importing cri.
var ErrExecTimedOut = errors.New("command timed out")
