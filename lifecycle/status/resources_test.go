package status

import (
	"testing"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestContainerStatusResources: the status' resources of a container are
// the runtime's where it reports them (the kubelet's
// convertContainerStatusResources), its allocatedResources the allocated
// requests; the API server accepts a resize only when running containers
// report resources, so a BestEffort one reports an empty, non-nil set.
func TestContainerStatusResources(t *testing.T) {
	alloc := v1.ResourceRequirements{Requests: testutil.Resources("500m", "64Mi"), Limits: testutil.Resources("1", "128Mi")}
	withRT := func(c cri.ContainerStatus, shares, quota, mem int64) cri.ContainerStatus {
		c.Resources = &runtimeapi.LinuxContainerResources{CpuShares: shares, CpuQuota: quota, CpuPeriod: 100000, MemoryLimitInBytes: mem}
		return c
	}
	for name, tc := range map[string]struct {
		alloc   v1.ResourceRequirements
		rt      cri.ContainerStatus
		prev    *v1.ResourceRequirements
		want    v1.ResourceRequirements
		wantNil bool
	}{
		"running, runtime matches the allocation": {alloc: alloc, rt: withRT(reg("a", 0, cri.StateRunning, 0), 512, 100000, 128<<20),
			want: alloc},
		"running, a resize in progress: the runtime's values": {alloc: alloc, rt: withRT(reg("a", 0, cri.StateRunning, 0), 256, 50000, 64<<20),
			want: v1.ResourceRequirements{Requests: testutil.Resources("250m", "64Mi"), Limits: testutil.Resources("500m", "64Mi")}},
		"exited: the allocation": {alloc: alloc, rt: withRT(reg("a", 0, cri.StateExited, 0), 256, 50000, 64<<20), want: alloc},
		"running, runtime reports nothing: the previous status' values for it": {alloc: alloc, rt: reg("a", 0, cri.StateRunning, 0),
			prev: &v1.ResourceRequirements{Requests: testutil.Resources("300m", "64Mi"), Limits: testutil.Resources("700m", "100Mi")},
			want: v1.ResourceRequirements{Requests: testutil.Resources("300m", "64Mi"), Limits: testutil.Resources("700m", "100Mi")}},
		"BestEffort running: an empty set, not nil": {rt: withRT(reg("a", 0, cri.StateRunning, 0), 2, 0, 0), want: v1.ResourceRequirements{}},
		"tiny CPU at the least shares: the allocation's value": {
			alloc: v1.ResourceRequirements{Requests: testutil.Resources("1m", "")},
			rt:    withRT(reg("a", 0, cri.StateRunning, 0), 2, 0, 0),
			want:  v1.ResourceRequirements{Requests: testutil.Resources("1m", "")}},
		"never created: no resources": {alloc: alloc, wantNil: true},
	} {
		t.Run(name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid-1", Name: "web", Namespace: "prod"},
				Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{Name: "a", Image: "busybox:1.36", Resources: tc.alloc}}}}
			st := rtStatus(true)
			if tc.rt.Name != "" {
				st = rtStatus(true, tc.rt)
			}
			var prev v1.PodStatus
			if tc.prev != nil {
				prev.ContainerStatuses = []v1.ContainerStatus{{Name: "a", ContainerID: "containerd://a-0",
					State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}, Resources: tc.prev}}
			}
			s := Generate(Input{Pod: pod, Previous: prev, Runtime: st, RuntimeName: "containerd", Now: now})
			cs := s.ContainerStatuses[0]
			if tc.wantNil {
				if cs.Resources != nil {
					t.Errorf("resources %v, want none", cs.Resources)
				}
				return
			}
			if cs.Resources == nil {
				t.Fatalf("no resources")
			}
			for _, l := range []struct {
				what      string
				got, want v1.ResourceList
			}{{"requests", cs.Resources.Requests, tc.want.Requests}, {"limits", cs.Resources.Limits, tc.want.Limits}} {
				if len(l.got) != len(l.want) {
					t.Errorf("%s %v, want %v", l.what, l.got, l.want)
				}
				for r, q := range l.want {
					if g := l.got[r]; g.Cmp(q) != 0 {
						t.Errorf("%s %s = %s, want %s", l.what, r, g.String(), q.String())
					}
				}
			}
			if len(cs.AllocatedResources) != len(tc.alloc.Requests) || !cs.AllocatedResources.Cpu().Equal(*tc.alloc.Requests.Cpu()) {
				t.Errorf("allocatedResources %v, want %v", cs.AllocatedResources, tc.alloc.Requests)
			}
		})
	}
}

// TestGenerateResizeConditions: the resize conditions are published with
// their own times while the pod runs, and gone once they are cleared or
// the pod is terminal.
func TestGenerateResizeConditions(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid-1", Name: "web", Namespace: "prod"},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyNever, Containers: []v1.Container{{Name: "a", Image: "busybox:1.36"}}}}
	pending := v1.PodCondition{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: "Infeasible", Message: "m",
		ObservedGeneration: 2, LastTransitionTime: metav1.NewTime(t0)}
	s := Generate(Input{Pod: pod, Runtime: rtStatus(true, reg("a", 0, cri.StateRunning, 0)), Now: now, ResizeConditions: []v1.PodCondition{pending}})
	c := findCond(s, v1.PodResizePending)
	if c == nil || c.Reason != "Infeasible" || !c.LastTransitionTime.Time.Equal(t0) || c.ObservedGeneration != 2 {
		t.Fatalf("PodResizePending %+v in %v", c, s.Conditions)
	}
	// Cleared: gone, though the previous status had it.
	s = Generate(Input{Pod: pod, Previous: s, Runtime: rtStatus(true, reg("a", 0, cri.StateRunning, 0)), Now: now})
	if c := findCond(s, v1.PodResizePending); c != nil {
		t.Errorf("PodResizePending still published after it was cleared: %+v", c)
	}
	// Terminal: none.
	s = Generate(Input{Pod: pod, Runtime: rtStatus(false, reg("a", 0, cri.StateExited, 0)), Now: now, ResizeConditions: []v1.PodCondition{pending}})
	if c := findCond(s, v1.PodResizePending); c != nil || s.Phase != v1.PodSucceeded {
		t.Errorf("phase %s, PodResizePending %+v: want Succeeded without it", s.Phase, c)
	}
}
