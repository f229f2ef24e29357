package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	testingclock "k8s.io/utils/clock/testing"
)

func TestParseParallelism(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []int
		err      bool
	}{
		{name: "empty: the plan's", in: ""},
		{name: "settings in order", in: "0, 8,16", want: []int{0, 8, 16}},
		{name: "duplicates once", in: "8,0,8", want: []int{8, 0}},
		{name: "negative", in: "0,-1", err: true},
		{name: "not a number", in: "none", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseParallelism(tc.in)
			if (err != nil) != tc.err || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseParallelism(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
			}
		})
	}
}

func TestSettingsFor(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings []int
		n        int
		want     []int
	}{
		{name: "no settings: one plain run", settings: nil, n: 30, want: nil},
		{name: "each bound below the batch", settings: []int{0, 8, 16}, n: 30, want: []int{0, 8, 16}},
		// A bound of the batch's size or more is no bound: run once.
		{name: "bounds at or above the batch are no bound", settings: []int{0, 8, 16}, n: 8, want: []int{0}},
		{name: "order kept, no bound where it first falls", settings: []int{16, 4, 0}, n: 10, want: []int{0, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := settingsFor(tc.settings, tc.n); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("settingsFor(%v, %d) = %v, want %v", tc.settings, tc.n, got, tc.want)
			}
		})
	}
}

func TestBestRuns(t *testing.T) {
	b := func(lag float64) *Batch { return &Batch{Size: 10, Lag: lag} }
	boom := errors.New("timed out")
	for _, tc := range []struct {
		name string
		runs []batchRun
		// wantW2/wantW3: the winning setting and lag; -1: no batch.
		wantW2, wantW3       int
		wantW2Lag, wantW3Lag float64
		wantErr              bool
		wantTrials           int
	}{
		{name: "one run", runs: []batchRun{{parallelism: 0, w2: b(5), w3: b(4)}},
			wantW2: 0, wantW3: 0, wantW2Lag: 5, wantW3Lag: 4, wantTrials: 1},
		// Each phase's floor, from different runs.
		{name: "best of each phase", runs: []batchRun{{parallelism: 0, w2: b(5), w3: b(3)}, {parallelism: 8, w2: b(4), w3: b(3.5)}},
			wantW2: 8, wantW3: 0, wantW2Lag: 4, wantW3Lag: 3, wantTrials: 2},
		// A run that failed does not count, however short its creation.
		{name: "failed run left out", runs: []batchRun{{parallelism: 0, w2: b(1), err: boom}, {parallelism: 8, w2: b(4), w3: b(3.5)}},
			wantW2: 8, wantW3: 8, wantW2Lag: 4, wantW3Lag: 3.5, wantTrials: 2},
		{name: "tie: the first", runs: []batchRun{{parallelism: 0, w2: b(4), w3: b(3)}, {parallelism: 8, w2: b(4), w3: b(3)}},
			wantW2: 0, wantW3: 0, wantW2Lag: 4, wantW3Lag: 3, wantTrials: 2},
		// Every run failed: the first run's creation is kept, as a failed
		// batch of a single run keeps it, and the errors are returned.
		{name: "every run failed", runs: []batchRun{{parallelism: 0, w2: b(6), err: boom}, {parallelism: 8, err: boom}},
			wantW2: -1, wantW3: -1, wantW2Lag: 6, wantErr: true, wantTrials: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w2, w3, err := bestRuns(tc.runs)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			if tc.wantErr && !errors.Is(err, boom) {
				t.Errorf("error %v does not wrap the runs' errors", err)
			}
			check := func(phase string, got *Batch, setting int, lag float64) {
				t.Helper()
				if setting < 0 {
					if phase == "W3" && got != nil {
						t.Errorf("%s = %+v, want none", phase, got)
					}
					if phase == "W2" && (got == nil || got.Lag != lag || got.Parallelism != nil || len(got.Trials) != tc.wantTrials) {
						t.Errorf("%s = %+v, want the first run's, lag %v, no winner, %d trials", phase, got, lag, tc.wantTrials)
					}
					return
				}
				if got == nil || got.Lag != lag || got.Parallelism == nil || *got.Parallelism != setting || len(got.Trials) != tc.wantTrials {
					t.Errorf("%s = %+v, want lag %v at %d with %d trials", phase, got, lag, setting, tc.wantTrials)
				}
			}
			check("W2", w2, tc.wantW2, tc.wantW2Lag)
			check("W3", w3, tc.wantW3, tc.wantW3Lag)
		})
	}
	// A failed run's trial says so and has no W3 lag.
	w2, _, _ := bestRuns([]batchRun{{parallelism: 0, w2: b(1), err: boom}, {parallelism: 8, w2: b(4), w3: b(3.5)}})
	if tr := w2.Trials[0]; tr.Parallelism != 0 || tr.Error == "" || float64(tr.Lag) != 1 {
		t.Errorf("failed trial %+v", tr)
	}
}

// tunedFake is fakeDriver whose latencies depend on the parallelism set.
type tunedFake struct {
	*fakeDriver
	upAt, downAt map[int]time.Duration
	set          []int
}

func (d *tunedFake) setParallelism(n int) {
	d.set = append(d.set, n)
	d.fakeDriver.up, d.fakeDriver.down = d.upAt[n], d.downAt[n]
}

// The raw lane's batches run once per setting; the figures are the best
// per phase, with every setting's lag and the winner recorded; a batch
// no larger than a bound runs once, and so does a density point.
func TestWorkloadsTunedBatches(t *testing.T) {
	c := testingclock.NewFakeClock(time.Unix(5000, 0))
	d := &tunedFake{fakeDriver: &fakeDriver{clock: c, up: time.Second, down: time.Second, live: map[string]bool{}},
		upAt: map[int]time.Duration{0: 3 * time.Second, 8: 2 * time.Second}, downAt: map[int]time.Duration{0: time.Second, 8: 4 * time.Second}}
	w := &workloads{d: d, f: podFactory{ns: "ns", node: "n", image: "pause", busybox: "busybox", run: "r"},
		plan: Plan{Batches: []int{5, 20, 30}, RawParallelism: []int{0, 8}, DensityFrom: 30, Only: []string{"w2"}, Timeout: time.Minute}, clock: c, logf: t.Logf}
	var res LaneResult
	if err := w.run(context.Background(), &res); err != nil {
		t.Fatalf("run: %v", err)
	}
	// warm-up; the batch of 5 once (8 is no bound for it); 20 twice; the
	// density point of 30 once, as it was.
	if fmt.Sprint(d.created) != "[1 5 20 20 30]" || fmt.Sprint(d.set) != "[0 0 0 8 0]" {
		t.Errorf("created %v with settings %v", d.created, d.set)
	}
	if len(res.W2) != 3 || len(res.W3) != 3 {
		t.Fatalf("W2 %+v W3 %+v", res.W2, res.W3)
	}
	if b := res.W2[2]; b.Size != 30 || b.Trials != nil || b.Parallelism != nil {
		t.Errorf("density point %+v, want one run", b)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 0.01 }
	if b := res.W2[1]; !near(b.Lag, 2.019) || b.Parallelism == nil || *b.Parallelism != 8 || len(b.Trials) != 2 || !near(float64(b.Trials[0].Lag), 3.019) {
		t.Errorf("W2 of 20 = lag %v at %v, trials %+v; want 2.02 s at 8", b.Lag, b.Parallelism, b.Trials)
	}
	if b := res.W3[1]; !near(b.Lag, 1) || b.Parallelism == nil || *b.Parallelism != 0 || len(b.Trials) != 2 {
		t.Errorf("W3 of 20 = lag %v at %v, trials %+v; want 1 s with no bound", b.Lag, b.Parallelism, b.Trials)
	}
	if len(d.live) != 0 {
		t.Errorf("pods left live: %v", d.live)
	}
	var md strings.Builder
	r := &Results{Plan: w.plan, Lanes: []LaneResult{{Lane: "raw", W2: res.W2, W3: res.W3}}}
	r.writeRawTrials(&md)
	for _, want := range []string{"| batch | phase | no bound | 8 | best at |", "| 20 pods | W2 create | 3.02 | **2.02** | 8 |", "| 20 pods | W3 delete | **1.00** | 4.00 | no bound |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("raw trials table lacks %q:\n%s", want, md.String())
		}
	}
}

// gatedRuntime holds every RunPodSandbox and StopPodSandbox until the test
// lets one through, counting the calls in flight.
type gatedRuntime struct {
	*critest.FakeRuntimeService
	gate              chan struct{}
	inFlight, maxSeen atomic.Int32
}

func (r *gatedRuntime) enter() {
	n := r.inFlight.Add(1)
	for {
		m := r.maxSeen.Load()
		if n <= m || r.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	<-r.gate
	r.inFlight.Add(-1)
}

func (r *gatedRuntime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	r.enter()
	return r.FakeRuntimeService.RunPodSandbox(ctx, config, handler)
}

func (r *gatedRuntime) StopPodSandbox(ctx context.Context, id string) error {
	r.enter()
	return r.FakeRuntimeService.StopPodSandbox(ctx, id)
}

// With a bound of 2, the raw driver has at most 2 sandbox calls in flight
// when creating and when removing 5 pods, and every pod still runs and is
// removed.
func TestRawDriverSandboxBound(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs := &gatedRuntime{FakeRuntimeService: critest.NewFakeRuntimeService(), gate: make(chan struct{})}
	rt, err := cri.New(cri.Config{PodLogDir: t.TempDir()}, rs, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := newRawDriver(rt, testingclock.NewFakeClock(time.Unix(5000, 0)))
	d.rs = rs
	d.setParallelism(2)
	f := podFactory{ns: "ns", node: "n", image: "pause", run: "r"}
	pods := f.sleepers("p", 0, 5)
	for _, phase := range []struct {
		name string
		do   func() ([]span, error)
	}{
		{"create", func() ([]span, error) { return d.create(ctx, pods) }},
		{"remove", func() ([]span, error) { return d.remove(ctx, pods) }},
	} {
		var spans []span
		var derr error
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); spans, derr = phase.do() }()
		// Let the calls through one at a time, each once two are held:
		// were the bound not kept, more than two would be in flight.
		for i := 0; i < len(pods); i++ {
			held := min(2, len(pods)-i)
			if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				return rs.inFlight.Load() == int32(held), nil
			}); err != nil {
				t.Fatalf("%s: %d calls in flight, want %d: %v", phase.name, rs.inFlight.Load(), held, err)
			}
			rs.gate <- struct{}{}
		}
		wg.Wait()
		if derr != nil || len(spans) != len(pods) {
			t.Fatalf("%s: %d spans, %v", phase.name, len(spans), derr)
		}
		if m := rs.maxSeen.Load(); m != 2 {
			t.Errorf("%s: at most %d sandbox calls in flight, want 2", phase.name, m)
		}
	}
	if sbs, _ := rs.ListPodSandbox(ctx, nil); len(sbs) != 0 {
		t.Errorf("sandboxes left: %v", sbs)
	}
	// No bound: the runtime itself.
	if withSandboxBound(rs, 0) != cri.RuntimeService(rs) {
		t.Errorf("a bound of 0 wraps the runtime")
	}
}
