package stats

import (
	"testing"
	"time"
)

// TestCPURates: UsageNanoCores is 0 on a cgroup's first sample and then
// the CPU time gained over the time passed (cAdvisor's InstCpuStats); a
// sample closer than minRateWindow keeps the last rate; a counter that
// went down or a clock that went back starts over at 0; cgroups are apart.
func TestCPURates(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	type read struct {
		cgroup string
		at     time.Duration // after t0
		ns     uint64
		want   uint64
	}
	for name, reads := range map[string][]read{
		"first sample":  {{"/", 0, 5e9, 0}},
		"half a core":   {{"/", 0, 5e9, 0}, {"/", 10 * time.Second, 10e9, 5e8}},
		"two cores":     {{"/", 0, 0, 0}, {"/", 2 * time.Second, 4e9, 2e9}, {"/", 3 * time.Second, 4e9, 0}},
		"too close":     {{"/", 0, 0, 0}, {"/", 2 * time.Second, 2e9, 1e9}, {"/", 2*time.Second + time.Millisecond, 9e9, 1e9}, {"/", 4 * time.Second, 4e9, 1e9}},
		"counter reset": {{"/", 0, 5e9, 0}, {"/", 2 * time.Second, 1e9, 0}, {"/", 4 * time.Second, 2e9, 5e8}},
		"clock back":    {{"/", 10 * time.Second, 5e9, 0}, {"/", 0, 6e9, 0}, {"/", 2 * time.Second, 8e9, 1e9}},
		"apart":         {{"/", 0, 0, 0}, {"/kubepods", 0, 100, 0}, {"/", time.Second, 1e9, 1e9}, {"/kubepods", time.Second, 100 + 5e8, 5e8}},
	} {
		t.Run(name, func(t *testing.T) {
			r := newCPURates()
			for i, x := range reads {
				got := r.nanoCores(x.cgroup, t0.Add(x.at), x.ns)
				if got == nil || *got != x.want {
					t.Fatalf("read %d (%s at +%v, %d ns): %v nanocores, want %d", i, x.cgroup, x.at, x.ns, got, x.want)
				}
			}
		})
	}
	if got := (*cpuRates)(nil).nanoCores("/", t0, 1); got != nil {
		t.Errorf("nil rates gave %d, want none", *got)
	}
}
