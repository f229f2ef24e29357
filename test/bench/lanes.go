package main

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// lane is one way of running the node: raw CRI, kubelet or crivk.
type lane interface {
	Name() string
	// setup starts the lane (its agent, its watch) and returns how to act on
	// it and what to measure.
	setup(ctx context.Context) (driver, meters, error)
	// teardown stops what setup started; the pods left are for clean.
	teardown(ctx context.Context) error
}

// isolation cleans the node between lanes and checks it stays empty.
type isolation interface {
	// isolate returns nil once the node is empty, an error naming what is
	// left (and the last runtime or API error) when it cannot make it so.
	isolate(ctx context.Context) error
}

// runLanes runs the lanes one after another. Before each lane the node is
// made empty (iso.isolate); a lane whose node cannot be made empty is not
// run, as its figures would carry the previous lane's load, and the next
// lane tries again: one lane's failure, or its left-overs, never stop the
// later lanes. A lane's failure is recorded in its result. The node is
// cleaned once more at the end. laneDone, if set, gets the results so far
// after each lane (the harness saves them: a run stopped later keeps them).
func runLanes(ctx context.Context, iso isolation, lanes []lane, work func(context.Context, driver, meters, *LaneResult) error, logf func(string, ...any), laneDone func([]LaneResult)) []LaneResult {
	var out []LaneResult
	defer func() {
		if laneDone != nil {
			laneDone(out)
		}
	}()
	for _, l := range lanes {
		if laneDone != nil && len(out) > 0 {
			laneDone(out)
		}
		res := LaneResult{Lane: l.Name()}
		name := l.Name()
		if d, ok := l.(interface{ describe(*LaneResult) }); ok {
			d.describe(&res)
			name = fmt.Sprintf("%s, round %d", res.setting(), res.Round)
		}
		started := time.Now()
		if err := iso.isolate(ctx); err != nil {
			res.Error = fmt.Sprintf("not run: %v", err)
			logf("lane %s: %s (after %s)", name, res.Error, time.Since(started).Round(time.Second))
			out = append(out, res)
			continue
		}
		logf("lane %s: start (node isolated in %s)", name, time.Since(started).Round(time.Second))
		started = time.Now()
		d, m, err := l.setup(ctx)
		if err == nil {
			err = work(ctx, d, m, &res)
		}
		if terr := l.teardown(ctx); terr != nil {
			err = errors.Join(err, fmt.Errorf("teardown: %w", terr))
		}
		if err != nil {
			res.Error = err.Error()
			logf("lane %s: %v", name, err)
		}
		logf("lane %s: done in %s", name, time.Since(started).Round(time.Second))
		out = append(out, res)
	}
	if err := iso.isolate(ctx); err != nil {
		logf("final clean-up: %v", err)
	}
	return out
}
