package eviction

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	evictionapi "github.com/crivk/crivk/eviction/api"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The memcg threshold notification (--kernel-memcg-notification, the
// kubelet's memory_threshold_notifier.go and threshold_notifier_linux.go):
// the kernel signals an eventfd when the root memory cgroup's (for an
// allocatableMemory.available threshold: kubepods')
// memory.usage_in_bytes crosses capacity - threshold + inactive_file (the
// usage at which the working set reaches capacity - threshold), and the
// manager runs a round at once instead of at the next monitoring period.
// The threshold moves with inactive_file, so each round (at most every
// notifierRefreshInterval) arms a new one. cgroup v1 only: cgroup v2 has no
// cgroup.event_control; there, as the kubelet, no notifier runs.

const (
	// notifierRefreshInterval: the notifiers are re-armed at most this often.
	notifierRefreshInterval = 10 * time.Second
	// memoryUsageAttribute is the file whose value the threshold is on.
	memoryUsageAttribute = "memory.usage_in_bytes"
)

// cgroupNotifier is one armed threshold: Start sends on events each time
// the kernel signals it, until Stop (the kubelet's CgroupNotifier).
type cgroupNotifier interface {
	Start(ctx context.Context, events chan<- struct{})
	Stop()
}

// memcg is the memory cgroup as the notifier needs it: the part that needs
// the kernel (and root), apart so that the arithmetic and the re-arming are
// tested without it. cgroupV1 is the real one.
type memcg interface {
	// Usage is the cgroup's memory.usage_in_bytes.
	Usage() (uint64, error)
	// Arm registers threshold (bytes) on memory.usage_in_bytes.
	Arm(threshold int64) (cgroupNotifier, error)
}

// memcgThreshold is the usage at which the kernel must signal: the kubelet's
// capacity - eviction threshold + inactive_file, where capacity = available
// + working set and inactive_file = usage - working set.
func memcgThreshold(t evictionapi.Threshold, available, workingSet, usage uint64) int64 {
	capacity := resource.NewQuantity(int64(available+workingSet), resource.BinarySI)
	var inactive int64
	if usage > workingSet {
		inactive = int64(usage - workingSet)
	}
	return capacity.Value() - t.Value.Of(capacity).Value() + inactive
}

// memoryNotifier re-arms one memory.available threshold's cgroup notifier
// from the latest stats (the kubelet's linuxMemoryThresholdNotifier). It is
// used only by the manager's Run goroutine.
type memoryNotifier struct {
	threshold evictionapi.Threshold
	cgroup    memcg
	// events receives the armed notifier's signals; the manager reads it.
	events   chan<- struct{}
	notifier cgroupNotifier
	// armedAt is the last threshold armed (bytes of usage).
	armedAt int64
}

// Description is the kubelet's: "hard memory eviction threshold", "soft
// allocatable memory eviction threshold".
func (n *memoryNotifier) Description() string {
	kind := "hard "
	if !n.threshold.Hard() {
		kind = "soft "
	}
	if n.threshold.Signal == evictionapi.SignalAllocatableMemoryAvailable {
		kind += "allocatable "
	}
	return kind + "memory eviction threshold"
}

// UpdateThreshold arms the threshold anew from summary's node memory, or,
// for allocatableMemory.available, from its "pods" system container's.
func (n *memoryNotifier) UpdateThreshold(ctx context.Context, summary *statsapi.Summary) error {
	m, of := summary.Node.Memory, "node"
	if n.threshold.Signal == evictionapi.SignalAllocatableMemoryAvailable {
		m, of = podsMemory(summary), "pods system container"
	}
	if m == nil || m.WorkingSetBytes == nil || m.AvailableBytes == nil {
		return fmt.Errorf("summary was incomplete: %s memory stats without working set or available bytes: %+v", of, m)
	}
	usage := m.UsageBytes
	if usage == nil {
		// The summary's node memory has no usage: read it now.
		u, err := n.cgroup.Usage()
		if err != nil {
			return fmt.Errorf("reading the memory cgroup's usage: %w", err)
		}
		usage = &u
	}
	th := memcgThreshold(n.threshold, *m.AvailableBytes, *m.WorkingSetBytes, *usage)
	if n.notifier != nil {
		n.notifier.Stop()
		n.notifier = nil
	}
	c, err := n.cgroup.Arm(th)
	if err != nil {
		return fmt.Errorf("arming %s at usage %d: %w", n.Description(), th, err)
	}
	n.notifier, n.armedAt = c, th
	log.G(ctx).WithField("notifier", n.Description()).WithField("usageThreshold", th).Debug("eviction manager: setting notifier")
	go c.Start(ctx, n.events)
	return nil
}

// Stop stops the armed notifier, if any.
func (n *memoryNotifier) Stop() {
	if n.notifier != nil {
		n.notifier.Stop()
		n.notifier = nil
	}
}

// cgroupV1 is a cgroup v1 memory cgroup directory (Config.MemoryCgroup or
// Config.PodsMemoryCgroup).
type cgroupV1 string

var _ memcg = cgroupV1("")

// errCgroupV2 is why no notifier runs on a cgroup v2 host (no
// Config.MemoryCgroup).
var errCgroupV2 = errors.New("memcg threshold notification is not supported on cgroup v2")

func (c cgroupV1) Usage() (uint64, error) {
	b, err := os.ReadFile(filepath.Join(string(c), memoryUsageAttribute))
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// eventNotifier signals events each time its eventfd is readable.
type eventNotifier struct {
	f    *os.File
	once sync.Once
}

func (n *eventNotifier) Start(ctx context.Context, events chan<- struct{}) {
	buf := make([]byte, 8)
	for {
		if _, err := n.f.Read(buf); err != nil {
			if !errors.Is(err, os.ErrClosed) {
				log.G(ctx).WithError(err).Info("eviction manager: error reading memcg events")
			}
			return
		}
		select {
		case events <- struct{}{}:
		default: // a round is already due
		}
	}
}

func (n *eventNotifier) Stop() { n.once.Do(func() { n.f.Close() }) }
