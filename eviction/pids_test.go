package eviction

import (
	"fmt"
	"testing"

	evictionapi "github.com/crivk/crivk/eviction/api"
	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// TestRankPIDs: under pid.available pressure, the kubelet's
// rankPIDPressure: lower priority first, then more processes first (the
// summary's process_stats.process_count, which nodeapi/stats fills from
// the pod's container cgroups); a pod without stats first.
func TestRankPIDs(t *testing.T) {
	type p struct {
		name      string
		prio      int32
		processes *uint64 // nil: process_stats absent
		noStats   bool
	}
	n := func(v uint64) *uint64 { return &v }
	tests := map[string]struct {
		pods []p
		want string
	}{
		"more processes first": {
			pods: []p{{"few", 0, n(3), false}, {"forker", 0, n(500), false}, {"mid", 0, n(40), false}},
			want: "[forker mid few]",
		},
		"lower priority first, whatever the processes": {
			pods: []p{{"forker-high", 1000, n(500), false}, {"few-low", 0, n(3), false}},
			want: "[few-low forker-high]",
		},
		"no process_stats counts as none": {
			pods: []p{{"uncounted", 0, nil, false}, {"one", 0, n(1), false}},
			want: "[one uncounted]",
		},
		"no stats first": {
			pods: []p{{"forker", 0, n(500), false}, {"unmeasured", 0, nil, true}},
			want: "[unmeasured forker]",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var pods []*v1.Pod
			s := &statsapi.Summary{}
			for _, x := range tc.pods {
				pp := pod(x.name, x.prio, "", "")
				pods = append(pods, pp)
				if x.noStats {
					continue
				}
				ps := podStats(pp, 0)
				if x.processes != nil {
					ps.ProcessStats = &statsapi.ProcessStats{ProcessCount: x.processes}
				}
				s.Pods = append(s.Pods, ps)
			}
			rankFor(evictionapi.SignalPIDAvailable, false, podStatsOf(s))(pods)
			var got []string
			for _, pp := range pods {
				got = append(got, pp.Name)
			}
			if fmt.Sprint(got) != tc.want {
				t.Errorf("order %v, want %s", got, tc.want)
			}
		})
	}
}
