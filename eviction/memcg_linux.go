//go:build linux

package eviction

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// newMemcg is the cgroup v1 memory cgroup at dir: one with
// cgroup.event_control.
func newMemcg(dir string) (memcg, error) {
	if _, err := os.Stat(filepath.Join(dir, "cgroup.event_control")); err != nil {
		return nil, fmt.Errorf("memory cgroup %s: %w", dir, err)
	}
	return cgroupV1(dir), nil
}

// Arm writes "<eventfd> <fd of memory.usage_in_bytes> <threshold>" to the
// cgroup's cgroup.event_control (the kernel's memory threshold API,
// Documentation/admin-guide/cgroup-v1/memory.rst, "Memory thresholds"):
// the eventfd is then signalled each time the usage crosses the threshold,
// either way. The kernel drops the registration when the eventfd is closed.
func (c cgroupV1) Arm(threshold int64) (cgroupNotifier, error) {
	watch, err := unix.Open(filepath.Join(string(c), memoryUsageAttribute), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", memoryUsageAttribute, err)
	}
	defer unix.Close(watch)
	control, err := unix.Open(filepath.Join(string(c), "cgroup.event_control"), unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening cgroup.event_control: %w", err)
	}
	defer unix.Close(control)
	n, efd, err := newEventNotifier()
	if err != nil {
		return nil, err
	}
	// efd, not n.f.Fd(): Fd would set the descriptor blocking.
	if _, err := unix.Write(control, []byte(fmt.Sprintf("%d %d %d", efd, watch, threshold))); err != nil {
		n.Stop()
		return nil, fmt.Errorf("writing cgroup.event_control: %w", err)
	}
	return n, nil
}

// newEventNotifier makes a non-blocking eventfd, read through Go's poller
// so that Stop (Close) ends a pending Read.
func newEventNotifier() (*eventNotifier, int, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, -1, fmt.Errorf("eventfd: %w", err)
	}
	return &eventNotifier{f: os.NewFile(uintptr(fd), "memcg-eventfd")}, fd, nil
}
