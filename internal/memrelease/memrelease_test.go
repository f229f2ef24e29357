package memrelease

import (
	"context"
	"sync"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

const mib = 1 << 20

func TestShouldRelease(t *testing.T) {
	for name, tc := range map[string]struct {
		prev, cur, last Sample
		want            bool
	}{
		"quiet after a burst": {
			prev: Sample{GCCycles: 40, Allocated: 300 * mib}, cur: Sample{GCCycles: 40, Allocated: 301 * mib},
			last: Sample{GCCycles: 3, Allocated: 10 * mib}, want: true,
		},
		"busy: a cycle completed since the previous check": {
			prev: Sample{GCCycles: 39, Allocated: 290 * mib}, cur: Sample{GCCycles: 40, Allocated: 300 * mib},
			last: Sample{GCCycles: 3, Allocated: 10 * mib},
		},
		"idle: too little allocated since the last release": {
			prev: Sample{GCCycles: 5, Allocated: 40 * mib}, cur: Sample{GCCycles: 5, Allocated: 41 * mib},
			last: Sample{GCCycles: 4, Allocated: 10 * mib},
		},
		"exactly the minimum": {
			prev: Sample{GCCycles: 5, Allocated: 74 * mib}, cur: Sample{GCCycles: 5, Allocated: 74 * mib},
			last: Sample{GCCycles: 4, Allocated: 10 * mib}, want: true,
		},
		"counter below the last release's (cannot happen): no release": {
			prev: Sample{GCCycles: 5}, cur: Sample{GCCycles: 5, Allocated: 1 * mib},
			last: Sample{GCCycles: 4, Allocated: 100 * mib},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := ShouldRelease(tc.prev, tc.cur, tc.last, 64*mib); got != tc.want {
				t.Errorf("ShouldRelease = %v, want %v", got, tc.want)
			}
		})
	}
}

// fakeRuntime is a runtime whose counters the test sets; a release runs
// one collection, as debug.FreeOSMemory does.
type fakeRuntime struct {
	mu       sync.Mutex
	s        Sample
	releases int
}

func (f *fakeRuntime) read() Sample { f.mu.Lock(); defer f.mu.Unlock(); return f.s }
func (f *fakeRuntime) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releases++
	f.s.GCCycles++
}
func (f *fakeRuntime) set(cycles, allocatedMiB uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.s = Sample{GCCycles: cycles, Allocated: allocatedMiB * mib}
}

// TestCheckSequence walks a burst, the quiet after it and an idle stretch
// check by check: one release per burst, none while busy or idle, and the
// release's own collection is not taken for activity.
func TestCheckSequence(t *testing.T) {
	rt := &fakeRuntime{}
	rt.set(2, 5)
	r, err := New(Config{Read: rt.read, Release: rt.release})
	if err != nil {
		t.Fatal(err)
	}
	r.prev, r.last = rt.read(), rt.read()
	steps := []struct {
		cycles, allocatedMiB uint64
		wantRelease          bool
	}{
		{2, 6, false},    // idle
		{10, 100, false}, // burst: collections
		{20, 200, false}, // burst
		{20, 201, true},  // quiet after the burst
		{21, 202, false}, // the release's collection (21) is not activity, too little allocated
		{21, 203, false}, // idle
		{22, 204, false}, // the forced collection of an idle process
		{22, 205, false}, // idle: too little since the release
	}
	for i, s := range steps {
		if s.cycles >= rt.read().GCCycles {
			rt.set(s.cycles, s.allocatedMiB)
		}
		if got := r.check(); got != s.wantRelease {
			t.Fatalf("step %d (%d cycles, %d MiB): released %v, want %v", i, s.cycles, s.allocatedMiB, got, s.wantRelease)
		}
	}
	if rt.releases != 1 {
		t.Errorf("releases = %d, want 1", rt.releases)
	}
}

// TestRunTicks checks that Run checks on its clock's ticks and stops with
// its context.
func TestRunTicks(t *testing.T) {
	rt := &fakeRuntime{}
	rt.set(1, 1)
	clk := testingclock.NewFakeClock(time.Unix(0, 0))
	released := make(chan struct{}, 1)
	r, err := New(Config{Read: rt.read, Clock: clk, Release: func() { rt.release(); released <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	deadline := time.After(10 * time.Second)
	for !clk.HasWaiters() {
		select {
		case <-deadline:
			t.Fatal("Run never waited on its ticker")
		case <-time.After(time.Millisecond):
		}
	}
	rt.set(1, 1+100) // a burst whose collections all completed before Run started
	clk.Step(DefaultInterval)
	select {
	case <-released:
	case <-deadline:
		t.Fatal("no release after a quiet interval that followed a burst")
	}
	cancel()
	select {
	case <-done:
	case <-deadline:
		t.Fatal("Run did not return when its context ended")
	}
}

func TestNewRejectsNegativeInterval(t *testing.T) {
	if _, err := New(Config{Interval: -time.Second}); err == nil {
		t.Error("New accepted a negative interval")
	}
}

func TestReadRuntime(t *testing.T) {
	s := ReadRuntime()
	if s.Allocated == 0 {
		t.Errorf("ReadRuntime = %+v: no bytes allocated", s)
	}
}
