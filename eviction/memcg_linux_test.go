//go:build linux

package eviction

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/crivk/crivk/cm"
	"golang.org/x/sys/unix"
)

// TestEventNotifier: the real eventfd path: each signal of the eventfd
// (written here as the kernel would) is one event; Stop ends Start.
func TestEventNotifier(t *testing.T) {
	n, fd, err := newEventNotifier()
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() { n.Start(context.Background(), events); close(done) }()
	one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	for i := 0; i < 2; i++ {
		if _, err := unix.Write(fd, one); err != nil {
			t.Fatal(err)
		}
		select {
		case <-events:
		case <-time.After(10 * time.Second):
			t.Fatalf("signal %d: no event", i)
		}
	}
	n.Stop()
	n.Stop() // twice is fine
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return after Stop")
	}
}

// TestCgroupV1Arm arms a threshold on the host's root memory cgroup (cgroup
// v1, root only) just above its usage, then allocates past it: the kernel
// signals the eventfd.
func TestCgroupV1Arm(t *testing.T) {
	dir := cm.DetectHost().MemcgDir()
	if dir == "" {
		t.Skip("no cgroup v1 memory cgroup here")
	}
	cg, err := newMemcg(dir)
	if err != nil {
		t.Skipf("no cgroup v1 memory cgroup here: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("cgroup.event_control needs root")
	}
	usage, err := cg.Usage()
	if err != nil {
		t.Fatal(err)
	}
	armed, err := cg.Arm(int64(usage) + 16*mi)
	if err != nil {
		t.Fatal(err)
	}
	defer armed.Stop()
	events := make(chan struct{}, 1)
	go armed.Start(context.Background(), events)
	// Touch 256 MiB: the usage crosses the threshold (the kernel checks
	// thresholds as pages are charged).
	buf := make([]byte, 256*mi)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	select {
	case <-events:
	case <-time.After(10 * time.Second):
		t.Fatalf("no memcg event after allocating 256 MiB past usage %d + 16 MiB", usage)
	}
	_ = buf[len(buf)-1]
}
