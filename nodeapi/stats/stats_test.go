package stats

import (
	"context"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type fakeImageFs struct{}

func (fakeImageFs) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{}, nil
}

// fakeRuntime is fakeStats with the sandboxes' stats.
type fakeRuntime struct{ *fakeStats }

func (fakeRuntime) ListPodSandboxStats(context.Context, *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	return nil, nil
}

// TestNewRequiresItsInputs: New refuses a Config without the runtime, its
// image filesystem or the memory capacity, and fills the defaults.
func TestNewRequiresItsInputs(t *testing.T) {
	memory := func() (int64, error) { return 1 << 30, nil }
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"complete", Config{Runtime: fakeRuntime{&fakeStats{}}, ImageFs: fakeImageFs{}, MemoryCapacity: memory}, true},
		{"no runtime", Config{ImageFs: fakeImageFs{}, MemoryCapacity: memory}, false},
		{"no image fs", Config{Runtime: fakeRuntime{&fakeStats{}}, MemoryCapacity: memory}, false},
		{"no memory capacity", Config{Runtime: fakeRuntime{&fakeStats{}}, ImageFs: fakeImageFs{}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := New(tc.cfg)
			if (err == nil) != tc.ok || (h.Summary != nil) != tc.ok || (h.ResourceMetrics != nil) != tc.ok {
				t.Errorf("New: %+v, %v; want ok %v", h, err, tc.ok)
			}
		})
	}
}
