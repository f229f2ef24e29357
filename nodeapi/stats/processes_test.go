package stats

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeProcesses answers ContainerProcesses from a map keyed "uid/id";
// a missing key is an error, as a container with no cgroup.
type fakeProcesses map[string]uint64

func (f fakeProcesses) ContainerProcesses(uid types.UID, id string) (uint64, error) {
	if n, ok := f[string(uid)+"/"+id]; ok {
		return n, nil
	}
	return 0, fmt.Errorf("no cgroup for %s/%s: %w", uid, id, errors.ErrUnsupported)
}

// TestSummaryProcessStats: a pod's process_stats.process_count is the sum
// of its running containers' counts (the kubelet's mergeProcessStats);
// a container whose count cannot be read adds nothing, a pod with none
// read and a summary without a process counter report none.
func TestSummaryProcessStats(t *testing.T) {
	at := time.Unix(1700000000, 0)
	tests := map[string]struct {
		processes Processes
		want      map[string]*uint64 // pod name -> process_count (nil: no process_stats)
	}{
		"summed per pod": {
			processes: fakeProcesses{"uid-web/c1": 3, "uid-web/c2": 4, "uid-db/c3": 1, "uid-web/stopped": 100},
			want:      map[string]*uint64{"web": ptr(7), "db": ptr(1)},
		},
		"a container without a count adds nothing": {
			processes: fakeProcesses{"uid-web/c2": 4, "uid-db/c3": 0},
			want:      map[string]*uint64{"web": ptr(4), "db": ptr(0)},
		},
		"a pod with no count read has none": {
			processes: fakeProcesses{"uid-web/c1": 2},
			want:      map[string]*uint64{"web": ptr(2), "db": nil},
		},
		"no process counter (no pod cgroups)": {
			want: map[string]*uint64{"web": nil, "db": nil},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			stats := []*runtimeapi.ContainerStats{
				ctrStats("c1", "web", "app", 1, 1, at), ctrStats("c2", "web", "side", 1, 1, at),
				ctrStats("stopped", "web", "old", 1, 1, at), ctrStats("c3", "db", "db", 1, 1, at),
			}
			for _, s := range stats {
				s.Attributes.Labels["io.kubernetes.pod.uid"] = "uid-" + s.Attributes.Labels["io.kubernetes.pod.name"]
			}
			f := &fakeStats{stats: stats, containers: []*runtimeapi.Container{
				{Id: "c1", CreatedAt: at.UnixNano()}, {Id: "c2", CreatedAt: at.UnixNano()}, {Id: "c3", CreatedAt: at.UnixNano()}}}
			dir := t.TempDir()
			s := summary{runtime: f, rootDir: dir, started: at, processes: tt.processes,
				imageFs: func(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
					return &runtimeapi.ImageFsInfoResponse{}, nil
				},
				node:        func() nodeUsage { return nodeUsage{at: at} },
				memCapacity: func() (int64, error) { return 1, nil },
			}
			got, err := s.get(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Pods) != len(tt.want) {
				t.Fatalf("%d pods, want %d", len(got.Pods), len(tt.want))
			}
			for _, p := range got.Pods {
				w := tt.want[p.PodRef.Name]
				switch {
				case w == nil && p.ProcessStats != nil:
					t.Errorf("%s: process_stats %+v, want none", p.PodRef.Name, *p.ProcessStats)
				case w != nil && (p.ProcessStats == nil || p.ProcessStats.ProcessCount == nil):
					t.Errorf("%s: no process_count, want %d", p.PodRef.Name, *w)
				case w != nil && *p.ProcessStats.ProcessCount != *w:
					t.Errorf("%s: process_count %d, want %d", p.PodRef.Name, *p.ProcessStats.ProcessCount, *w)
				}
			}
		})
	}
}

func ptr(n uint64) *uint64 { return &n }
