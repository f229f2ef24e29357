package stats

import (
	"context"
	"errors"
	"testing"

	"github.com/crivk/crivk/cm"
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

// countingRuntime is fakeStats whose sandbox stats count their calls.
type countingRuntime struct {
	*fakeStats
	sandboxCalls *int
}

func (r countingRuntime) ListPodSandboxStats(context.Context, *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	*r.sandboxCalls++
	return nil, errors.New("cgroupPath is empty")
}

// TestNewSandboxStatsOnlyWithPodCgroups: the summary asks the runtime for
// the sandboxes' stats only when the node has pod cgroups (containerd
// answers them only for sandboxes with a cgroup parent); without, neither
// the list nor the sandboxes one by one are asked.
func TestNewSandboxStatsOnlyWithPodCgroups(t *testing.T) {
	memory := func() (int64, error) { return 1 << 30, nil }
	running := &fakeStats{containers: []*runtimeapi.Container{{Id: "c1", PodSandboxId: "sb1"}, {Id: "c2", PodSandboxId: "sb2"}}}
	for _, tc := range []struct {
		name string
		pods PodsCgroup
		want int
	}{
		{"no pod cgroups", nil, 0},
		{"pod cgroups", podsCgroupFunc(func() (uint64, uint64, uint64, error) { return 0, 0, 0, nil }), 3}, // the list, then sb1 and sb2
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			h, err := New(Config{Runtime: countingRuntime{running, &calls}, ImageFs: fakeImageFs{}, MemoryCapacity: memory,
				RootDir: t.TempDir(), Node: cm.NewHost(cm.HostConfig{V2Mount: t.TempDir()}), ProcRoot: t.TempDir(), PodsCgroup: tc.pods})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.Summarize(context.Background()); err != nil {
				t.Fatal(err)
			}
			if calls != tc.want {
				t.Errorf("ListPodSandboxStats called %d times, want %d", calls, tc.want)
			}
		})
	}
}
