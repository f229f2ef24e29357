package allocation

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// TestSortPending: the kubelet's sortPendingResizes order, one rule per
// case (the first pod of each pair wins on that rule alone).
func TestSortPending(t *testing.T) {
	type spec struct {
		uid               string
		allocCPU, wantCPU string
		priority          int32
		guaranteed        bool
		pendingAt         time.Duration // since the start; the later, the newer
	}
	for name, tc := range map[string][2]spec{
		"a decrease before an increase": {
			{uid: "down", allocCPU: "1", wantCPU: "500m", priority: 0, pendingAt: 2},
			{uid: "up", allocCPU: "500m", wantCPU: "1", priority: 100, pendingAt: 1},
		},
		"higher priority first": {
			{uid: "high", allocCPU: "500m", wantCPU: "1", priority: 100, pendingAt: 2},
			{uid: "low", allocCPU: "500m", wantCPU: "1", priority: 10, pendingAt: 1},
		},
		"Guaranteed before Burstable": {
			{uid: "g", allocCPU: "500m", wantCPU: "1", guaranteed: true, pendingAt: 2},
			{uid: "b", allocCPU: "500m", wantCPU: "1", pendingAt: 1},
		},
		"longest pending first": {
			{uid: "old", allocCPU: "500m", wantCPU: "1", pendingAt: 1},
			{uid: "new", allocCPU: "500m", wantCPU: "1", pendingAt: 2},
		},
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
			clk := clocktesting.NewFakeClock(start)
			m, err := New(Config{Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			// Set up in time order, then hand them over winner last.
			byTime := []spec{tc[0], tc[1]}
			slices.SortFunc(byTime, func(a, b spec) int { return int(a.pendingAt - b.pendingAt) })
			pods := map[string]*v1.Pod{}
			for _, s := range byTime {
				c := ctr("a", s.allocCPU, "1Gi")
				if !s.guaranteed {
					c.Resources.Limits = nil
				}
				p := pod(s.uid, 1, c)
				p.Spec.Priority = ptr.To(s.priority)
				if err := m.Allocate(p); err != nil {
					t.Fatal(err)
				}
				r := p.DeepCopy()
				r.Generation = 2
				r.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = testutil.Resources(s.wantCPU, "")[v1.ResourceCPU]
				if s.guaranteed {
					r.Spec.Containers[0].Resources.Limits[v1.ResourceCPU] = testutil.Resources(s.wantCPU, "")[v1.ResourceCPU]
				}
				clk.Step(time.Second)
				m.SetPending(r.UID, v1.PodReasonDeferred, "no room", 2)
				pods[s.uid] = r
			}
			list := []*v1.Pod{pods[tc[1].uid], pods[tc[0].uid]}
			m.SortPending(list)
			if got, want := []types.UID{list[0].UID, list[1].UID}, []types.UID{types.UID(tc[0].uid), types.UID(tc[1].uid)}; !reflect.DeepEqual(got, want) {
				t.Errorf("order %v, want %v", got, want)
			}
			deferred := m.Deferred()
			slices.Sort(deferred)
			want := []types.UID{types.UID(tc[0].uid), types.UID(tc[1].uid)}
			slices.Sort(want)
			if !reflect.DeepEqual(deferred, want) {
				t.Errorf("Deferred() = %v, want %v", deferred, want)
			}
		})
	}
}

// TestRemoveRequestsRetry: forgetting a pod asks for the deferred resizes
// to be retried (pods_removed), only when there are some; requests
// coalesce.
func TestRemoveRequestsRetry(t *testing.T) {
	m, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	got := func() string {
		select {
		case tr := <-m.RetryRequests():
			return tr
		default:
			return ""
		}
	}
	if err := m.Remove("gone"); err != nil || got() != "" {
		t.Fatalf("Remove without a deferred resize asked for a retry (%v)", err)
	}
	m.SetPending("waiting", v1.PodReasonInfeasible, "too big", 2)
	if _ = m.Remove("gone"); got() != "" {
		t.Fatalf("Remove with only an Infeasible resize asked for a retry")
	}
	m.SetPending("waiting", v1.PodReasonDeferred, "no room", 3)
	if _ = m.Remove("gone"); got() != TriggerPodsRemoved {
		t.Fatalf("Remove with a deferred resize did not ask for a retry")
	}
	m.RequestRetry(TriggerPeriodic)
	m.RequestRetry(TriggerPodUpdated)
	if a, b := got(), got(); a != TriggerPeriodic || b != "" {
		t.Errorf("two requests gave %q then %q, want one (coalesced)", a, b)
	}
}

// TestPendingGeneration: only a decision of this process counts as made
// for a generation; a condition taken back from the API after a restart
// leaves the pod to be decided again at its first sync.
func TestPendingGeneration(t *testing.T) {
	m, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := pod("p", 4, ctr("a", "1", "1Gi"))
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: v1.PodReasonDeferred, ObservedGeneration: 4}}
	m.Backfill(p)
	if g := m.PendingGeneration(p.UID); g != 0 {
		t.Errorf("after Backfill: PendingGeneration %d, want 0", g)
	}
	if d := m.Deferred(); len(d) != 1 {
		t.Errorf("after Backfill: Deferred %v, want the pod (retried by the loop too)", d)
	}
	m.SetPending(p.UID, v1.PodReasonDeferred, "no room", 4)
	if g := m.PendingGeneration(p.UID); g != 4 {
		t.Errorf("after SetPending: PendingGeneration %d, want 4", g)
	}
	m.ClearPending(p.UID)
	if g := m.PendingGeneration(p.UID); g != 0 {
		t.Errorf("after ClearPending: PendingGeneration %d, want 0", g)
	}
}
