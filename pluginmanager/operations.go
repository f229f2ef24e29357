package pluginmanager

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	"k8s.io/utils/clock"
)

// The kubelet's exponential back-off of a failed operation
// (pkg/util/goroutinemap/exponentialbackoff).
const (
	initialDurationBeforeRetry = 500 * time.Millisecond
	maxDurationBeforeRetry     = 2*time.Minute + 2*time.Second
)

// errPending and errBackoff are why operations.run started nothing; the
// reconciler tries again at a later round without logging them (the
// kubelet's goroutinemap.IsAlreadyExists and
// exponentialbackoff.IsExponentialBackoff).
var (
	errPending = errors.New("an operation is already running")
	errBackoff = errors.New("no retries permitted yet")
)

// operations runs at most one operation per key (a socket path) at a
// time, and after an operation failed none for that key before its
// back-off expired: the kubelet's goroutinemap with
// exponentialBackOffOnError. A success forgets the key's back-off.
type operations struct {
	clock clock.PassiveClock
	// done is called after each operation, outside the lock.
	done func()
	wg   sync.WaitGroup

	mu sync.Mutex
	// ops holds each key with an operation running or a back-off
	// pending. Guarded by mu.
	ops map[string]*operation
}

// operation is a key's running flag and back-off.
type operation struct {
	pending   bool
	lastErr   error
	lastError time.Time
	// wait is how long after lastError no operation starts; 0 before a
	// failure.
	wait time.Duration
}

func newOperations(clk clock.PassiveClock, done func()) *operations {
	return &operations{clock: clk, done: done, ops: map[string]*operation{}}
}

// run starts fn for key on its own goroutine, or returns errPending or
// errBackoff (wrapped with the key) and starts nothing.
func (o *operations) run(ctx context.Context, key string, fn func() error) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	op, ok := o.ops[key]
	if ok {
		if op.pending {
			return fmt.Errorf("operation for %q: %w", key, errPending)
		}
		if o.clock.Since(op.lastError) <= op.wait {
			return fmt.Errorf("operation for %q failed at %v, no retries permitted until %v (%v): %w",
				key, op.lastError, op.lastError.Add(op.wait), op.wait, errBackoff)
		}
	} else {
		op = &operation{}
		o.ops[key] = op
	}
	op.pending = true
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		err := fn()
		o.complete(ctx, key, err)
		if o.done != nil {
			o.done()
		}
	}()
	return nil
}

// complete ends key's operation: forgotten after a success; after a
// failure, its back-off doubles (0.5s first, 2m2s at most).
func (o *operations) complete(ctx context.Context, key string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	op := o.ops[key]
	if err == nil {
		delete(o.ops, key)
		return
	}
	switch {
	case op.wait == 0:
		op.wait = initialDurationBeforeRetry
	case 2*op.wait > maxDurationBeforeRetry:
		op.wait = maxDurationBeforeRetry
	default:
		op.wait *= 2
	}
	op.pending = false
	op.lastErr = err
	op.lastError = o.clock.Now()
	// The kubelet's GenerateNoRetriesPermittedMsg.
	log.G(ctx).Errorf("Operation for %q failed. No retries permitted until %v (durationBeforeRetry %v). Error: %v",
		key, op.lastError.Add(op.wait), op.wait, err)
}

// wait waits for the operations started.
func (o *operations) wait() { o.wg.Wait() }
