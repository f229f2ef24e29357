package main

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	testingclock "k8s.io/utils/clock/testing"
)

// fakeDriver "runs" pods with fixed latencies on a fake clock.
type fakeDriver struct {
	clock   *testingclock.FakeClock
	up      time.Duration
	down    time.Duration
	exitLag time.Duration // containerd's exit -> seen
	busyLag time.Duration // T+F -> containerd's exit
	mu      sync.Mutex
	live    map[string]bool
	created []int // batch sizes
	// failBatch makes create of a batch of that size start the pods but
	// fail (a timeout waiting for them).
	failBatch int
}

func (d *fakeDriver) create(_ context.Context, pods []*v1.Pod) ([]span, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.created = append(d.created, len(pods))
	start := d.clock.Now()
	var out []span
	for i, p := range pods {
		if d.live[p.Name] {
			return nil, fmt.Errorf("pod %s created twice", p.Name)
		}
		d.live[p.Name] = true
		// Each pod of a batch a little later than the one before.
		out = append(out, span{Name: p.Name, Start: start, End: start.Add(d.up + time.Duration(i)*time.Millisecond)})
	}
	if len(pods) == d.failBatch {
		return nil, fmt.Errorf("waiting for pods to be Running and ready: %w", context.DeadlineExceeded)
	}
	return out, nil
}

func (d *fakeDriver) remove(_ context.Context, pods []*v1.Pod) ([]span, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	start := d.clock.Now()
	var out []span
	for _, p := range pods {
		if !d.live[p.Name] {
			return nil, fmt.Errorf("pod %s removed but not live", p.Name)
		}
		delete(d.live, p.Name)
		out = append(out, span{Name: p.Name, Start: start, End: start.Add(d.down)})
	}
	return out, nil
}

// scheduledExit reads T+F back from the exiter's script (the workload
// computed T as now+2s truncated +1s).
func (d *fakeDriver) scheduledExit(p *v1.Pod) (time.Time, error) {
	at := d.clock.Now().Add(2 * time.Second).Truncate(time.Second).Add(time.Second)
	var frac float64
	script := p.Spec.Containers[0].Command[2]
	if _, err := fmt.Sscanf(script[strings.LastIndex(script, "sleep "):], "sleep %f", &frac); err != nil {
		return time.Time{}, fmt.Errorf("no final sleep in %q: %w", script, err)
	}
	return at.Add(time.Duration(frac * float64(time.Second))), nil
}

func (d *fakeDriver) waitExit(_ context.Context, p *v1.Pod) (time.Time, error) {
	at, err := d.scheduledExit(p)
	return at.Add(d.busyLag + d.exitLag), err
}

func (d *fakeDriver) exitedAt(_ context.Context, p *v1.Pod) (time.Time, error) {
	at, err := d.scheduledExit(p)
	return at.Add(d.busyLag), err
}

func TestWorkloadsRun(t *testing.T) {
	c := testingclock.NewFakeClock(time.Unix(5000, 0))
	d := &fakeDriver{clock: c, up: 800 * time.Millisecond, down: 2 * time.Second, exitLag: 300 * time.Millisecond, busyLag: 150 * time.Millisecond, live: map[string]bool{}}
	w := &workloads{d: d, f: podFactory{ns: "ns", node: "n", image: "pause", busybox: "busybox", run: "r"},
		plan: Plan{W1Count: 4, Batches: []int{3, 5}, W4Count: 2, Timeout: time.Minute}, clock: c, logf: t.Logf,
		jitter: func() time.Duration { return 370 * time.Millisecond }}
	var res LaneResult
	if err := w.run(context.Background(), &res); err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.W1.N != 4 || math.Abs(res.W1.P99-0.8) > 1e-9 {
		t.Errorf("W1 = %+v, want 4 samples of 0.8 s", res.W1)
	}
	if len(res.W2) != 2 || res.W2[1].Size != 5 {
		t.Fatalf("W2 = %+v, want batches of 3 and 5", res.W2)
	}
	// Batch of 5: the last pod is seen at 0.804 s.
	if b := res.W2[1]; math.Abs(b.Lag-0.804) > 1e-9 || math.Abs(b.PodsPerSecond-5/0.804) > 1e-9 {
		t.Errorf("W2 batch of 5: lag %v, pods/s %v", b.Lag, b.PodsPerSecond)
	}
	if len(res.W3) != 2 || math.Abs(res.W3[0].Lag-2) > 1e-9 {
		t.Errorf("W3 = %+v, want lag 2 s", res.W3)
	}
	if res.W4.N != 2 || math.Abs(res.W4.P50-0.45) > 1e-9 {
		t.Errorf("W4 from the scheduled exit = %+v, want 2 samples of 0.45 s", res.W4)
	}
	if res.W4Exit.N != 2 || math.Abs(res.W4Exit.P99-0.3) > 1e-9 {
		t.Errorf("W4 from containerd's exit = %+v, want 2 samples of 0.3 s", res.W4Exit)
	}
	if res.W4ExitLag.N != 2 || math.Abs(res.W4ExitLag.P50-0.15) > 1e-9 {
		t.Errorf("W4 exit lag = %+v, want 2 samples of 0.15 s", res.W4ExitLag)
	}
	if len(d.live) != 0 {
		t.Errorf("pods left live after the workloads: %v", d.live)
	}
	// warm-up, 4 W1 pods, batches of 3 and 5, 2 W4 pods.
	if fmt.Sprint(d.created) != "[1 1 1 1 1 3 5 1 1]" {
		t.Errorf("created batches %v", d.created)
	}
}

// A batch that fails loses its own figures only: its pods are removed, the
// larger batches are skipped, W4 still runs, and the lane's error names
// the batch.
func TestWorkloadsBatchFailure(t *testing.T) {
	c := testingclock.NewFakeClock(time.Unix(5000, 0))
	d := &fakeDriver{clock: c, up: 800 * time.Millisecond, down: 2 * time.Second, exitLag: 300 * time.Millisecond, live: map[string]bool{}, failBatch: 5}
	w := &workloads{d: d, f: podFactory{ns: "ns", node: "n", image: "pause", busybox: "busybox", run: "r"},
		plan: Plan{W1Count: 2, Batches: []int{3, 5, 7}, W4Count: 2, Timeout: time.Minute}, clock: c, logf: t.Logf}
	var res LaneResult
	err := w.run(context.Background(), &res)
	if err == nil || !strings.Contains(err.Error(), "W2/W3 batch of 5") {
		t.Fatalf("run error %v, want the batch of 5 named", err)
	}
	if len(res.W2) != 1 || len(res.W3) != 1 || res.W3[0].Size != 3 {
		t.Errorf("W2 %d batches, W3 %+v: want the batch of 3 only", len(res.W2), res.W3)
	}
	if res.W4Exit.N != 2 {
		t.Errorf("W4 = %+v, want 2 samples after the failed batch", res.W4Exit)
	}
	if len(d.live) != 0 {
		t.Errorf("pods left live: %v", d.live)
	}
	// warm-up, 2 W1 pods, batches of 3 and 5 (7 skipped), 2 W4 pods.
	if fmt.Sprint(d.created) != "[1 1 1 3 5 1 1]" {
		t.Errorf("created batches %v", d.created)
	}
}

func TestBatchOf(t *testing.T) {
	t0 := time.Unix(100, 0)
	b := batchOf([]span{
		{Name: "a", Start: t0, End: t0.Add(time.Second)},
		{Name: "b", Start: t0.Add(100 * time.Millisecond), End: t0.Add(3 * time.Second)},
		{Name: "c", Start: t0.Add(50 * time.Millisecond), End: t0.Add(2 * time.Second)},
	})
	if b.Size != 3 || b.Lag != 3 || b.PodsPerSecond != 1 {
		t.Errorf("batch %+v, want size 3, lag 3 s, 1 pod/s", b)
	}
	if math.Abs(b.PerPod.Max-2.9) > 1e-9 || math.Abs(b.PerPod.Min-1) > 1e-9 {
		t.Errorf("per-pod %+v, want min 1 max 2.9", b.PerPod)
	}
	if z := batchOf(nil); z.Size != 0 || z.Lag != 0 {
		t.Errorf("empty batch %+v", z)
	}
}

// measure reads CPU and RSS of a live process (this one) over the window.
func TestMeasureSelf(t *testing.T) {
	c := testingclock.NewFakeClock(time.Unix(0, 0))
	var reqs atomic.Int64
	reqs.Store(10)
	w := &workloads{plan: Plan{SteadyDuration: 3 * time.Second}, clock: c, logf: t.Logf,
		m: meters{agentPID: selfPID(), containerdPID: selfPID(), requests: reqs.Load,
			// All the new requests are lease renewals; the node GETs
			// happened before the window and are left out.
			requestsByKind: func() map[string]int64 { return map[string]int64{"update leases": reqs.Load(), "get nodes": 4} }}}
	done := make(chan struct{})
	var s Steady
	var err error
	go func() {
		defer close(done)
		s, err = w.measure(context.Background(), 7)
	}()
	// Step the fake clock one second at a time once measure's ticker
	// exists; 6 requests arrive per second.
	for stepped := 0; stepped < 3; {
		if c.HasWaiters() {
			reqs.Add(6)
			c.Step(time.Second)
			stepped++
		}
		runtime.Gosched()
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("measure did not return after the window")
	}
	if err != nil {
		t.Fatalf("measure: %v", err)
	}
	if s.Pods != 7 || s.Seconds != 3 {
		t.Errorf("steady %+v, want 7 pods over 3 s", s)
	}
	if math.Abs(float64(s.APIRequests)-6) > 1e-9 {
		t.Errorf("API requests %v/s, want 6", s.APIRequests)
	}
	if len(s.APIRequestsByKind) != 1 || math.Abs(s.APIRequestsByKind["update leases"]-6) > 1e-9 {
		t.Errorf("API requests by kind %v, want 6/s of update leases only", s.APIRequestsByKind)
	}
	if math.IsNaN(float64(s.AgentRSSFileMiB)) || s.AgentRSSFileMiB > s.AgentRSSMax {
		t.Errorf("file-backed RSS %v not measured or above the RSS %v", s.AgentRSSFileMiB, s.AgentRSSMax)
	}
	if math.IsNaN(float64(s.AgentRSSMiB)) || s.AgentRSSMiB <= 1 || math.IsNaN(float64(s.AgentCPU)) || s.AgentCPU < 0 {
		t.Errorf("agent figures %+v not measured", s)
	}
}

func TestW4Sample(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := w4Sample{scheduled: t0.Add(370 * time.Millisecond), exited: t0.Add(550 * time.Millisecond), seen: t0.Add(780 * time.Millisecond)}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"from the scheduled exit", s.fromScheduled(), 0.41},
		{"from containerd's exit", s.fromExit(), 0.23},
		{"busybox's exit lag", s.exitLag(), 0.18},
	} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if math.Abs(s.fromScheduled()-(s.exitLag()+s.fromExit())) > 1e-9 {
		t.Errorf("from the scheduled exit is not the exit lag plus from containerd's exit")
	}
}

// podExitedAt finds the pod's container by the io.kubernetes.pod.uid label,
// ignores other pods' and running containers, and reads FinishedAt in
// nanoseconds.
func TestPodExitedAt(t *testing.T) {
	ctx := context.Background()
	rs := critest.NewFakeRuntimeService()
	fin := time.Date(2026, 11, 22, 17, 0, 1, 234567891, time.UTC)
	c := func(id, uid string, st runtimeapi.ContainerState, finished time.Time) *critest.FakeContainer {
		fc := &critest.FakeContainer{ContainerStatus: runtimeapi.ContainerStatus{Id: id, State: st,
			Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
			Labels:   map[string]string{cri.LabelPodUID: uid}}}
		if !finished.IsZero() {
			fc.FinishedAt = finished.UnixNano()
		}
		return fc
	}
	rs.SetFakeContainers([]*critest.FakeContainer{
		c("mine", "uid-1", runtimeapi.ContainerState_CONTAINER_EXITED, fin),
		c("other-pod", "uid-2", runtimeapi.ContainerState_CONTAINER_EXITED, fin.Add(time.Second)),
		c("running", "uid-3", runtimeapi.ContainerState_CONTAINER_RUNNING, time.Time{}),
	})
	at, err := podExitedAt(ctx, rs, "uid-1")
	if err != nil {
		t.Fatal(err)
	}
	if !at.Equal(fin) {
		t.Errorf("exit time %v, want %v (nanoseconds kept)", at, fin)
	}
	if _, err := podExitedAt(ctx, rs, "uid-3"); err == nil || !strings.Contains(err.Error(), "no exited container") {
		t.Errorf("a pod whose container runs: error %v, want no exited container", err)
	}
	if _, err := podExitedAt(ctx, rs, "uid-9"); err == nil {
		t.Error("a pod without containers: no error")
	}
}

func TestWithSteady(t *testing.T) {
	for name, tc := range map[string]struct {
		pods    string
		d       time.Duration
		want    []int
		wantD   time.Duration
		wantErr bool
	}{
		"kept":          {want: QuickPlan.SteadyPods, wantD: QuickPlan.SteadyDuration},
		"levels":        {pods: "0, 30,110", want: []int{0, 30, 110}, wantD: QuickPlan.SteadyDuration},
		"window":        {d: time.Minute, want: QuickPlan.SteadyPods, wantD: time.Minute},
		"not a count":   {pods: "0,x", wantErr: true},
		"negative":      {pods: "-1", wantErr: true},
		"negative time": {d: -time.Second, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := withSteady(QuickPlan, tc.pods, tc.d)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("withSteady(%q, %s) = %+v, want an error", tc.pods, tc.d, p)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.SteadyPods, tc.want) || p.SteadyDuration != tc.wantD {
				t.Errorf("withSteady(%q, %s): levels %v for %s, want %v for %s", tc.pods, tc.d, p.SteadyPods, p.SteadyDuration, tc.want, tc.wantD)
			}
			if p.W1Count != QuickPlan.W1Count {
				t.Errorf("withSteady changed W1: %+v", p)
			}
		})
	}
}

// A variant's NAME=VALUE words go to crivk's environment, the rest are
// its arguments, after -crivk-args.
func TestAgentCommandVariantEnv(t *testing.T) {
	o := options{maxPods: 250, qps: 50, burst: 100, crivkArgs: "--sync-interval=5s"}
	cmd, err := agentCommand("/r", "crivk", "/k", o, []string{"GOGC=50", "--max-parallel-sandboxes=4", "GOMEMLIMIT=40MiB"})
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(cmd.Args[1:], " ")
	if !strings.HasSuffix(args, "--sync-interval=5s --max-parallel-sandboxes=4") || strings.Contains(args, "GOGC") {
		t.Errorf("arguments %q", args)
	}
	env := strings.Join(cmd.Env, " ")
	if !strings.Contains(env, "GOGC=50") || !strings.Contains(env, "GOMEMLIMIT=40MiB") || !strings.Contains(env, "CRIVK_ADMIN_KUBECONFIG=1") {
		t.Errorf("environment lacks the variant's settings: %q", cmd.Env[len(cmd.Env)-3:])
	}
	if _, err := agentCommand("/r", "kubelet", "/k", o, []string{"GOGC=50"}); err == nil {
		t.Error("a variant for the kubelet lane must be refused")
	}
}

// settle returns once the agent has been quiet for settleQuiet, and gives
// up after settleMax.
func TestSettle(t *testing.T) {
	for _, tc := range []struct {
		name      string
		busyFor   int // seconds with a request each
		wantQuiet bool
		wantSecs  int
	}{
		{"quiet at once", 0, true, 3},
		{"a tail of 4 s", 4, true, 7},
		{"never quiet", 100, false, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testingclock.NewFakeClock(time.Unix(0, 0))
			var reqs atomic.Int64
			// settle reads the counter once before its ticker, then once
			// per tick: each read after the first is reported, so the
			// clock moves only once the previous tick was taken.
			polled := make(chan struct{}, 1)
			var reads atomic.Int64
			counter := func() int64 {
				if reads.Add(1) > 1 {
					polled <- struct{}{}
				}
				return reqs.Load()
			}
			w := &workloads{clock: c, logf: t.Logf, m: meters{requests: counter}}
			type result struct {
				quiet  bool
				waited time.Duration
			}
			done := make(chan result, 1)
			go func() {
				q, d := w.settle(context.Background())
				done <- result{q, d}
			}()
			for !c.HasWaiters() {
				runtime.Gosched()
			}
			for s := 0; ; s++ {
				if s > 60 {
					t.Fatal("settle did not return")
				}
				if s < tc.busyFor {
					reqs.Add(1)
				}
				c.Step(time.Second)
				check := func(r result) {
					if r.quiet != tc.wantQuiet || r.waited != time.Duration(tc.wantSecs)*time.Second {
						t.Fatalf("settle: quiet %v after %s, want %v after %ds", r.quiet, r.waited, tc.wantQuiet, tc.wantSecs)
					}
				}
				select {
				case <-polled:
				case r := <-done:
					check(r)
					return
				}
				select {
				case r := <-done:
					check(r)
					return
				case <-polled: // not possible before the next step
					t.Fatal("settle read the counter twice in one tick")
				case <-time.After(20 * time.Millisecond):
				}
			}
		})
	}
	if q, d := (&workloads{}).settle(context.Background()); !q || d != 0 {
		t.Errorf("raw lane: settle %v %s, want at once", q, d)
	}
}
