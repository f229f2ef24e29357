package nodestatus

import (
	"strings"
	"testing"

	evictionapi "github.com/crivk/crivk/eviction/api"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestParseResourceList(t *testing.T) {
	l, err := ParseResourceList("cpu=100m, memory=500Mi,ephemeral-storage=1Gi,pid=100")
	if err != nil {
		t.Fatal(err)
	}
	if l.Cpu().MilliValue() != 100 || l.Memory().Value() != 500<<20 || l.StorageEphemeral().Value() != 1<<30 {
		t.Errorf("parsed %v", l)
	}
	if l, err := ParseResourceList(""); err != nil || len(l) != 0 {
		t.Errorf("empty: %v, %v", l, err)
	}
	for in, want := range map[string]string{
		"cpu":            "not name=quantity",
		"gpu=1":          "cannot reserve",
		"memory=lots":    "memory=\"lots\"",
		"memory=-1Gi":    "negative",
		"cpu=1,,mem=2Gi": "not name=quantity",
	} {
		if _, err := ParseResourceList(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseResourceList(%q) = %v, want an error with %q", in, err, want)
		}
	}
}

// TestAllocatable: capacity - system-reserved - kube-reserved - hard
// eviction (memory.available for memory, nodefs.available for
// ephemeral-storage), never negative; the pods' bound leaves the eviction
// thresholds out.
func TestAllocatable(t *testing.T) {
	capacity := v1.ResourceList{
		v1.ResourceCPU:              resource.MustParse("2"),
		v1.ResourceMemory:           resource.MustParse("8Gi"),
		v1.ResourcePods:             resource.MustParse("110"),
		v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	sys, _ := ParseResourceList("cpu=100m,memory=1Gi")
	kube, _ := ParseResourceList("cpu=200m,memory=512Mi,ephemeral-storage=10Gi")
	ev, _ := evictionapi.ParseThresholds(evictionapi.Flags{Hard: evictionapi.DefaultHard})
	r := Reservations{SystemReserved: sys, KubeReserved: kube, EvictionHard: ev}
	a := r.Allocatable(capacity)
	want := map[v1.ResourceName]string{
		v1.ResourceCPU:              "1700m",
		v1.ResourceMemory:           "6556Mi", // 8192 - 1024 - 512 - 100
		v1.ResourcePods:             "110",
		v1.ResourceEphemeralStorage: "80Gi", // 100 - 10 - 10% of 100
	}
	for k, w := range want {
		got := a[k]
		if got.Cmp(resource.MustParse(w)) != 0 {
			t.Errorf("allocatable %s = %s, want %s", k, got.String(), w)
		}
	}
	b := r.PodsBound(capacity)
	if got := b[v1.ResourceMemory]; got.Cmp(resource.MustParse("6656Mi")) != 0 {
		t.Errorf("pods' memory bound = %s, want 6656Mi", got.String())
	}
	// More reserved than there is: zero, not negative.
	huge, _ := ParseResourceList("memory=1Ti")
	z := Reservations{SystemReserved: huge}.Allocatable(capacity)
	if got := z[v1.ResourceMemory]; got.Sign() != 0 {
		t.Errorf("over-reserved memory = %s, want 0", got.String())
	}
	if s := r.String(); !strings.Contains(s, "kube-reserved cpu=200m") || !strings.Contains(s, "eviction-hard nodefs.available<10%") {
		t.Errorf("String() = %q", s)
	}
}
