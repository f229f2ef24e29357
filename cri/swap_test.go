package cri

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
)

// TestDetectSwapController: the kubelet's checkSwapControllerAvailability
// on a fake cgroup mount.
func TestDetectSwapController(t *testing.T) {
	for name, tc := range map[string]struct {
		v2         bool
		files      []string // below the cgroup mount
		selfCgroup string   // "": no /proc/self/cgroup
		want       SwapController
	}{
		"v1 with swap accounting": {files: []string{"memory/memory.memsw.limit_in_bytes"}, want: SwapControllerV1},
		"v1 without":              {files: []string{"memory/memory.limit_in_bytes"}, want: NoSwapController},
		"v2, own cgroup has memory.swap.max": {v2: true, files: []string{"system.slice/crivk.service/memory.swap.max"},
			selfCgroup: "0::/system.slice/crivk.service\n", want: SwapControllerV2},
		"v2, only the root's would": {v2: true, files: []string{"memory.swap.max"}, selfCgroup: "0::/system.slice/crivk.service\n", want: NoSwapController},
		"v2, own cgroup unreadable": {v2: true, files: []string{"system.slice/crivk.service/memory.swap.max"}, want: NoSwapController},
	} {
		t.Run(name, func(t *testing.T) {
			root, self := t.TempDir(), filepath.Join(t.TempDir(), "cgroup")
			for _, f := range tc.files {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, f), []byte("max\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.selfCgroup != "" {
				if err := os.WriteFile(self, []byte(tc.selfCgroup), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := detectSwapController(root, self, tc.v2); got != tc.want {
				t.Errorf("detectSwapController = %s, want %s", got, tc.want)
			}
		})
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
