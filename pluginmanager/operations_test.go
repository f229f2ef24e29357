package pluginmanager

import (
	"context"
	"errors"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// TestOperationsBackoff: one operation per key at a time; after a failure
// none before the back-off (0.5s, doubling, at most 2m2s); a success
// forgets it.
func TestOperationsBackoff(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1_000_000, 0))
	ended := make(chan struct{}, 1)
	o := newOperations(clk, func() { ended <- struct{}{} })
	ctx := context.Background()
	fail := errors.New("dial failed")

	// runOnce starts fn for "k" and waits for its end.
	runOnce := func(fn func() error) error {
		t.Helper()
		if err := o.run(ctx, "k", fn); err != nil {
			return err
		}
		<-ended
		return nil
	}

	release := make(chan struct{})
	if err := o.run(ctx, "k", func() error { <-release; return fail }); err != nil {
		t.Fatal(err)
	}
	if err := o.run(ctx, "k", func() error { return nil }); !errors.Is(err, errPending) {
		t.Errorf("a second operation while one runs: %v, want errPending", err)
	}
	if err := o.run(ctx, "other", func() error { return nil }); err != nil {
		t.Errorf("another key: %v", err)
	}
	<-ended
	close(release)
	<-ended

	var want time.Duration = initialDurationBeforeRetry
	for i := 0; i < 12; i++ {
		if err := o.run(ctx, "k", func() error { return nil }); !errors.Is(err, errBackoff) {
			t.Fatalf("failure %d: right after it, %v, want errBackoff", i+1, err)
		}
		clk.Step(want)
		if err := o.run(ctx, "k", func() error { return nil }); !errors.Is(err, errBackoff) {
			t.Fatalf("failure %d: %v after it, %v, want errBackoff (the back-off is %v)", i+1, want, err, want)
		}
		clk.Step(time.Millisecond)
		if err := runOnce(func() error { return fail }); err != nil {
			t.Fatalf("failure %d: %v after it: %v", i+1, want+time.Millisecond, err)
		}
		want *= 2
		if want > maxDurationBeforeRetry {
			want = maxDurationBeforeRetry
		}
	}
	if got := o.ops["k"].wait; got != maxDurationBeforeRetry {
		t.Errorf("back-off after 13 failures: %v, want %v", got, maxDurationBeforeRetry)
	}
	clk.Step(maxDurationBeforeRetry + time.Millisecond)
	if err := runOnce(func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := runOnce(func() error { return nil }); err != nil {
		t.Errorf("after a success: %v, want no back-off", err)
	}
}
