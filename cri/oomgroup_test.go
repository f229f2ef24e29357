package cri

import (
	"testing"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
)

// TestOOMKillGroup: with Config.OOMKillGroup (cgroup v2 without
// singleProcessOOMKill) every container is created with memory.oom.group
// 1 in its Unified map, beside the swap limit's memory.swap.max, and an
// in-place resize sends it again, as the kubelet's regenerated resources
// do, whatever the runtime reports; without it the map has no
// memory.oom.group.
func TestOOMKillGroup(t *testing.T) {
	for name, tc := range map[string]struct {
		group bool
		swap  SwapController
		want  string // memory.oom.group sent; "": none
	}{
		"cgroup v1, or singleProcessOOMKill": {swap: SwapControllerV1},
		"cgroup v2":                          {group: true, swap: SwapControllerV2, want: "1"},
		"cgroup v2 without swap accounting":  {group: true, want: "1"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newSyncFixture(t)
			f.rt.cfg.OOMKillGroup, f.rt.cfg.Swap = tc.group, tc.swap
			f.is.SetFakeImages([]string{"busybox:1.36"})
			free := v1.Container{Name: "free", Image: "busybox:1.36", Resources: v1.ResourceRequirements{Requests: testutil.Resources("100m", "")}}
			pod := syncPod(v1.RestartPolicyAlways, sized("a", "100m", "200m", "64Mi"), free)
			if res, _ := f.sync(t, pod); res.Error() != nil {
				t.Fatalf("first sync: %v", res.Error())
			}
			if len(f.rs.created) != 2 {
				t.Fatalf("%d containers created, want 2", len(f.rs.created))
			}
			for id, cfg := range f.rs.created {
				u := cfg.GetLinux().GetResources().GetUnified()
				if got := u[cgroup2OOMGroupFile]; got != tc.want {
					t.Errorf("container %s created with memory.oom.group %q, want %q", id, got, tc.want)
				}
				if tc.swap == SwapControllerV2 && u[cgroup2MaxSwapFile] != "0" {
					t.Errorf("container %s created without memory.swap.max 0 beside the OOM group: %v", id, u)
				}
			}
			// A runtime whose status reports no unified map: the resize must
			// send the OOM group itself.
			f.rs.mu.Lock()
			for _, c := range f.rs.containers {
				c.Resources.GetLinux().Unified = nil
			}
			f.rs.mu.Unlock()
			grown := pod.DeepCopy()
			grown.Spec.Containers[0] = sized("a", "100m", "200m", "128Mi")
			if res, plan := f.sync(t, grown); res.ResizeErr != nil || res.Error() != nil {
				t.Fatalf("resize: %v %v (plan %s)", res.ResizeErr, res.Error(), plan)
			}
			if len(f.rs.updated) != 1 {
				t.Fatalf("resize: %d updates (%q), want 1", len(f.rs.updated), f.rs.updates)
			}
			if got := f.rs.updated[0].GetUnified()[cgroup2OOMGroupFile]; got != tc.want {
				t.Errorf("resize sent memory.oom.group %q, want %q", got, tc.want)
			}
		})
	}
}
