package nodestatus

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestStatusLoopReportsDevicePlugins: the device plugins' resources go
// into capacity and allocatable as the kubelet's MachineInfo setter sets
// them; a change is reported at once, none when nothing changed; a
// removed resource stays with 0.
func TestStatusLoopReportsDevicePlugins(t *testing.T) {
	const r = v1.ResourceName("example.com/dev")
	q := func(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.DecimalSI) }
	ready := cri.Readiness{RuntimeReady: true, NetworkReady: true}
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{
		Capacity:    v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")},
		Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m")},
	}}
	n.Status.Conditions = NodeConditions(nil, ready, nil, time.Now())
	p := NewNodeProvider(&switchableRuntime{rd: ready}, n, time.Hour, nil, nil, nil, nil)
	var mu sync.Mutex
	var capacity, allocatable v1.ResourceList
	var removed []string
	p.SetDevicePlugins(func() (v1.ResourceList, v1.ResourceList, []string) {
		mu.Lock()
		defer mu.Unlock()
		rm := removed
		removed = nil // reported once, as the device manager does
		return capacity, allocatable, rm
	})
	set := func(c, a v1.ResourceList, rm []string) {
		mu.Lock()
		capacity, allocatable, removed = c, a, rm
		mu.Unlock()
	}
	ctx := context.Background()
	if _, report := p.check(ctx); report {
		t.Error("reported with no device plugin")
	}
	for _, step := range []struct {
		name       string
		c, a       v1.ResourceList
		removed    []string
		report     bool
		cap, alloc int64
	}{
		{name: "registered, 4 healthy", c: v1.ResourceList{r: q(4)}, a: v1.ResourceList{r: q(4)}, report: true, cap: 4, alloc: 4},
		{name: "nothing changed", c: v1.ResourceList{r: q(4)}, a: v1.ResourceList{r: q(4)}, cap: 4, alloc: 4},
		{name: "one unhealthy", c: v1.ResourceList{r: q(4)}, a: v1.ResourceList{r: q(3)}, report: true, cap: 4, alloc: 3},
		{name: "no listing yet: allocatable is the capacity", c: v1.ResourceList{r: q(0)}, a: v1.ResourceList{}, report: true, cap: 0, alloc: 0},
		{name: "listed again", c: v1.ResourceList{r: q(2)}, a: v1.ResourceList{r: q(0)}, report: true, cap: 2, alloc: 0},
		{name: "removed after the grace period", removed: []string{string(r)}, report: true, cap: 0, alloc: 0},
		{name: "stays at 0", cap: 0, alloc: 0},
	} {
		set(step.c, step.a, step.removed)
		got, report := p.check(ctx)
		if report != step.report {
			t.Errorf("%s: reported %v, want %v", step.name, report, step.report)
		}
		c, okc := got.Status.Capacity[r]
		a, oka := got.Status.Allocatable[r]
		if !okc || !oka || c.Value() != step.cap || a.Value() != step.alloc {
			t.Errorf("%s: capacity %v (%v) allocatable %v (%v), want %d and %d", step.name, c.String(), okc, a.String(), oka, step.cap, step.alloc)
		}
		if cpu := got.Status.Allocatable[v1.ResourceCPU]; cpu.String() != "1500m" {
			t.Errorf("%s: cpu allocatable %s changed", step.name, cpu.String())
		}
	}
}
