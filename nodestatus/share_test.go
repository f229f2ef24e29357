package nodestatus

import (
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	evictionapi "github.com/crivk/crivk/eviction/api"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestShare(t *testing.T) {
	rl := v1.ResourceList{
		v1.ResourceCPU:              resource.MustParse("2"),
		v1.ResourceMemory:           resource.MustParse("4Gi"),
		v1.ResourceEphemeralStorage: resource.MustParse("100G"),
		v1.ResourcePods:             resource.MustParse("110"),
	}
	tests := map[string]struct {
		n    int
		want map[v1.ResourceName]string
	}{
		"one node: all of it": {n: 1, want: map[v1.ResourceName]string{v1.ResourceCPU: "2", v1.ResourceMemory: "4Gi", v1.ResourceEphemeralStorage: "100G", v1.ResourcePods: "110"}},
		"three nodes: rounded down": {n: 3, want: map[v1.ResourceName]string{
			v1.ResourceCPU: "666m", v1.ResourceMemory: "1431655765", v1.ResourceEphemeralStorage: "33333333333", v1.ResourcePods: "110"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Share(rl, tc.n)
			for r, w := range tc.want {
				q := got[r]
				if want := resource.MustParse(w); q.Cmp(want) != 0 {
					t.Errorf("%s: %s, want %s", r, q.String(), want.String())
				}
			}
			if q := rl[v1.ResourceCPU]; q.Cmp(resource.MustParse("2")) != 0 {
				t.Errorf("Share changed its input: cpu %s", q.String())
			}
		})
	}
}

func TestPortion(t *testing.T) {
	rl := v1.ResourceList{
		v1.ResourceCPU:              resource.MustParse("2"),
		v1.ResourceMemory:           resource.MustParse("4Gi"),
		v1.ResourceEphemeralStorage: resource.MustParse("100G"),
		v1.ResourcePods:             resource.MustParse("110"),
		"pid":                       resource.MustParse("4194304"),
	}
	tests := map[string]struct {
		p    Portion
		want map[v1.ResourceName]string
	}{
		"zero: the whole": {p: Portion{}, want: map[v1.ResourceName]string{
			v1.ResourceCPU: "2", v1.ResourceMemory: "4Gi", v1.ResourceEphemeralStorage: "100G", v1.ResourcePods: "110", "pid": "4194304"}},
		"one of one: the whole": {p: Portion{Weight: 1, Total: 1}, want: map[v1.ResourceName]string{
			v1.ResourceCPU: "2", v1.ResourceMemory: "4Gi", v1.ResourcePods: "110"}},
		"1 of 3 is Share's third": {p: Portion{Weight: 1, Total: 3}, want: map[v1.ResourceName]string{
			v1.ResourceCPU: "666m", v1.ResourceMemory: "1431655765", v1.ResourceEphemeralStorage: "33333333333", v1.ResourcePods: "110", "pid": "1398101"}},
		"2 of 6 is the same third": {p: Portion{Weight: 2, Total: 6}, want: map[v1.ResourceName]string{
			v1.ResourceCPU: "666m", v1.ResourceMemory: "1431655765", v1.ResourceEphemeralStorage: "33333333333", v1.ResourcePods: "110"}},
		"2 of 4 (2,1,1): half": {p: Portion{Weight: 2, Total: 4}, want: map[v1.ResourceName]string{
			v1.ResourceCPU: "1", v1.ResourceMemory: "2Gi", v1.ResourceEphemeralStorage: "50G", v1.ResourcePods: "110", "pid": "2097152"}},
		"1 of 4 (2,1,1): a quarter": {p: Portion{Weight: 1, Total: 4}, want: map[v1.ResourceName]string{
			v1.ResourceCPU: "500m", v1.ResourceMemory: "1Gi", v1.ResourceEphemeralStorage: "25G", v1.ResourcePods: "110"}},
		"2 of 3: rounded down": {p: Portion{Weight: 2, Total: 3}, want: map[v1.ResourceName]string{
			v1.ResourceCPU: "1333m", v1.ResourceMemory: "2863311530", v1.ResourceEphemeralStorage: "66666666666", v1.ResourcePods: "110"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := tc.p.Of(rl)
			for r, w := range tc.want {
				q := got[r]
				if want := resource.MustParse(w); q.Cmp(want) != 0 {
					t.Errorf("%s: %s, want %s", r, q.String(), want.String())
				}
			}
			if q := rl[v1.ResourceCPU]; q.Cmp(resource.MustParse("2")) != 0 {
				t.Errorf("Of changed its input: cpu %s", q.String())
			}
		})
	}
}

// TestPortionScale: no overflow where v × Weight passes 64 bits, and
// nothing of a negative value.
func TestPortionScale(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Portion
		v    int64
		want int64
	}{
		{"the whole", Portion{}, 7, 7},
		{"a third, down", Portion{Weight: 1, Total: 3}, 7, 2},
		{"product past 64 bits", Portion{Weight: 1 << 20, Total: 1<<20 + 1}, 1 << 60, 1152920405096267775}, // 2^80 / (2^20+1), rounded down,
		{"negative value", Portion{Weight: 1, Total: 2}, -4, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Scale(tc.v); got != tc.want {
				t.Errorf("Scale(%d) = %d, want %d", tc.v, got, tc.want)
			}
		})
	}
}

// TestPortionsNeverExceedTheWhole: whatever the weights, the nodes' parts
// of every resource add up to at most the machine's, and each part is
// within one unit per node of its exact value.
func TestPortionsNeverExceedTheWhole(t *testing.T) {
	rl := v1.ResourceList{
		v1.ResourceCPU:              resource.MustParse("3"),
		v1.ResourceMemory:           resource.MustParse("7999999999"),
		v1.ResourceEphemeralStorage: resource.MustParse("1000001"),
		"pid":                       resource.MustParse("32768"),
	}
	for _, weights := range [][]int64{{1, 1, 1}, {2, 1, 1}, {3, 3, 1}, {1, 7}, {5, 4, 3, 2, 1}, {1000000, 1, 1}, {9, 9, 9, 9, 9, 9, 9}} {
		var total int64
		for _, w := range weights {
			total += w
		}
		sum := map[v1.ResourceName]int64{}
		for _, w := range weights {
			for name, q := range (Portion{Weight: w, Total: total}).Of(rl) {
				if name == v1.ResourceCPU {
					sum[name] += q.MilliValue()
				} else {
					sum[name] += q.Value()
				}
			}
		}
		for name, q := range rl {
			whole := q.Value()
			if name == v1.ResourceCPU {
				whole = q.MilliValue()
			}
			if got := sum[name]; got > whole || got < whole-int64(len(weights)) {
				t.Errorf("weights %v: %s parts add up to %d of %d", weights, name, got, whole)
			}
		}
	}
}

// TestBuildNodeShares: a node of three reports a third of the machine's
// capacity and of its allocatable (reservations taken once, before the
// split), and all its --max-pods.
func TestBuildNodeShares(t *testing.T) {
	dir := t.TempDir()
	cfg := NodeConfig{Name: "m-0", MaxPods: 110, RootDir: dir,
		Reservations: Reservations{SystemReserved: v1.ResourceList{v1.ResourceMemory: resource.MustParse("300Mi")}}}
	whole, err := BuildNode(cfg, cri.Readiness{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Portion = Portion{Weight: 1, Total: 3}
	third, err := BuildNode(cfg, cri.Readiness{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct {
		what         string
		whole, share v1.ResourceList
	}{{"capacity", whole.Status.Capacity, third.Status.Capacity}, {"allocatable", whole.Status.Allocatable, third.Status.Allocatable}} {
		if got, want := l.share.Cpu().MilliValue(), l.whole.Cpu().MilliValue()/3; got != want {
			t.Errorf("%s cpu %dm, want %dm", l.what, got, want)
		}
		if got, want := l.share.Memory().Value(), l.whole.Memory().Value()/3; got != want {
			t.Errorf("%s memory %d, want %d", l.what, got, want)
		}
		if got := l.share.Pods().Value(); got != 110 {
			t.Errorf("%s pods %d, want 110", l.what, got)
		}
	}
}

// TestBuildNodeWeighted: with --node-shares=2,1,1 the first node reports
// half of the machine's capacity and allocatable, the others a quarter.
func TestBuildNodeWeighted(t *testing.T) {
	dir := t.TempDir()
	cfg := NodeConfig{Name: "m-0", MaxPods: 110, RootDir: dir,
		Reservations: Reservations{SystemReserved: v1.ResourceList{v1.ResourceMemory: resource.MustParse("300Mi")}}}
	whole, err := BuildNode(cfg, cri.Readiness{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []int64{2, 1} {
		cfg.Portion = Portion{Weight: w, Total: 4}
		part, err := BuildNode(cfg, cri.Readiness{}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []struct {
			what        string
			whole, part v1.ResourceList
		}{{"capacity", whole.Status.Capacity, part.Status.Capacity}, {"allocatable", whole.Status.Allocatable, part.Status.Allocatable}} {
			if got, want := l.part.Memory().Value(), l.whole.Memory().Value()*w/4; got != want {
				t.Errorf("weight %d: %s memory %d, want %d", w, l.what, got, want)
			}
			if got, want := l.part.Cpu().MilliValue(), l.whole.Cpu().MilliValue()*w/4; got != want {
				t.Errorf("weight %d: %s cpu %dm, want %dm", w, l.what, got, want)
			}
			if got := l.part.Pods().Value(); got != 110 {
				t.Errorf("weight %d: %s pods %d, want 110", w, l.what, got)
			}
		}
	}
}

// TestAllocatableOfHoldsTheMemoryThresholdPerNode: a node of many measures
// memory.available on its own share, so its allocatable memory leaves the
// whole hard threshold of that share free (its pods at their requests put
// it exactly at the threshold), while CPU and ephemeral storage stay the
// node's part of the machine's allocatable. The whole machine is
// Allocatable itself.
func TestAllocatableOfHoldsTheMemoryThresholdPerNode(t *testing.T) {
	capacity := v1.ResourceList{
		v1.ResourceCPU:              resource.MustParse("4"),
		v1.ResourceMemory:           resource.MustParse("16Gi"),
		v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		v1.ResourcePods:             resource.MustParse("110"),
	}
	fixed, _ := evictionapi.ParseThresholds(evictionapi.Flags{Hard: "memory.available<100Mi,nodefs.available<10%"})
	pct, _ := evictionapi.ParseThresholds(evictionapi.Flags{Hard: "memory.available<5%"})
	sys := v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}
	const mi = int64(1 << 20)
	for name, tc := range map[string]struct {
		r       Reservations
		p       Portion
		wantMem int64
	}{
		"whole, 100Mi":                   {r: Reservations{SystemReserved: sys, EvictionHard: fixed}, p: Portion{}, wantMem: 15*1024*mi - 100*mi},
		"a quarter, 100Mi":               {r: Reservations{SystemReserved: sys, EvictionHard: fixed}, p: Portion{Weight: 1, Total: 4}, wantMem: 15*1024*mi/4 - 100*mi},
		"three quarters, 100Mi":          {r: Reservations{SystemReserved: sys, EvictionHard: fixed}, p: Portion{Weight: 3, Total: 4}, wantMem: 15*1024*mi*3/4 - 100*mi},
		"a quarter, 5% of share":         {r: Reservations{EvictionHard: pct}, p: Portion{Weight: 1, Total: 4}, wantMem: 4*1024*mi - 214748364},
		"a quarter, no memory threshold": {r: Reservations{SystemReserved: sys}, p: Portion{Weight: 1, Total: 4}, wantMem: 15 * 1024 * mi / 4},
	} {
		t.Run(name, func(t *testing.T) {
			got := tc.r.AllocatableOf(capacity, tc.p)
			if m := got.Memory().Value(); m != tc.wantMem {
				t.Errorf("memory %d, want %d", m, tc.wantMem)
			}
			split := tc.p.Of(tc.r.Allocatable(capacity))
			for _, res := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceEphemeralStorage, v1.ResourcePods} {
				if g, w := got[res], split[res]; g.Cmp(w) != 0 {
					t.Errorf("%s %s, want the split of the machine's %s", res, g.String(), w.String())
				}
			}
		})
	}
}

func TestPortionMemoryShare(t *testing.T) {
	mem, err := MemoryCapacity()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		p    Portion
		want int64
	}{
		"a single node: none, the machine's measure alone": {p: Portion{}, want: 0},
		"the whole by weight":                              {p: Portion{Weight: 3, Total: 3}, want: 0},
		"one of four":                                      {p: Portion{Weight: 1, Total: 4}, want: mem / 4},
		"two of three":                                     {p: Portion{Weight: 2, Total: 3}, want: Portion{Weight: 2, Total: 3}.Scale(mem)},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := tc.p.MemoryShare()
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("%v.MemoryShare() = %d, want %d (machine %d)", tc.p, got, tc.want, mem)
			}
		})
	}
}
