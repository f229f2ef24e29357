package eviction

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	evictionapi "github.com/crivk/crivk/eviction/api"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

// withPods adds a "pods" system container of the given memory to s.
func withPods(s *statsapi.Summary, mem *statsapi.MemoryStats) *statsapi.Summary {
	s.Node.SystemContainers = append(s.Node.SystemContainers, statsapi.ContainerStats{Name: statsapi.SystemContainerPods, Memory: mem})
	return s
}

// TestObserveAllocatableMemory: allocatableMemory.available is the "pods"
// system container's available bytes, of available + working set (the
// kubelet's makeSignalObservations); none without that container or its
// figures.
func TestObserveAllocatableMemory(t *testing.T) {
	at := metav1.NewTime(time.Unix(1700000000, 0))
	tests := map[string]struct {
		s                   *statsapi.Summary
		wantAvail, wantCapa int64 // 0: no observation
	}{
		"pods container": {s: withPods(&statsapi.Summary{}, &statsapi.MemoryStats{Time: at, AvailableBytes: ptr.To[uint64](6 << 30), WorkingSetBytes: ptr.To[uint64](2 << 30)}),
			wantAvail: 6 << 30, wantCapa: 8 << 30},
		"no limit: no available bytes": {s: withPods(&statsapi.Summary{}, &statsapi.MemoryStats{Time: at, WorkingSetBytes: ptr.To[uint64](2 << 30)})},
		"no memory":                    {s: withPods(&statsapi.Summary{}, nil)},
		"no pods container":            {s: &statsapi.Summary{}},
		"another system container only": {s: &statsapi.Summary{Node: statsapi.NodeStats{SystemContainers: []statsapi.ContainerStats{{Name: statsapi.SystemContainerKubelet,
			Memory: &statsapi.MemoryStats{AvailableBytes: ptr.To[uint64](1), WorkingSetBytes: ptr.To[uint64](1)}}}}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o, ok := observe(tc.s, 0)[evictionapi.SignalAllocatableMemoryAvailable]
			if tc.wantAvail == 0 {
				if ok {
					t.Fatalf("observed %v of %v, want none", o.available, o.capacity)
				}
				return
			}
			if !ok || o.available.Value() != tc.wantAvail || o.capacity.Value() != tc.wantCapa || !o.at.Equal(at.Time) {
				t.Errorf("observed %v of %v at %v, want %d of %d at %v", o.available, o.capacity, o.at, tc.wantAvail, tc.wantCapa, at)
			}
			if _, ok := observe(tc.s, 0)[evictionapi.SignalMemoryAvailable]; ok {
				t.Error("memory.available observed from the pods container")
			}
		})
	}
}

// TestAddAllocatableThresholds: with the node-allocatable cgroup enforced,
// each hard memory.available threshold gets an allocatableMemory.available
// twin (the kubelet's addAllocatableThresholds); soft ones do not; a hard
// allocatableMemory.available threshold given keeps its own value.
func TestAddAllocatableThresholds(t *testing.T) {
	tests := map[string]struct {
		flags   evictionapi.Flags
		enforce bool
		want    []string
	}{
		"hard memory twinned": {flags: evictionapi.Flags{Hard: "memory.available<100Mi,nodefs.available<10%"}, enforce: true,
			want: []string{"memory.available<100Mi", "nodefs.available<10%", "allocatableMemory.available<100Mi"}},
		"not enforced": {flags: evictionapi.Flags{Hard: "memory.available<100Mi"}, want: []string{"memory.available<100Mi"}},
		"percentage": {flags: evictionapi.Flags{Hard: "memory.available<5%"}, enforce: true,
			want: []string{"memory.available<5%", "allocatableMemory.available<5%"}},
		"soft is not twinned": {flags: evictionapi.Flags{Soft: "memory.available<200Mi", SoftGracePeriod: "memory.available=1m"}, enforce: true,
			want: []string{"memory.available<200Mi (soft, grace 1m0s)"}},
		"hard allocatable given": {flags: evictionapi.Flags{Hard: "memory.available<100Mi,allocatableMemory.available<300Mi"}, enforce: true,
			want: []string{"memory.available<100Mi", "allocatableMemory.available<300Mi"}},
		"no memory threshold": {flags: evictionapi.Flags{Hard: "pid.available<1000"}, enforce: true, want: []string{"pid.available<1k"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			th, err := evictionapi.ParseThresholds(tc.flags)
			if err != nil {
				t.Fatal(err)
			}
			given := fmt.Sprint(th)
			m, err := New(Config{Summary: fixedSummary(nil), Thresholds: th, EnforceNodeAllocatable: tc.enforce})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, x := range m.cfg.Thresholds {
				got = append(got, x.String())
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("thresholds %v, want %v", got, tc.want)
			}
			if fmt.Sprint(th) != given {
				t.Errorf("the caller's thresholds changed: %v, were %v", th, given)
			}
		})
	}
}

// TestAllocatableMemoryPressure: the pods' cgroup near its limit while the
// node has memory to spare makes MemoryPressure and evicts the pod using
// most above its request, with the allocatable figures in the message.
func TestAllocatableMemoryPressure(t *testing.T) {
	n := newFakeNode()
	hog, small := pod("hog", 0, "64Mi", ""), pod("small", 0, "256Mi", "256Mi")
	n.pods = []statsapi.PodStats{podStats(hog, 900*mi), podStats(small, 100*mi)}
	podsAvail := uint64(500 * mi)
	summary := func(ctx context.Context) (*statsapi.Summary, error) {
		s, err := n.summary(ctx)
		n.mu.Lock()
		defer n.mu.Unlock()
		at := metav1.NewTime(n.clock.Now())
		return withPods(s, &statsapi.MemoryStats{Time: at, AvailableBytes: ptr.To(podsAvail), WorkingSetBytes: ptr.To[uint64](1000 * mi)}), err
	}
	th, _ := evictionapi.ParseThresholds(evictionapi.Flags{Hard: "memory.available<100Mi"})
	m, err := New(Config{Thresholds: th, EnforceNodeAllocatable: true, Summary: summary, Clock: n.clock, PressureTransitionPeriod: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pods := &fakePods{active: []*v1.Pod{small, hog}}
	ctx := context.Background()
	if p, err := m.synchronize(ctx, pods); p != nil || err != nil || m.IsUnderMemoryPressure() {
		t.Fatalf("no pressure: evicted %v, %v, pressure %v", p, err, m.IsUnderMemoryPressure())
	}
	n.set(func(*fakeNode) { podsAvail = 40 * mi })
	n.clock.Step(10 * time.Second)
	p, err := m.synchronize(ctx, pods)
	if err != nil || p == nil || p.Name != "hog" {
		t.Fatalf("evicted %v, %v, want the hog", p, err)
	}
	if !m.IsUnderMemoryPressure() {
		t.Error("no MemoryPressure with allocatableMemory.available met")
	}
	want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 40Mi. Container c was using 900Mi, request is 64Mi, has larger consumption of memory. "
	if ev := pods.evicted[0].ev; ev.Message != want || ev.GracePeriod != 1 || !ev.DisruptionTarget {
		t.Errorf("eviction %+v, want %q, grace 1, DisruptionTarget", ev, want)
	}
}

// TestAllocatableNotifier: with the notification on, an
// allocatableMemory.available threshold gets a notifier on kubepods'
// memory cgroup ("hard allocatable memory eviction threshold"), armed from
// the pods system container's figures; none without that cgroup.
func TestAllocatableNotifier(t *testing.T) {
	th, _ := evictionapi.ParseThresholds(evictionapi.Flags{Hard: "memory.available<100Mi"})
	tests := map[string]struct {
		podsCgroup string
		wantDirs   []string
		wantDescs  []string
		wantArmed  []int64 // after one update: root's, then kubepods'
	}{
		"kubepods cgroup": {podsCgroup: "/sys/fs/cgroup/memory/crivk/kubepods",
			wantDirs:  []string{testMemcg, "/sys/fs/cgroup/memory/crivk/kubepods"},
			wantDescs: []string{"hard memory eviction threshold", "hard allocatable memory eviction threshold"},
			// root: 4096Mi capacity - 100Mi + 512Mi inactive; kubepods: 2048Mi - 100Mi + 256Mi.
			wantArmed: []int64{4096*mi - 100*mi + 512*mi, 2048*mi - 100*mi + 256*mi}},
		"no kubepods cgroup": {wantDirs: []string{testMemcg}, wantDescs: []string{"hard memory eviction threshold"},
			wantArmed: []int64{4096*mi - 100*mi + 512*mi}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m, err := New(Config{Summary: fixedSummary(nil), Thresholds: th, EnforceNodeAllocatable: true, KernelMemcgNotification: true,
				MemoryCgroup: testMemcg, PodsMemoryCgroup: tc.podsCgroup})
			if err != nil {
				t.Fatal(err)
			}
			cgs := map[string]*fakeMemcg{}
			var dirs []string
			m.memcgOf = func(dir string) (memcg, error) {
				dirs = append(dirs, dir)
				cgs[dir] = &fakeMemcg{}
				return cgs[dir], nil
			}
			ctx := context.Background()
			m.startNotifiers(ctx)
			defer m.stopNotifiers()
			var descs []string
			for _, n := range m.notifiers {
				descs = append(descs, n.Description())
			}
			if strings.Join(dirs, ",") != strings.Join(tc.wantDirs, ",") || strings.Join(descs, ",") != strings.Join(tc.wantDescs, ",") {
				t.Fatalf("cgroups %v notifiers %v, want %v %v", dirs, descs, tc.wantDirs, tc.wantDescs)
			}
			s := withPods(memSummary(3072*mi, 1024*mi, ptr.To[uint64](1536*mi)),
				&statsapi.MemoryStats{AvailableBytes: ptr.To[uint64](1536 * mi), WorkingSetBytes: ptr.To[uint64](512 * mi), UsageBytes: ptr.To[uint64](768 * mi)})
			m.updateNotifiers(ctx, s, time.Now())
			var armed []int64
			for _, d := range tc.wantDirs {
				armed = append(armed, cgs[d].armed...)
			}
			if fmt.Sprint(armed) != fmt.Sprint(tc.wantArmed) {
				t.Errorf("armed %v, want %v", armed, tc.wantArmed)
			}
		})
	}
	// The pods container missing: the allocatable notifier reports the
	// summary incomplete and arms nothing.
	n := &memoryNotifier{threshold: evictionapi.Threshold{Signal: evictionapi.SignalAllocatableMemoryAvailable, Value: th[0].Value}, cgroup: &fakeMemcg{}}
	if err := n.UpdateThreshold(context.Background(), memSummary(1, 1, ptr.To[uint64](1))); err == nil || !strings.Contains(err.Error(), "pods system container") {
		t.Errorf("no pods container: %v", err)
	}
}
