package nodestatus

import (
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
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
	cfg.Shares = 3
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
