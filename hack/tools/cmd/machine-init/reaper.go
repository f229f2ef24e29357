package main

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// reaper is the loop of PID 1 of a PID namespace. Its system calls are
// fields so that the tests can drive it: wait4 is syscall.Wait4, and kill
// is syscall.Kill, which it calls only as kill(-1, SIGTERM): from PID 1 of
// a PID namespace that signals every other process of the namespace, from
// anywhere else every process the caller may signal (main runs this only
// as PID 1).
type reaper struct {
	wait4 func(pid int, status *syscall.WaitStatus, options int, rusage *syscall.Rusage) (int, error)
	kill  func(pid int, sig syscall.Signal) error
	logf  func(format string, args ...any)
}

// reapAll collects every child that has exited, without blocking, and
// reports how many it collected and whether no child is left at all
// (wait4's ECHILD).
func (r reaper) reapAll() (n int, none bool) {
	for {
		var ws syscall.WaitStatus
		pid, err := r.wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.ECHILD):
			return n, true
		case err != nil:
			r.logf("wait4: %v", err)
			return n, false
		case pid <= 0: // children left, none has exited
			return n, false
		}
		n++
		r.logf("reaped pid %d (%s)", pid, describe(ws))
	}
}

// describe is an exit status as a shell would say it.
func describe(ws syscall.WaitStatus) string {
	switch {
	case ws.Exited():
		return fmt.Sprintf("exit %d", ws.ExitStatus())
	case ws.Signaled():
		return "killed by " + unix.SignalName(ws.Signal())
	default:
		return fmt.Sprintf("status %#x", uint32(ws))
	}
}

// run reaps on each SIGCHLD until SIGTERM or SIGINT, then shuts down.
// after is time.After (the tests pass their own).
func (r reaper) run(sigs <-chan os.Signal, grace time.Duration, after func(time.Duration) <-chan time.Time) {
	for sig := range sigs {
		if sig == syscall.SIGTERM || sig == syscall.SIGINT {
			r.logf("%s: stopping the machine", name(sig))
			r.shutdown(sigs, grace, after)
			return
		}
		r.reapAll()
	}
}

// shutdown sends SIGTERM to every other process of the namespace and
// reaps them as they exit, until none is left, grace has passed, or a
// second SIGTERM or SIGINT comes. Its caller then exits, and the kernel
// SIGKILLs whatever is left.
func (r reaper) shutdown(sigs <-chan os.Signal, grace time.Duration, after func(time.Duration) <-chan time.Time) {
	// ESRCH: no other process to signal.
	if err := r.kill(-1, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		r.logf("kill(-1, SIGTERM): %v", err)
	}
	deadline := after(grace)
	for {
		if _, none := r.reapAll(); none {
			r.logf("every process of the machine has exited")
			return
		}
		select {
		case sig := <-sigs:
			if sig == syscall.SIGTERM || sig == syscall.SIGINT {
				r.logf("%s again: not waiting any longer", name(sig))
				return
			}
		case <-deadline:
			r.logf("processes still running after %s", grace)
			return
		}
	}
}

// name is a signal's name, such as SIGTERM.
func name(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		return unix.SignalName(s)
	}
	return sig.String()
}
