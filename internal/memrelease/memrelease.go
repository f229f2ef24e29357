package memrelease

import (
	"context"
	"fmt"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"k8s.io/utils/clock"
)

// Defaults of Config.
const (
	DefaultInterval     = 10 * time.Second
	DefaultMinAllocated = 64 << 20
)

// Sample is what one check reads from the runtime.
type Sample struct {
	// GCCycles counts the completed GC cycles since the process started.
	GCCycles uint64
	// Allocated counts the bytes allocated on the heap since the process
	// started.
	Allocated uint64
}

// Config is what Run needs; New fills the zero fields with the defaults.
type Config struct {
	// Interval is the time between two checks (DefaultInterval).
	Interval time.Duration
	// MinAllocated is the allocation, in bytes, since the last release
	// below which nothing is released (DefaultMinAllocated).
	MinAllocated uint64
	// Read reads the runtime's counters (ReadRuntime).
	Read func() Sample
	// Release returns the heap's garbage and free pages to the OS
	// (debug.FreeOSMemory).
	Release func()
	// Clock ticks the checks (the real clock).
	Clock clock.WithTicker
}

// Releaser checks the runtime's counters and releases memory after a
// burst; see the package documentation.
type Releaser struct {
	cfg Config
	// prev is the sample of the previous check, last the one taken just
	// after the last release (or at start). Both only accessed from Run.
	prev, last Sample
}

// New validates cfg and fills its defaults.
func New(cfg Config) (*Releaser, error) {
	if cfg.Interval < 0 {
		return nil, fmt.Errorf("memrelease: negative interval %v", cfg.Interval)
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.MinAllocated == 0 {
		cfg.MinAllocated = DefaultMinAllocated
	}
	if cfg.Read == nil {
		cfg.Read = ReadRuntime
	}
	if cfg.Release == nil {
		cfg.Release = debug.FreeOSMemory
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Releaser{cfg: cfg}, nil
}

// Run checks every Interval until ctx ends.
func (r *Releaser) Run(ctx context.Context) {
	r.prev = r.cfg.Read()
	r.last = r.prev
	t := r.cfg.Clock.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			r.check()
		}
	}
}

// check is one check: it releases when the process is quiet after a
// burst, and reports whether it did.
func (r *Releaser) check() bool {
	cur := r.cfg.Read()
	release := ShouldRelease(r.prev, cur, r.last, r.cfg.MinAllocated)
	if release {
		r.cfg.Release()
		// The release's own collection is not activity.
		cur = r.cfg.Read()
		r.last = cur
	}
	r.prev = cur
	return release
}

// ShouldRelease says whether to release at a check that read cur, after
// the check that read prev and the release after which last was read:
// no cycle completed since prev (quiet) and at least minAllocated bytes
// were allocated since last (a burst).
func ShouldRelease(prev, cur, last Sample, minAllocated uint64) bool {
	quiet := cur.GCCycles == prev.GCCycles
	burst := cur.Allocated >= last.Allocated && cur.Allocated-last.Allocated >= minAllocated
	return quiet && burst
}

// The runtime/metrics names ReadRuntime reads.
const (
	metricGCCycles  = "/gc/cycles/total:gc-cycles"
	metricAllocated = "/gc/heap/allocs:bytes"
)

// ReadRuntime reads the counters from runtime/metrics.
func ReadRuntime() Sample {
	s := []metrics.Sample{{Name: metricGCCycles}, {Name: metricAllocated}}
	metrics.Read(s)
	var out Sample
	if s[0].Value.Kind() == metrics.KindUint64 {
		out.GCCycles = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		out.Allocated = s[1].Value.Uint64()
	}
	return out
}
