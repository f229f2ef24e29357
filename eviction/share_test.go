package eviction

import (
	"context"
	"fmt"
	"testing"
	"time"

	evictionapi "github.com/crivk/crivk/eviction/api"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

// TestObserveMemoryShare: on a node of many, memory.available is the
// node's part of the machine's memory less its own pods' working set (the
// pods system container), with the machine's measure beside it; a single
// node, or a node without its pods container, has the machine's alone.
func TestObserveMemoryShare(t *testing.T) {
	at := metav1.NewTime(time.Unix(1700000000, 0))
	host := func() *statsapi.Summary { return memSummary(3072*mi, 1024*mi, nil) } // 4Gi machine, 3Gi available
	pods := func(ws uint64) *statsapi.MemoryStats {
		return &statsapi.MemoryStats{Time: at, WorkingSetBytes: ptr.To(ws), AvailableBytes: ptr.To[uint64](1)}
	}
	tests := map[string]struct {
		s                    *statsapi.Summary
		share                int64
		wantAvail, wantCapa  int64
		wantOf               string
		wantMachineAvailable int64 // 0: no machine measure beside it
	}{
		"single node: the machine's": {s: withPods(host(), pods(900*mi)), share: 0,
			wantAvail: 3072 * mi, wantCapa: 4096 * mi},
		"node of many: its share less its pods' working set": {s: withPods(host(), pods(900*mi)), share: 1024 * mi,
			wantAvail: 124 * mi, wantCapa: 1024 * mi, wantOf: measureNode, wantMachineAvailable: 3072 * mi},
		"pods above the share: nothing available": {s: withPods(host(), pods(1100*mi)), share: 1024 * mi,
			wantAvail: 0, wantCapa: 1024 * mi, wantOf: measureNode, wantMachineAvailable: 3072 * mi},
		"no pods container (no pod cgroups): the machine's": {s: host(), share: 1024 * mi,
			wantAvail: 3072 * mi, wantCapa: 4096 * mi},
		"pods container without a working set: the machine's": {s: withPods(host(), &statsapi.MemoryStats{Time: at}), share: 1024 * mi,
			wantAvail: 3072 * mi, wantCapa: 4096 * mi},
		"no machine figures: the node's alone": {s: withPods(&statsapi.Summary{}, pods(24*mi)), share: 1024 * mi,
			wantAvail: 1000 * mi, wantCapa: 1024 * mi, wantOf: measureNode},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			obs := observe(tc.s, tc.share)
			o, ok := obs[evictionapi.SignalMemoryAvailable]
			if !ok {
				t.Fatal("no memory.available")
			}
			if o.available.Value() != tc.wantAvail || o.capacity.Value() != tc.wantCapa || o.of != tc.wantOf {
				t.Errorf("observed %v of %v (%q), want %d of %d (%q)", o.available, o.capacity, o.of, tc.wantAvail, tc.wantCapa, tc.wantOf)
			}
			switch {
			case tc.wantMachineAvailable == 0 && o.machine != nil:
				t.Errorf("a machine measure %v beside it, want none", o.machine.available)
			case tc.wantMachineAvailable != 0 && (o.machine == nil || o.machine.available.Value() != tc.wantMachineAvailable ||
				o.machine.capacity.Value() != 4096*mi || o.machine.of != measureMachine):
				t.Errorf("machine measure %+v, want %d of 4Gi", o.machine, tc.wantMachineAvailable)
			}
			if tc.wantOf == measureNode && !o.at.Equal(at.Time) {
				t.Errorf("measured at %v, want the pods container's %v", o.at, at)
			}
		})
	}
}

// TestThresholdsMetOnShare: a memory.available threshold of a node of
// many is met by the node's measure or by the machine's, each against its
// own capacity (a percentage is of the node's share for the one, of the
// machine for the other), and the eviction message gives the figures of
// the measure that met it.
func TestThresholdsMetOnShare(t *testing.T) {
	q := func(v string) evictionapi.Value {
		th, _ := evictionapi.ParseThresholds(evictionapi.Flags{Hard: "memory.available<" + v})
		return th[0].Value
	}
	// The node: a 1Gi share; the machine: 4Gi.
	obs := func(nodeAvail, hostAvail int64) observations {
		return observe(withPods(memSummary(uint64(hostAvail), uint64(4096*mi-hostAvail), nil),
			&statsapi.MemoryStats{WorkingSetBytes: ptr.To(uint64(1024*mi - nodeAvail))}), 1024*mi)
	}
	tests := map[string]struct {
		value                evictionapi.Value
		minReclaim           *evictionapi.Value
		nodeAvail, hostAvail int64
		wantMet              bool
		wantMessage          string // the threshold's part of the eviction message
	}{
		"both clear": {value: q("100Mi"), nodeAvail: 500 * mi, hostAvail: 3000 * mi},
		"the node's pods over its share": {value: q("100Mi"), nodeAvail: 50 * mi, hostAvail: 3000 * mi, wantMet: true,
			wantMessage: "Threshold quantity: 100Mi, available: 50Mi. "},
		"the machine low, the node clear: still met": {value: q("100Mi"), nodeAvail: 500 * mi, hostAvail: 60 * mi, wantMet: true,
			wantMessage: "Threshold quantity: 100Mi, available: 60Mi. "},
		"both low: the node's figures": {value: q("100Mi"), nodeAvail: 50 * mi, hostAvail: 60 * mi, wantMet: true,
			wantMessage: "Threshold quantity: 100Mi, available: 50Mi. "},
		// 10% is 102.4Mi of the share, 409.6Mi of the machine.
		"percentage of the share": {value: q("10%"), nodeAvail: 100 * mi, hostAvail: 3000 * mi, wantMet: true,
			wantMessage: "Threshold quantity: 107374182, available: 100Mi. "},
		"percentage of the machine": {value: q("10%"), nodeAvail: 500 * mi, hostAvail: 400 * mi, wantMet: true,
			wantMessage: "Threshold quantity: 429496729, available: 400Mi. "},
		"percentage clear on both": {value: q("10%"), nodeAvail: 110 * mi, hostAvail: 410 * mi},
		"minimum reclaim on the machine": {value: q("100Mi"), minReclaim: &evictionapi.Value{Quantity: ptr.To(resource.MustParse("200Mi"))},
			nodeAvail: 500 * mi, hostAvail: 250 * mi, wantMet: true, wantMessage: "Threshold quantity: 100Mi, available: 250Mi. "},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			th := evictionapi.Threshold{Signal: evictionapi.SignalMemoryAvailable, Value: tc.value, MinReclaim: tc.minReclaim}
			o := obs(tc.nodeAvail, tc.hostAvail)
			enforce := tc.minReclaim != nil
			if got := len(thresholdsMet([]evictionapi.Threshold{th}, o, enforce)) == 1; got != tc.wantMet {
				t.Fatalf("met %v, want %v", got, tc.wantMet)
			}
			if !tc.wantMet || enforce {
				return
			}
			msg, _ := evictionMessage(v1.ResourceMemory, pod("p", 0, "", ""), func(string) (statsapi.PodStats, bool) { return statsapi.PodStats{}, false },
				[]evictionapi.Threshold{th}, o)
			if want := "The node was low on resource: memory. " + tc.wantMessage; msg != want {
				t.Errorf("message %q, want %q", msg, want)
			}
		})
	}
}

// TestMemoryShareEvictsOwnPods: a node of many whose own pods use its
// share is under MemoryPressure and evicts its hog while the machine has
// memory to spare; the same figures on a single node evict nothing (the
// machine's measure alone, as before); the machine's own pressure still
// evicts the node's pod, with the machine's figures.
func TestMemoryShareEvictsOwnPods(t *testing.T) {
	th, _ := evictionapi.ParseThresholds(evictionapi.Flags{Hard: "memory.available<100Mi"})
	tests := map[string]struct {
		share         int64
		hostAvail     uint64
		podsWS        uint64
		wantEvicted   string
		wantAvailable string
	}{
		"node of many, its pods over its share": {share: 1024 * mi, hostAvail: 2048 * mi, podsWS: 1000 * mi,
			wantEvicted: "hog", wantAvailable: "24Mi"},
		"single node, same figures: no pressure": {share: 0, hostAvail: 2048 * mi, podsWS: 1000 * mi},
		"node of many within its share":          {share: 2048 * mi, hostAvail: 2048 * mi, podsWS: 1000 * mi},
		"node of many within its share, the machine low": {share: 2048 * mi, hostAvail: 50 * mi, podsWS: 1000 * mi,
			wantEvicted: "hog", wantAvailable: "50Mi"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := newFakeNode()
			hog, small := pod("hog", 0, "64Mi", ""), pod("small", 0, "256Mi", "256Mi")
			n.pods = []statsapi.PodStats{podStats(hog, 900*mi), podStats(small, 100*mi)}
			n.memAvail = tc.hostAvail
			summary := func(ctx context.Context) (*statsapi.Summary, error) {
				s, err := n.summary(ctx)
				return withPods(s, &statsapi.MemoryStats{Time: metav1.NewTime(n.clock.Now()), WorkingSetBytes: ptr.To(tc.podsWS)}), err
			}
			m, err := New(Config{Thresholds: th, Summary: summary, Clock: n.clock, MemoryShare: tc.share, PressureTransitionPeriod: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			pods := &fakePods{active: []*v1.Pod{small, hog}}
			p, err := m.synchronize(context.Background(), pods)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantEvicted == "" {
				if p != nil || m.IsUnderMemoryPressure() {
					t.Fatalf("evicted %v, pressure %v; want neither", pods.names(), m.IsUnderMemoryPressure())
				}
				return
			}
			if p == nil || p.Name != tc.wantEvicted || !m.IsUnderMemoryPressure() {
				t.Fatalf("evicted %v, pressure %v; want %s evicted under MemoryPressure", pods.names(), m.IsUnderMemoryPressure(), tc.wantEvicted)
			}
			want := fmt.Sprintf("The node was low on resource: memory. Threshold quantity: 100Mi, available: %s. Container c was using 900Mi, request is 64Mi, has larger consumption of memory. ", tc.wantAvailable)
			if got := pods.evicted[0].ev.Message; got != want {
				t.Errorf("message %q, want %q", got, want)
			}
		})
	}
}

// TestNegativeMemoryShare: refused by New.
func TestNegativeMemoryShare(t *testing.T) {
	if _, err := New(Config{Summary: fixedSummary(nil), MemoryShare: -1}); err == nil {
		t.Error("a negative memory share accepted")
	}
}
