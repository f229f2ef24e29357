package stats

import (
	"context"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/crivk/crivk/cm"
	"github.com/crivk/crivk/cri"
)

// TestOwnedSelectsTheNodesContainers: the summary (the eviction manager's
// observations) and /metrics/resource list the containers of Config.Owned
// only: a node of a multi-node crivk never reports or ranks another
// node's pods (docs/scale.md); without it, every crivk container, as
// before.
func TestOwnedSelectsTheNodesContainers(t *testing.T) {
	tests := map[string]struct {
		owned map[string]string
		want  map[string]string
	}{
		"single-node crivk": {owned: nil, want: map[string]string{cri.LabelManagedBy: "crivk"}},
		"node of many":      {owned: cri.OwnedSelector("n-a"), want: map[string]string{cri.LabelManagedBy: "crivk", cri.LabelNode: "n-a"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := &fakeStats{}
			h, err := New(Config{Runtime: fakeRuntime{f}, ImageFs: fakeImageFs{}, RootDir: t.TempDir(), Node: cm.NewHost(cm.HostConfig{V2Mount: t.TempDir()}), ProcRoot: t.TempDir(),
				MemoryCapacity: func() (int64, error) { return 1 << 30, nil }, Owned: tc.owned})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.Summarize(context.Background()); err != nil {
				t.Fatalf("Summarize: %v", err)
			}
			h.ResourceMetrics.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/metrics/resource", nil))
			if len(f.filters) != 4 {
				t.Fatalf("%d container lists, want 4 (two per endpoint)", len(f.filters))
			}
			for i, sel := range f.filters {
				if !reflect.DeepEqual(sel, tc.want) {
					t.Errorf("list %d selected %v, want %v", i, sel, tc.want)
				}
			}
		})
	}
}
