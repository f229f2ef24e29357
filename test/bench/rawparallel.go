package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/crivk/crivk/cri"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The raw lane is the floor of the latency goals, so it must not lose to
// an agent by the way it sends its calls. All at once (one goroutine per
// pod, no bound) is not always the fastest on a saturated runtime: in the
// 2026-11-26 06:41 run raw's 250-pod batch took 43.1 s to create and
// crivk's, with its default of 8 sandboxes at once, 37.4 s (0.87x). So
// the raw lane runs each W2/W3 batch once per setting of Plan.RawParallelism
// and keeps, per batch size and per phase, the run with the shortest batch
// lag; every setting's lag is kept in Batch.Trials and the report names the
// winner.
//
// A setting is the number of sandbox calls in flight at once
// (RunPodSandbox when creating; StopPodSandbox and RemovePodSandbox when
// removing), 0 for no bound; container calls are never bounded. That is
// crivk's own --max-parallel-sandboxes, measured best at 8 of 0, 4, 8 and
// 16 for crivk (docs/benchmarks.md, 2026-11-25): with the same setting the
// raw lane does crivk's CRI work without crivk, the floor the goals mean.
// A pod waiting for its turn counts from the batch's start, as a pod waits
// in an agent's queue.

// tunable is a driver whose batches can run at a chosen parallelism (the
// raw lane's).
type tunable interface {
	// setParallelism bounds the sandbox calls in flight from the next
	// create or remove on (0: no bound).
	setParallelism(n int)
}

// Trial is one run of a batch at one parallelism setting.
type Trial struct {
	// Parallelism is the bound on sandbox calls in flight, 0: none.
	Parallelism int `json:"parallelism"`
	// Lag is the batch lag in seconds, NaN (null) if the run failed.
	Lag   Num    `json:"lag"`
	Error string `json:"error,omitempty"`
}

// parallelismName is how the report names a setting.
func parallelismName(n int) string {
	if n == 0 {
		return "no bound"
	}
	return strconv.Itoa(n)
}

// parseParallelism reads -raw-parallelism: comma-separated bounds, 0 for
// none ("": the plan's).
func parseParallelism(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int
	seen := map[int]bool{}
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("-raw-parallelism %q: %q is not a bound (0 for none)", s, f)
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out, nil
}

// settingsFor are the settings worth running for a batch of n pods: a bound
// of n or more is the same as none, so it is left out (and "none" is kept
// once).
func settingsFor(settings []int, n int) []int {
	var out []int
	none := false
	for _, s := range settings {
		if s == 0 || s >= n {
			if !none {
				none = true
				out = append(out, 0)
			}
			continue
		}
		out = append(out, s)
	}
	return out
}

// batchRun is one run of a batch, created then removed: the W2 figures (nil
// if the creation failed), the W3 figures (nil if either failed) and the
// error.
type batchRun struct {
	parallelism int
	w2, w3      *Batch
	err         error
}

// bestRuns picks, among runs of the same batch at different settings, the
// W2 with the shortest lag and the W3 with the shortest lag (possibly from
// different runs: each is the floor of its phase), and fills both with
// every run's lag (Trials) and the winning setting. Only runs that did both
// phases count. If none did, it returns the first run's W2 (if any) and
// every run's error.
func bestRuns(runs []batchRun) (w2, w3 *Batch, err error) {
	var t2, t3 []Trial
	var errs []error
	for _, r := range runs {
		a, b := Trial{Parallelism: r.parallelism, Lag: Num(math.NaN())}, Trial{Parallelism: r.parallelism, Lag: Num(math.NaN())}
		if r.err != nil {
			errs = append(errs, fmt.Errorf("at parallelism %s: %w", parallelismName(r.parallelism), r.err))
			a.Error, b.Error = r.err.Error(), r.err.Error()
		}
		if r.w2 != nil {
			a.Lag = Num(r.w2.Lag)
		}
		if r.w3 != nil {
			b.Lag = Num(r.w3.Lag)
		}
		t2, t3 = append(t2, a), append(t3, b)
		if r.err != nil || r.w2 == nil || r.w3 == nil {
			continue
		}
		if w2 == nil || r.w2.Lag < w2.Lag {
			w2 = r.w2
		}
		if w3 == nil || r.w3.Lag < w3.Lag {
			w3 = r.w3
		}
	}
	if w2 == nil {
		if len(runs) > 0 && runs[0].w2 != nil {
			c := *runs[0].w2
			c.Trials = t2
			return &c, nil, joinErrs(errs)
		}
		return nil, nil, joinErrs(errs)
	}
	pick := func(b *Batch, trials []Trial) *Batch {
		c := *b
		c.Trials = trials
		for _, r := range runs {
			if r.w2 == b || r.w3 == b {
				p := r.parallelism
				c.Parallelism = &p
			}
		}
		return &c
	}
	return pick(w2, t2), pick(w3, t3), nil
}

// joinErrs is the runs' errors (never nil: no run is an error too).
func joinErrs(errs []error) error {
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return errors.New("no run of the batch")
}

// boundedSandboxes is a runtime whose sandbox calls (RunPodSandbox,
// StopPodSandbox, RemovePodSandbox) wait for one of a fixed number of
// slots; every other call goes straight through.
type boundedSandboxes struct {
	cri.RuntimeService
	slots chan struct{}
}

var _ cri.RuntimeService = (*boundedSandboxes)(nil)

// withSandboxBound returns rs with at most n sandbox calls in flight (n =
// 0: rs itself).
func withSandboxBound(rs cri.RuntimeService, n int) cri.RuntimeService {
	if n <= 0 {
		return rs
	}
	return &boundedSandboxes{RuntimeService: rs, slots: make(chan struct{}, n)}
}

func (b *boundedSandboxes) acquire(ctx context.Context) error {
	select {
	case b.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *boundedSandboxes) release() { <-b.slots }

func (b *boundedSandboxes) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	if err := b.acquire(ctx); err != nil {
		return "", fmt.Errorf("waiting for a sandbox slot: %w", err)
	}
	defer b.release()
	return b.RuntimeService.RunPodSandbox(ctx, config, handler)
}

func (b *boundedSandboxes) StopPodSandbox(ctx context.Context, id string) error {
	if err := b.acquire(ctx); err != nil {
		return fmt.Errorf("waiting for a sandbox slot: %w", err)
	}
	defer b.release()
	return b.RuntimeService.StopPodSandbox(ctx, id)
}

func (b *boundedSandboxes) RemovePodSandbox(ctx context.Context, id string) error {
	if err := b.acquire(ctx); err != nil {
		return fmt.Errorf("waiting for a sandbox slot: %w", err)
	}
	defer b.release()
	return b.RuntimeService.RemovePodSandbox(ctx, id)
}
