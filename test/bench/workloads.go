package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math"
	"strings"
	"time"

	"github.com/crivk/crivk/test/procfs"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/clock"
)

// Plan says how much of each workload a run does.
type Plan struct {
	W1Count        int           `json:"w1Count"`
	Batches        []int         `json:"batches"`
	W4Count        int           `json:"w4Count"`
	SteadyPods     []int         `json:"steadyPods"`
	SteadyDuration time.Duration `json:"steadyDuration"`
	// RawSteadyDuration, if set, replaces SteadyDuration in the raw lane:
	// only containerd is measured there.
	RawSteadyDuration time.Duration `json:"rawSteadyDuration,omitempty"`
	// RawParallelism are the settings the raw lane runs each W2/W3 batch
	// at, keeping the best (rawparallel.go): bounds on its sandbox calls in
	// flight, 0 for none. Empty: one run, no bound.
	RawParallelism []int `json:"rawParallelism,omitempty"`
	// DensityFrom, if set, makes the batches of this size or more density
	// points: their goals are the node's health (Ready, lease age), not
	// ratios, so the raw lane runs them once, without a bound.
	DensityFrom int `json:"densityFrom,omitempty"`
	// Timeout bounds one step (a batch to be Running, a batch to be gone).
	Timeout time.Duration `json:"timeout"`
	// Only, if set, limits the run to these steps (w1, w2 with its W3,
	// w4, w5; the warm-up pod always runs); Repeat, if above 1, is how
	// many rounds of every lane a focused run makes (focus.go).
	Only   []string `json:"only,omitempty"`
	Repeat int      `json:"repeat,omitempty"`
}

// FullPlan is the plan with two cuts for time: W1 20 pods in
// sequence instead of 50 (p99 is then the highest sample but one,
// interpolated) and W5 windows of 30 s instead of 2 minutes (10 s in the raw
// lane, which has no agent to measure; 30 s still covers three periods of
// the agents' 10 s lease loop). Its batches are the 30, 110 and 250
// pods. The raw lane runs each batch with no bound and with 8 sandbox calls
// at once, crivk's own default, and keeps the best (rawparallel.go).
// The density point of 500 pods (issue #33: the node Ready and its lease
// never late with 500 pods on a 2-core machine, maxPods 500 for both agents)
// is a run of its own, BENCH_ONLY=w2 BENCH_BATCH_SIZES=500 make bench: a
// batch of this size or more (DensityFrom) runs once in the raw lane, and
// its goals are the node's health, not ratios to raw. On this machine a
// 500-pod batch takes minutes per lane (raw: 226 s to create, 152 s to
// delete), too long for the full plan.
// On a 2-core machine, where containerd creates 1.4 to 1.9 sandboxes a
// second, the full plan takes about 25 minutes. QuickPlan fits in 5 minutes
// for development.
var (
	FullPlan = Plan{W1Count: 20, Batches: []int{30, 110, 250}, W4Count: 10, SteadyPods: []int{0, 30, 110}, SteadyDuration: 30 * time.Second,
		RawSteadyDuration: 10 * time.Second, RawParallelism: []int{0, 8}, DensityFrom: 500, Timeout: 5 * time.Minute}
	QuickPlan = Plan{W1Count: 6, Batches: []int{20}, W4Count: 3, SteadyPods: []int{0, 20}, SteadyDuration: 8 * time.Second, RawParallelism: []int{0, 8}, Timeout: 2 * time.Minute}
)

// Batch is one W2 (create) or W3 (delete) batch.
type Batch struct {
	Size int `json:"size"`
	// Samples are the per-pod latencies in seconds.
	Samples []float64 `json:"samples"`
	PerPod  Summary   `json:"perPod"`
	// Lag is last seen - first call, in seconds.
	Lag float64 `json:"lag"`
	// PodsPerSecond is Size / Lag.
	PodsPerSecond float64 `json:"podsPerSecond"`
	// EarlyDeletions (W3, API lanes) counts pods whose object was gone
	// from the API while the runtime still ran a container of theirs,
	// sampled every second; NaN (null) where not measured.
	EarlyDeletions Num `json:"earlyDeletions"`
	// NodeNotReady and MaxLeaseAge (W2, API lanes): of the samples taken
	// every second while the batch was created, those where the agent's
	// node was not Ready, and the oldest its Lease was (seconds since its
	// renewTime); NaN (null) where not measured.
	NodeNotReady Num `json:"nodeNotReady"`
	MaxLeaseAge  Num `json:"maxLeaseAgeSeconds"`
	// CPU is where the machine's CPU went between the batch's first call
	// and its last pod seen (cpuwatch.go); nil where not measured.
	CPU *BatchCPU `json:"cpu,omitempty"`
	// Trials (raw lane, rawparallel.go) are this batch's lag at every
	// parallelism setting tried, and Parallelism the setting whose run
	// these figures are (0: no bound); nil where one setting ran.
	Trials      []Trial `json:"trials,omitempty"`
	Parallelism *int    `json:"parallelism,omitempty"`
}

// Steady is one W5 level.
type Steady struct {
	Pods    int     `json:"pods"`
	Seconds float64 `json:"seconds"`
	// AgentCPU and ContainerdCPU are in cores (1 = one core busy).
	// Unknown figures (no agent in the raw lane) are NaN, null in JSON.
	AgentCPU    Num `json:"agentCPU"`
	AgentRSSMiB Num `json:"agentRSSMiB"`
	AgentRSSMax Num `json:"agentRSSMaxMiB"`
	// AgentRSSFileMiB is the file-backed part of the RSS at the end of the
	// window: the binary's pages, not heap.
	AgentRSSFileMiB Num `json:"agentRSSFileMiB"`
	ContainerdCPU   Num `json:"containerdCPU"`
	APIRequests     Num `json:"apiRequestsPerSecond"`
	// APIRequestsByKind is APIRequests by kind ("update leases", "get
	// nodes", ...: requestKind), per second; nil without an agent.
	APIRequestsByKind map[string]float64 `json:"apiRequestsByKind,omitempty"`
}

// LaneResult is everything measured in one lane.
type LaneResult struct {
	Lane  string `json:"lane"`
	Error string `json:"error,omitempty"`
	// Variant is the crivk arguments of this run and Round its round, in
	// a focused run (focus.go); empty and 0 otherwise.
	Variant string    `json:"variant,omitempty"`
	Round   int       `json:"round,omitempty"`
	W1      Summary   `json:"w1"`
	W1Raw   []float64 `json:"w1Samples"`
	W2      []Batch   `json:"w2"`
	W3      []Batch   `json:"w3"`
	// W4 is exit -> seen from the scheduled exit T+F; W4Exit from the exit
	// time containerd recorded (ContainerStatus FinishedAt), which leaves
	// out busybox's own loop and exit lag; W4ExitLag is that lag
	// (containerd's exit - T+F), common to all lanes.
	W4           Summary   `json:"w4"`
	W4Raw        []float64 `json:"w4Samples"`
	W4Exit       Summary   `json:"w4FromExit"`
	W4ExitRaw    []float64 `json:"w4FromExitSamples"`
	W4ExitLag    Summary   `json:"w4ExitLag"`
	W4ExitLagRaw []float64 `json:"w4ExitLagSamples"`
	// W4Dropped counts samples discarded because the pod was not running
	// before its container's exit time.
	W4Dropped int      `json:"w4Dropped"`
	W5        []Steady `json:"w5"`
	// W1Breakdown (create and delete) and W2Breakdown (creation of each
	// batch) come from the agent's own /metrics; nil in the raw lane or
	// when a scrape failed.
	W1Breakdown *Breakdown   `json:"w1Breakdown,omitempty"`
	W2Breakdown []*Breakdown `json:"w2Breakdown,omitempty"`
}

// meters reads the processes a lane is measured on.
type meters struct {
	agentPID      int // 0: no agent (raw lane)
	containerdPID int
	requests      func() int64 // nil: no agent
	// requestsByKind counts them by kind (requestKind); nil: not counted.
	requestsByKind func() map[string]int64
	// scrape reads the agent's own counters (/metrics); nil: no agent.
	scrape func(ctx context.Context) (agentCounters, error)
}

// podFactory makes the benchmark's pods: pinned by nodeName, images present
// locally, IfNotPresent, no service account token or service links (pods
// of the same spec for every lane; nothing to fetch from the API).
type podFactory struct {
	ns, node, image, busybox, run string
}

const benchLabel = "crivk-bench"

func (f podFactory) pod(name string, c v1.Container, policy v1.RestartPolicy) *v1.Pod {
	grace := int64(30)
	no := false
	c.ImagePullPolicy = v1.PullIfNotPresent
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: f.ns, UID: types.UID(uuid.NewUUID()),
			Labels: map[string]string{benchLabel: f.run},
		},
		Spec: v1.PodSpec{
			NodeName:                      f.node,
			RestartPolicy:                 policy,
			TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			Containers:                    []v1.Container{c},
		},
	}
}

// sleeper exits on SIGTERM at once (the pause program).
func (f podFactory) sleeper(name string) *v1.Pod {
	return f.pod(name, v1.Container{Name: "c", Image: f.image}, v1.RestartPolicyAlways)
}

// exiter's container exits 0 at the wall-clock second at (whole seconds:
// busybox's date has no sub-second field), plus frac.
func (f podFactory) exiter(name string, at time.Time, frac time.Duration) *v1.Pod {
	script := fmt.Sprintf("until [ $(date +%%s) -ge %d ]; do sleep 0.01; done; sleep %.3f", at.Unix(), frac.Seconds())
	return f.pod(name, v1.Container{Name: "c", Image: f.busybox, Command: []string{"sh", "-c", script}}, v1.RestartPolicyNever)
}

func (f podFactory) sleepers(prefix string, from, to int) []*v1.Pod {
	var out []*v1.Pod
	for i := from; i < to; i++ {
		out = append(out, f.sleeper(fmt.Sprintf("%s-%d", prefix, i)))
	}
	return out
}

func spanSeconds(spans []span) []float64 {
	out := make([]float64, len(spans))
	for i, s := range spans {
		out[i] = s.End.Sub(s.Start).Seconds()
	}
	return out
}

// batchOf summarises one batch of spans.
func batchOf(spans []span) Batch {
	b := Batch{Size: len(spans), Samples: spanSeconds(spans)}
	b.PerPod = Summarize(b.Samples)
	if len(spans) == 0 {
		return b
	}
	first, last := spans[0].Start, spans[0].End
	for _, s := range spans {
		if s.Start.Before(first) {
			first = s.Start
		}
		if s.End.After(last) {
			last = s.End
		}
	}
	b.Lag = last.Sub(first).Seconds()
	if b.Lag > 0 {
		b.PodsPerSecond = float64(b.Size) / b.Lag
	}
	return b
}

// workloads runs W1..W5 on one lane through d, filling res as it goes (a
// failure keeps what was measured before it).
type workloads struct {
	d     driver
	f     podFactory
	plan  Plan
	m     meters
	clock clock.WithTicker
	logf  func(format string, args ...any)
	// jitter returns W4's sub-second exit offset, uniform in [0, 1 s):
	// exits on whole seconds would all meet a periodic relist (the
	// kubelet's PLEG ticks every second) at the same phase.
	jitter func() time.Duration
	// cpu, if set, measures the CPU of each W2 and W3 batch.
	cpu *cpuSampler
	// skip are the steps (w4, w5) this lane does not run whatever the
	// plan says: the rawapi lane's agent measures neither.
	skip map[string]bool
}

// runs reports whether this lane runs step.
func (w *workloads) runs(step string) bool { return w.plan.runs(step) && !w.skip[step] }

func (w *workloads) step(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, w.plan.Timeout)
}

func (w *workloads) createAndRemove(ctx context.Context, pods []*v1.Pod) ([]span, []span, error) {
	return w.createAndRemoveThen(ctx, pods, nil, nil)
}

// scrape reads the agent's counters; false in the raw lane or on an error
// (logged: the breakdown is a plus, not the benchmark).
func (w *workloads) scrape(ctx context.Context) (agentCounters, bool) {
	if w.m.scrape == nil {
		return agentCounters{}, false
	}
	c, err := w.m.scrape(ctx)
	if err != nil {
		w.logf("breakdown: %v", err)
		return agentCounters{}, false
	}
	return c, true
}

// createAndRemoveThen creates pods, calls between (if set) once they run,
// then removes them. If cpu and w.cpu are set, cpu[0] gets the CPU of the
// creation (first call to last pod seen) and cpu[1] that of the removal.
func (w *workloads) createAndRemoveThen(ctx context.Context, pods []*v1.Pod, between func(), cpu *[2]*BatchCPU) ([]span, []span, error) {
	measure := func(i int, f func() ([]span, error)) ([]span, error) {
		if cpu == nil || w.cpu == nil {
			return f()
		}
		win := w.cpu.begin()
		spans, err := f()
		cpu[i] = win.end()
		return spans, err
	}
	sctx, cancel := w.step(ctx)
	defer cancel()
	up, err := measure(0, func() ([]span, error) { return w.d.create(sctx, pods) })
	if err != nil {
		return nil, nil, err
	}
	if between != nil {
		between()
	}
	dctx, cancel2 := w.step(ctx)
	defer cancel2()
	down, err := measure(1, func() ([]span, error) { return w.d.remove(dctx, pods) })
	return up, down, err
}

func (w *workloads) run(ctx context.Context, res *LaneResult) error {
	// Warm-up: one throw-away pod (image, runtime and agent caches).
	w.logf("warm-up pod")
	if _, _, err := w.createAndRemove(ctx, []*v1.Pod{w.f.sleeper("warmup")}); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}

	if w.runs("w1") {
		if err := w.w1(ctx, res); err != nil {
			return err
		}
	}
	var failed []error
	if w.runs("w2") {
		failed = w.batches(ctx, res)
		if ctx.Err() != nil {
			return errors.Join(append(failed, ctx.Err())...)
		}
	}
	// The batch failures are the lane's error, once W4 and W5 are done.
	err := w.rest(ctx, res)
	return errors.Join(append(failed, err)...)
}

// w1 runs W1: single pods in sequence.
func (w *workloads) w1(ctx context.Context, res *LaneResult) error {
	w.logf("W1: %d single pods in sequence", w.plan.W1Count)
	w1Before, w1Scraped := w.scrape(ctx)
	for i := 0; i < w.plan.W1Count; i++ {
		up, _, err := w.createAndRemove(ctx, []*v1.Pod{w.f.sleeper(fmt.Sprintf("w1-%d", i))})
		if err != nil {
			return fmt.Errorf("W1 pod %d: %w", i, err)
		}
		res.W1Raw = append(res.W1Raw, spanSeconds(up)...)
	}
	res.W1 = Summarize(res.W1Raw)
	if after, ok := w.scrape(ctx); ok && w1Scraped {
		res.W1Breakdown = breakdownOf(w1Before, after, w.plan.W1Count)
	}
	return nil
}

// batches runs W2 and W3: each batch created at once, then deleted. It
// returns the failures of the batches (a failed batch stops the larger
// ones); the caller checks ctx. A tunable driver (the raw lane) runs each
// batch once per setting of the plan's RawParallelism and keeps the best
// (rawparallel.go).
func (w *workloads) batches(ctx context.Context, res *LaneResult) []error {
	var failed []error
	t, tuned := w.d.(tunable)
	for _, n := range w.plan.Batches {
		var w2, w3 *Batch
		var err error
		if settings := settingsFor(w.plan.RawParallelism, n); tuned && len(settings) > 0 && !w.plan.density(n) {
			var runs []batchRun
			for _, s := range settings {
				t.setParallelism(s)
				w.logf("W2/W3: batch of %d at parallelism %s", n, parallelismName(s))
				r := w.batch(ctx, n, res)
				r.parallelism = s
				runs = append(runs, r)
				if ctx.Err() != nil {
					break
				}
			}
			t.setParallelism(0)
			w2, w3, err = bestRuns(runs)
			if err == nil {
				w.logf("W2/W3 batch of %d: best W2 lag %.2f s at parallelism %s, best W3 lag %.2f s at %s (of %s)", n,
					w2.Lag, parallelismName(*w2.Parallelism), w3.Lag, parallelismName(*w3.Parallelism), trialSummary(w2.Trials, w3.Trials))
			}
		} else {
			r := w.batch(ctx, n, res)
			w2, w3, err = r.w2, r.w3, r.err
		}
		if w2 != nil {
			res.W2 = append(res.W2, *w2)
		}
		if err != nil {
			// A batch that failed (timed out) loses its own figures only:
			// its pods were removed (batch); the larger batches are
			// skipped (they would fail the same way) and W4 and W5 still
			// run.
			failed = append(failed, fmt.Errorf("W2/W3 batch of %d: %w", n, err))
			break
		}
		res.W3 = append(res.W3, *w3)
	}
	return failed
}

// density reports whether the batch of n pods is a density point.
func (p Plan) density(n int) bool { return p.DensityFrom > 0 && n >= p.DensityFrom }

// trialSummary is every setting's W2 and W3 lag, for the log.
func trialSummary(w2, w3 []Trial) string {
	var parts []string
	for i := range w2 {
		parts = append(parts, fmt.Sprintf("%s: W2 %.2f s, W3 %.2f s", parallelismName(w2[i].Parallelism), float64(w2[i].Lag), float64(w3[i].Lag)))
	}
	return strings.Join(parts, "; ")
}

// batch runs one batch of n pods, created at once then deleted, with its
// breakdown (appended to res), CPU, node health and early deletions. On a
// failure the batch's pods are removed before it returns.
func (w *workloads) batch(ctx context.Context, n int, res *LaneResult) batchRun {
	w.logf("W2/W3: batch of %d", n)
	pods := w.f.sleepers(fmt.Sprintf("w2-%d", n), 0, n)
	before, scraped := w.scrape(ctx)
	var cpu [2]*BatchCPU
	up, down, err := w.createAndRemoveThen(ctx, pods, func() {
		if after, ok := w.scrape(ctx); ok && scraped {
			res.W2Breakdown = append(res.W2Breakdown, breakdownOf(before, after, n))
		}
	}, &cpu)
	for i, c := range cpu {
		if c != nil {
			w.logf("%s batch of %d: CPU (core-seconds): %s", [2]string{"W2", "W3"}[i], n, c)
		}
	}
	var out batchRun
	if up != nil {
		b := batchOf(up)
		b.CPU = cpu[0]
		b.NodeNotReady, b.MaxLeaseAge = Num(math.NaN()), Num(math.NaN())
		if nh, ok := w.d.(interface {
			lastNodeHealth() (int, int, time.Duration, bool)
		}); ok {
			if samples, notReady, age, ok := nh.lastNodeHealth(); ok {
				b.NodeNotReady, b.MaxLeaseAge = Num(notReady), Num(age.Seconds())
				w.logf("W2 batch of %d: node not Ready in %d of %d samples, lease at most %.1f s old", n, notReady, samples, age.Seconds())
			}
		}
		out.w2 = &b
	}
	if err != nil {
		out.err = err
		w.logf("W2/W3 batch of %d failed, removing its pods: %v", n, err)
		if down == nil {
			dctx, cancel := w.step(ctx)
			if _, rerr := w.d.remove(dctx, pods); rerr != nil {
				w.logf("removing the failed batch of %d: %v", n, rerr)
			}
			cancel()
		}
		return out
	}
	b := batchOf(down)
	b.CPU = cpu[1]
	b.EarlyDeletions = Num(math.NaN())
	if ec, ok := w.d.(interface{ earlyDeletions() int }); ok {
		b.EarlyDeletions = Num(ec.earlyDeletions())
		w.logf("W3 batch of %d: %d pod objects gone while a container of theirs still ran", n, ec.earlyDeletions())
	}
	out.w3 = &b
	return out
}

// rest runs W4 and W5 (those the plan runs).
func (w *workloads) rest(ctx context.Context, res *LaneResult) error {
	if w.runs("w4") {
		if err := w.w4(ctx, res); err != nil {
			return err
		}
	}
	if !w.runs("w5") {
		return nil
	}
	return w.w5(ctx, res)
}

// w4 runs W4: container exits, one pod at a time.
func (w *workloads) w4(ctx context.Context, res *LaneResult) error {
	w.logf("W4: %d container exits", w.plan.W4Count)
	for i := 0; len(res.W4Raw) < w.plan.W4Count; i++ {
		if i >= 2*w.plan.W4Count {
			return fmt.Errorf("W4: %d of %d samples dropped (pods not running before their exit time)", res.W4Dropped, i)
		}
		smp, ok, err := w.exitOnce(ctx, fmt.Sprintf("w4-%d", i))
		if err != nil {
			return fmt.Errorf("W4 pod %d: %w", i, err)
		}
		if !ok {
			res.W4Dropped++
			continue
		}
		res.W4Raw = append(res.W4Raw, smp.fromScheduled())
		if !smp.exited.IsZero() {
			res.W4ExitRaw = append(res.W4ExitRaw, smp.fromExit())
			res.W4ExitLagRaw = append(res.W4ExitLagRaw, smp.exitLag())
		}
	}
	res.W4 = Summarize(res.W4Raw)
	res.W4Exit = Summarize(res.W4ExitRaw)
	res.W4ExitLag = Summarize(res.W4ExitLagRaw)
	return nil
}

// w5 runs W5: the steady levels, pods added from one level to the next.
func (w *workloads) w5(ctx context.Context, res *LaneResult) error {
	var steady []*v1.Pod
	defer func() {
		if len(steady) > 0 {
			dctx, cancel := w.step(ctx)
			defer cancel()
			if _, err := w.d.remove(dctx, steady); err != nil {
				w.logf("W5: removing the steady pods: %v", err)
			}
		}
	}()
	for _, n := range w.plan.SteadyPods {
		if more := w.f.sleepers("w5", len(steady), n); len(more) > 0 {
			sctx, cancel := w.step(ctx)
			_, err := w.d.create(sctx, more)
			cancel()
			steady = append(steady, more...)
			if err != nil {
				return fmt.Errorf("W5 with %d pods: %w", n, err)
			}
		}
		if quiet, waited := w.settle(ctx); !quiet {
			w.logf("W5: %d pods: the agent still sent API requests after %s; measuring anyway", n, waited)
		}
		w.logf("W5: %d pods for %s", n, w.plan.SteadyDuration)
		s, err := w.measure(ctx, n)
		if err != nil {
			return fmt.Errorf("W5 with %d pods: %w", n, err)
		}
		res.W5 = append(res.W5, s)
	}
	return nil
}

// settleQuiet is how long the agent must send no API request before a W5
// window opens, and settleMax how long settle waits for that at most.
const (
	settleQuiet = 3 * time.Second
	settleMax   = 20 * time.Second
)

// settle waits until the agent has sent no API request for settleQuiet (a
// steady state: the previous step's tail, the status writes and deletion
// of the pods just removed, is not counted in the next window), for at
// most settleMax. It returns at once in the raw lane (no agent).
func (w *workloads) settle(ctx context.Context) (quiet bool, waited time.Duration) {
	if w.m.requests == nil {
		return true, 0
	}
	// Times are the ticks' own: what the counter showed at each tick.
	t0 := w.clock.Now()
	tick := w.clock.NewTicker(time.Second)
	defer tick.Stop()
	last, since := w.m.requests(), t0
	for {
		var now time.Time
		select {
		case <-ctx.Done():
			return false, w.clock.Since(t0)
		case now = <-tick.C():
		}
		if n := w.m.requests(); n != last {
			last, since = n, now
		}
		if now.Sub(since) >= settleQuiet {
			return true, now.Sub(t0)
		}
		if now.Sub(t0) >= settleMax {
			return false, now.Sub(t0)
		}
	}
}

// w4Sample is one W4 measurement.
type w4Sample struct {
	// scheduled is the exit the container's script aims at (T+F).
	scheduled time.Time
	// exited is the exit containerd recorded (ContainerStatus FinishedAt).
	exited time.Time
	// seen is when the status change was seen: the watch event showing the
	// container terminated (raw lane: ContainerStatus saying EXITED).
	seen time.Time
}

// fromScheduled is seen - T+F: the agent's latency plus busybox's own lag
// between T+F and its actual exit.
func (s w4Sample) fromScheduled() float64 { return s.seen.Sub(s.scheduled).Seconds() }

// fromExit is seen - containerd's exit time: the agent's latency alone
// (plus containerd's own exit handling, common to all lanes).
func (s w4Sample) fromExit() float64 { return s.seen.Sub(s.exited).Seconds() }

// exitLag is containerd's exit time - T+F: busybox's loop and exit lag.
func (s w4Sample) exitLag() float64 { return s.exited.Sub(s.scheduled).Seconds() }

// exitOnce starts a pod whose container exits at a known second and
// measures exit -> seen. ok is false when the pod was not running before
// that second.
func (w *workloads) exitOnce(ctx context.Context, name string) (w4Sample, bool, error) {
	// Whole seconds: the container compares `date +%s`. Two seconds of
	// margin covers a slow start; later starts are dropped.
	at := w.clock.Now().Add(2 * time.Second).Truncate(time.Second).Add(time.Second)
	frac := time.Duration(0)
	if w.jitter != nil {
		frac = w.jitter()
	}
	p := w.f.exiter(name, at, frac)
	sctx, cancel := w.step(ctx)
	defer cancel()
	up, err := w.d.create(sctx, []*v1.Pod{p})
	if err != nil {
		return w4Sample{}, false, err
	}
	smp := w4Sample{scheduled: at.Add(frac)}
	if smp.seen, err = w.d.waitExit(sctx, p); err != nil {
		return w4Sample{}, false, err
	}
	// Before remove: the container and its status go with the pod. A
	// missing exit time loses that sample's containerd-referenced figures
	// only (logged), not the lane.
	if smp.exited, err = w.d.exitedAt(sctx, p); err != nil {
		w.logf("W4 %s: containerd's exit time: %v", name, err)
		smp.exited = time.Time{}
	}
	if _, err := w.d.remove(sctx, []*v1.Pod{p}); err != nil {
		return w4Sample{}, false, err
	}
	if !up[0].End.Before(at) {
		return w4Sample{}, false, nil
	}
	return smp, true, nil
}

// measure samples the agent and containerd for the plan's steady duration.
func (w *workloads) measure(ctx context.Context, pods int) (Steady, error) {
	nan := Num(math.NaN())
	s := Steady{Pods: pods, AgentCPU: nan, AgentRSSMiB: nan, AgentRSSMax: nan, AgentRSSFileMiB: nan, APIRequests: nan}
	cpu := func(pid int) float64 {
		if pid == 0 {
			return math.NaN()
		}
		v, err := procfs.ProcessCPU(pid)
		if err != nil {
			log.Printf("W5: %v", err)
			return math.NaN()
		}
		return v
	}
	var req0 int64
	var kinds0 map[string]int64
	if w.m.requests != nil {
		req0 = w.m.requests()
	}
	if w.m.requestsByKind != nil {
		kinds0 = w.m.requestsByKind()
	}
	a0, c0, t0 := cpu(w.m.agentPID), cpu(w.m.containerdPID), w.clock.Now()
	var rss []float64
	sampleRSS := func() error {
		if w.m.agentPID == 0 {
			return nil
		}
		r, err := procfs.ProcessRSS(w.m.agentPID)
		if err != nil {
			return fmt.Errorf("agent RSS: %w", err)
		}
		rss = append(rss, float64(r)/(1<<20))
		return nil
	}
	// One ticker, no second timer: RSS is sampled every second and the
	// window ends at the first tick past the duration.
	tick := w.clock.NewTicker(time.Second)
	defer tick.Stop()
	for w.clock.Since(t0) < w.plan.SteadyDuration {
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-tick.C():
		}
		if err := sampleRSS(); err != nil {
			return s, err
		}
	}
	// A window whose ticks all came before the loop looked (a loaded
	// machine, or a clock stepped ahead) still has one RSS sample.
	if len(rss) == 0 {
		if err := sampleRSS(); err != nil {
			return s, err
		}
	}
	el := w.clock.Since(t0).Seconds()
	s.Seconds = el
	s.AgentCPU = Num((cpu(w.m.agentPID) - a0) / el)
	s.ContainerdCPU = Num((cpu(w.m.containerdPID) - c0) / el)
	if w.m.agentPID != 0 {
		if f, err := procfs.ProcessRSSFile(w.m.agentPID); err == nil {
			s.AgentRSSFileMiB = Num(float64(f) / (1 << 20))
		}
	}
	if len(rss) > 0 {
		sum := Summarize(rss)
		s.AgentRSSMiB, s.AgentRSSMax = Num(sum.Mean), Num(sum.Max)
	}
	if w.m.requests != nil {
		s.APIRequests = Num(float64(w.m.requests()-req0) / el)
	}
	if w.m.requestsByKind != nil {
		s.APIRequestsByKind = map[string]float64{}
		for k, n := range w.m.requestsByKind() {
			if d := n - kinds0[k]; d > 0 {
				s.APIRequestsByKind[k] = float64(d) / el
			}
		}
		w.logf("W5: %d pods: API requests by kind (in %.0f s): %s", pods, el, kindSummary(s.APIRequestsByKind, el))
	}
	return s, nil
}
