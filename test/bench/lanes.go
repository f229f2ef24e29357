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

// isolation cleans the node between lanes and checks it is empty.
type isolation interface {
	clean(ctx context.Context) error
	verify(ctx context.Context, timeout time.Duration) error
}

// runLanes runs the lanes one after another. Before each lane the node is
// cleaned and verified empty; a lane whose node cannot be made empty is not
// run (nor any after it), as its figures would carry the previous lane's
// load. A lane's failure is recorded in its result and the next lane runs.
// The node is cleaned once more at the end.
func runLanes(ctx context.Context, iso isolation, lanes []lane, work func(context.Context, driver, meters, *LaneResult) error, logf func(string, ...any)) []LaneResult {
	var out []LaneResult
	broken := error(nil)
	for _, l := range lanes {
		res := LaneResult{Lane: l.Name()}
		if broken == nil {
			cerr := iso.clean(ctx)
			if verr := iso.verify(ctx, time.Minute); verr != nil {
				broken = errors.Join(cerr, verr)
			}
		}
		if broken != nil {
			res.Error = fmt.Sprintf("not run: %v", broken)
			out = append(out, res)
			continue
		}
		logf("lane %s: start", l.Name())
		started := time.Now()
		d, m, err := l.setup(ctx)
		if err == nil {
			err = work(ctx, d, m, &res)
		}
		if terr := l.teardown(ctx); terr != nil {
			err = errors.Join(err, fmt.Errorf("teardown: %w", terr))
		}
		if err != nil {
			res.Error = err.Error()
			logf("lane %s: %v", l.Name(), err)
		}
		logf("lane %s: done in %s", l.Name(), time.Since(started).Round(time.Second))
		out = append(out, res)
	}
	if err := iso.clean(ctx); err != nil {
		logf("final clean-up: %v", err)
	}
	return out
}
