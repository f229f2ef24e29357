package eviction

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	evictionapi "github.com/crivk/crivk/eviction/api"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

// TestMemcgThreshold: the usage the kernel is told to signal at is the
// kubelet's capacity - threshold + inactive_file.
func TestMemcgThreshold(t *testing.T) {
	hard100Mi, _ := evictionapi.ParseThresholds(evictionapi.Flags{Hard: "memory.available<100Mi"})
	hard10pct, _ := evictionapi.ParseThresholds(evictionapi.Flags{Hard: "memory.available<10%"})
	tests := map[string]struct {
		t                            evictionapi.Threshold
		available, workingSet, usage uint64
		want                         int64
	}{
		"quantity, no inactive file":                    {hard100Mi[0], 3072 * mi, 1024 * mi, 1024 * mi, 4096*mi - 100*mi},
		"quantity, 512Mi inactive file":                 {hard100Mi[0], 3072 * mi, 1024 * mi, 1536 * mi, 4096*mi - 100*mi + 512*mi},
		"percentage of capacity":                        {hard10pct[0], 3000 * mi, 1000 * mi, 1200 * mi, 4000*mi - 400*mi + 200*mi},
		"usage below the working set: no inactive file": {hard100Mi[0], 3072 * mi, 1024 * mi, 1000 * mi, 4096*mi - 100*mi},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := memcgThreshold(tc.t, tc.available, tc.workingSet, tc.usage); got != tc.want {
				t.Errorf("memcgThreshold = %d, want %d", got, tc.want)
			}
		})
	}
}

// fakeMemcg records the thresholds armed; its notifiers send on the
// events channel when fire is called.
type fakeMemcg struct {
	mu       sync.Mutex
	usage    uint64
	armErr   error
	armed    []int64
	notifier []*fakeCgroupNotifier
	armedCh  chan int64
}

func (f *fakeMemcg) Usage() (uint64, error) { return f.usage, nil }

func (f *fakeMemcg) Arm(th int64) (cgroupNotifier, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.armErr != nil {
		return nil, f.armErr
	}
	n := &fakeCgroupNotifier{started: make(chan chan<- struct{}, 1)}
	f.armed = append(f.armed, th)
	f.notifier = append(f.notifier, n)
	if f.armedCh != nil {
		f.armedCh <- th
	}
	return n, nil
}

type fakeCgroupNotifier struct {
	started chan chan<- struct{}
	mu      sync.Mutex
	stopped bool
}

func (n *fakeCgroupNotifier) Start(_ context.Context, events chan<- struct{}) { n.started <- events }
func (n *fakeCgroupNotifier) Stop() {
	n.mu.Lock()
	n.stopped = true
	n.mu.Unlock()
}
func (n *fakeCgroupNotifier) isStopped() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stopped
}

func memSummary(avail, ws uint64, usage *uint64) *statsapi.Summary {
	return &statsapi.Summary{Node: statsapi.NodeStats{Memory: &statsapi.MemoryStats{AvailableBytes: &avail, WorkingSetBytes: &ws, UsageBytes: usage}}}
}

// TestMemoryNotifierUpdateThreshold: each update arms the threshold of the
// latest stats and stops the one armed before; the usage comes from the
// summary, else from the cgroup; incomplete stats arm nothing.
func TestMemoryNotifierUpdateThreshold(t *testing.T) {
	th, _ := evictionapi.ParseThresholds(evictionapi.Flags{Hard: "memory.available<100Mi"})
	cg := &fakeMemcg{usage: 1536 * mi}
	events := make(chan struct{}, 1)
	n := &memoryNotifier{threshold: th[0], cgroup: cg, events: events}
	ctx := context.Background()
	if n.Description() != "hard memory eviction threshold" {
		t.Errorf("description %q", n.Description())
	}
	if err := n.UpdateThreshold(ctx, memSummary(3072*mi, 1024*mi, nil)); err != nil {
		t.Fatal(err)
	}
	if err := n.UpdateThreshold(ctx, memSummary(3072*mi, 1024*mi, ptr.To[uint64](1024*mi))); err != nil {
		t.Fatal(err)
	}
	want := []int64{4096*mi - 100*mi + 512*mi, 4096*mi - 100*mi}
	if len(cg.armed) != 2 || cg.armed[0] != want[0] || cg.armed[1] != want[1] {
		t.Fatalf("armed %v, want %v (usage from the cgroup, then from the summary)", cg.armed, want)
	}
	if !cg.notifier[0].isStopped() || cg.notifier[1].isStopped() {
		t.Error("want the first notifier stopped when re-armed, the second running")
	}
	// The armed notifier was started on the manager's channel.
	if got := <-cg.notifier[1].started; got != (chan<- struct{})(events) {
		t.Error("notifier started on another channel")
	}
	if err := n.UpdateThreshold(ctx, &statsapi.Summary{}); err == nil || !strings.Contains(err.Error(), "summary was incomplete") {
		t.Errorf("incomplete summary: %v", err)
	}
	cg.armErr = errors.New("permission denied")
	if err := n.UpdateThreshold(ctx, memSummary(3072*mi, 1024*mi, nil)); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("arm error: %v", err)
	}
	n.Stop()
}

// testMemcg is the root memory cgroup the tests' managers are given (a
// v1 host's, cm.Host.MemcgDir); never opened: memcgOf is a fake.
const testMemcg = "/sys/fs/cgroup/memory"

// TestNotifiersEnabled: notifiers only with --kernel-memcg-notification,
// one per memory.available threshold; none on cgroup v2 (no root memory
// cgroup given: the cgroup is never opened) nor when the cgroup cannot be
// used, and the manager runs as without.
func TestNotifiersEnabled(t *testing.T) {
	th, _ := evictionapi.ParseThresholds(evictionapi.Flags{Hard: "memory.available<100Mi,nodefs.available<10%", Soft: "memory.available<200Mi", SoftGracePeriod: "memory.available=1m"})
	tests := map[string]struct {
		enabled bool
		v2      bool
		memcg   error
		want    []string
	}{
		"disabled (the default)": {},
		"enabled":                {enabled: true, want: []string{"hard memory eviction threshold", "soft memory eviction threshold"}},
		"enabled on cgroup v2":   {enabled: true, v2: true},
		"unusable cgroup":        {enabled: true, memcg: errors.New("no cgroup.event_control")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := Config{Thresholds: th, KernelMemcgNotification: tc.enabled, MemoryCgroup: testMemcg}
			if tc.v2 {
				cfg.MemoryCgroup = ""
			}
			m := newTestManager(t, newFakeNode(), cfg)
			calls := 0
			m.memcgOf = func(dir string) (memcg, error) {
				calls++
				if dir != testMemcg {
					t.Errorf("memory cgroup %q", dir)
				}
				return &fakeMemcg{}, tc.memcg
			}
			m.startNotifiers(context.Background())
			var got []string
			for _, n := range m.notifiers {
				got = append(got, n.Description())
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("notifiers %v, want %v", got, tc.want)
			}
			if (!tc.enabled || tc.v2) && calls != 0 {
				t.Error("a memory cgroup was opened with the notification disabled or on cgroup v2")
			}
		})
	}
}

// TestNotifierRefresh: the notifiers are re-armed at the first round, then
// not again until notifierRefreshInterval has passed.
func TestNotifierRefresh(t *testing.T) {
	n := newFakeNode()
	th, _ := evictionapi.ParseThresholds(evictionapi.Flags{Hard: "memory.available<100Mi"})
	m := newTestManager(t, n, Config{Thresholds: th, KernelMemcgNotification: true, MemoryCgroup: testMemcg})
	cg := &fakeMemcg{}
	m.memcgOf = func(string) (memcg, error) { return cg, nil }
	ctx := context.Background()
	m.startNotifiers(ctx)
	defer m.stopNotifiers()
	pods := &fakePods{}
	for _, step := range []struct {
		d    time.Duration
		want int
	}{{0, 1}, {5 * time.Second, 1}, {5 * time.Second, 1}, {time.Second, 2}, {10 * time.Second, 2}, {time.Second, 3}} {
		n.clock.Step(step.d)
		if _, err := m.synchronize(ctx, pods); err != nil {
			t.Fatal(err)
		}
		if len(cg.armed) != step.want {
			t.Errorf("after %v more: armed %d times, want %d", step.d, len(cg.armed), step.want)
		}
	}
}

// TestMemcgEventRunsRound: with the notification on, a signal from the
// kernel runs a round at once: MemoryPressure is reported without the
// monitoring period passing (the fake clock never moves).
func TestMemcgEventRunsRound(t *testing.T) {
	n := newFakeNode()
	th, _ := evictionapi.ParseThresholds(evictionapi.Flags{Hard: "memory.available<100Mi"})
	m := newTestManager(t, n, Config{Thresholds: th, KernelMemcgNotification: true, MemoryCgroup: testMemcg, PressureTransitionPeriod: time.Minute})
	cg := &fakeMemcg{armedCh: make(chan int64, 4)}
	m.memcgOf = func(string) (memcg, error) { return cg, nil }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx, &fakePods{active: []*v1.Pod{pod("hog", 0, "64Mi", "")}}); close(done) }()
	defer func() { cancel(); <-done }()

	<-cg.armedCh // the first round armed the threshold
	cg.mu.Lock()
	armed := cg.notifier[0]
	cg.mu.Unlock()
	events := <-armed.started
	if m.IsUnderMemoryPressure() {
		t.Fatal("pressure before the threshold was crossed")
	}
	n.set(func(n *fakeNode) { n.memAvail = 50 * mi })
	events <- struct{}{}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return m.IsUnderMemoryPressure(), nil
	})
	if err != nil {
		t.Fatalf("no MemoryPressure after the memcg event with the clock stopped: %v", err)
	}
}
