package lifecycle

import (
	"testing"
	"time"
)

// TestCrashLoopBackOff: the restart back-off's delays for a configured
// crashLoopBackOff.maxContainerRestartPeriod, as the kubelet's
// newCrashLoopBackOff.
func TestCrashLoopBackOff(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		maxPeriod            time.Duration
		wantInitial, wantMax time.Duration
	}{
		{"unset: the kubelet's 10s to 300s", 0, 10 * time.Second, 300 * time.Second},
		{"the default spelt out", 300 * time.Second, 10 * time.Second, 300 * time.Second},
		{"above the first delay", time.Minute, 10 * time.Second, time.Minute},
		{"below the first delay: it is also the first", time.Second, time.Second, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			initial, longest := crashLoopBackOff(tc.maxPeriod)
			if initial != tc.wantInitial || longest != tc.wantMax {
				t.Errorf("crashLoopBackOff(%s) = %s, %s; want %s, %s", tc.maxPeriod, initial, longest, tc.wantInitial, tc.wantMax)
			}
		})
	}
}
