package cri

import (
	"testing"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
)

// TestSwapControllerOf: the kubelet's checkSwapControllerAvailability
// from what package cm read of the host (cm's TestSwapAccounting reads
// the files).
func TestSwapControllerOf(t *testing.T) {
	for _, tc := range []struct {
		version    int
		accounting bool
		want       SwapController
	}{
		{1, true, SwapControllerV1}, {1, false, NoSwapController},
		{2, true, SwapControllerV2}, {2, false, NoSwapController},
	} {
		if got := SwapControllerOf(tc.version, tc.accounting); got != tc.want {
			t.Errorf("SwapControllerOf(%d, %v) = %s, want %s", tc.version, tc.accounting, got, tc.want)
		}
	}
}

// TestNoSwapLimit: every container gets the kubelet's NoSwap limit for
// the host's swap controller, when it is created and when an in-place
// resize changes its memory limit; without a controller, none.
func TestNoSwapLimit(t *testing.T) {
	for name, tc := range map[string]struct {
		sc SwapController
		// wantSwap are the swap limits sent for the limited container at
		// its creation and at its resize, and for the one without a
		// memory limit; wantUnified memory.swap.max ("": not sent).
		wantCreate, wantResize, wantUnlimited int64
		wantUnified                           string
	}{
		"no controller":      {sc: NoSwapController},
		"cgroup v1 memsw":    {sc: SwapControllerV1, wantCreate: 64 * mi, wantResize: 128 * mi},
		"cgroup v2 swap.max": {sc: SwapControllerV2, wantUnified: "0"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newSyncFixture(t)
			f.rt.cfg.Swap = tc.sc
			f.is.SetFakeImages([]string{"busybox:1.36"})
			free := v1.Container{Name: "free", Image: "busybox:1.36", Resources: v1.ResourceRequirements{Requests: testutil.Resources("100m", "")}}
			pod := syncPod(v1.RestartPolicyAlways, sized("a", "100m", "200m", "64Mi"), free)
			if res, _ := f.sync(t, pod); res.Error() != nil {
				t.Fatalf("first sync: %v", res.Error())
			}
			for id, cfg := range f.rs.created {
				l := cfg.GetLinux().GetResources()
				want := tc.wantCreate
				if cfg.GetMetadata().GetName() == "free" {
					want = tc.wantUnlimited
				}
				if got := l.GetMemorySwapLimitInBytes(); got != want {
					t.Errorf("container %s created with swap limit %d, want %d", id, got, want)
				}
				if got := l.GetUnified()[cgroup2MaxSwapFile]; got != tc.wantUnified {
					t.Errorf("container %s created with memory.swap.max %q, want %q", id, got, tc.wantUnified)
				}
			}

			grown := pod.DeepCopy()
			grown.Spec.Containers[0] = sized("a", "100m", "200m", "128Mi")
			if res, plan := f.sync(t, grown); res.ResizeErr != nil || res.Error() != nil {
				t.Fatalf("resize: %v %v (plan %s)", res.ResizeErr, res.Error(), plan)
			}
			if len(f.rs.updated) != 1 {
				t.Fatalf("resize: %d updates (%q), want 1", len(f.rs.updated), f.rs.updates)
			}
			l := f.rs.updated[0]
			if l.GetMemoryLimitInBytes() != 128*mi || l.GetMemorySwapLimitInBytes() != tc.wantResize {
				t.Errorf("resize sent memory %d swap %d, want memory %d swap %d", l.GetMemoryLimitInBytes(), l.GetMemorySwapLimitInBytes(), 128*mi, tc.wantResize)
			}
			if got := l.GetUnified()[cgroup2MaxSwapFile]; got != tc.wantUnified {
				t.Errorf("resize sent memory.swap.max %q, want %q", got, tc.wantUnified)
			}
		})
	}
}
