package healthz

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// DefaultContactBound is how long the API server may leave crivk's
// requests unanswered before the apiserver check fails: the node Lease is
// renewed every 10 s, so this is some 18 renewals; the PLEG's threshold.
const DefaultContactBound = 3 * time.Minute

// Contact records when the API server last answered one of crivk's
// requests: its WrapTransport goes into the API clients' rest.Config. Any
// HTTP status counts but 401 (the server does not take crivk's credential,
// which a restart, and a new client certificate, may mend); a transport
// error does not.
type Contact struct {
	clock clock.PassiveClock
	bound time.Duration
	// last is the Unix nanoseconds of the last answer, or of Start if
	// later; 0: not started. Written by every API request's goroutine.
	last    atomic.Int64
	started atomic.Bool
}

// NewContact returns a Contact that is not started. A nil clock is the
// real one; a non-positive bound is DefaultContactBound.
func NewContact(clk clock.PassiveClock, bound time.Duration) *Contact {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if bound <= 0 {
		bound = DefaultContactBound
	}
	return &Contact{clock: clk, bound: bound}
}

// Start begins the count: from now, Check fails after bound without an
// answer. crivk starts it once its API clients exist.
func (c *Contact) Start() {
	c.touch()
	c.started.Store(true)
}

// touch moves last to now unless it is already later.
func (c *Contact) touch() {
	now := c.clock.Now().UnixNano()
	for {
		old := c.last.Load()
		if old >= now || c.last.CompareAndSwap(old, now) {
			return
		}
	}
}

// WrapTransport is a rest.Config WrapTransport that records the answers
// of every request made through rt.
func (c *Contact) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	return contactTransport{next: rt, c: c}
}

type contactTransport struct {
	next http.RoundTripper
	c    *Contact
}

func (t contactTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil && resp.StatusCode != http.StatusUnauthorized {
		t.c.touch()
	}
	return resp, err
}

// Check fails when the API server has not answered for longer than the
// bound since Start; it passes before Start.
func (c *Contact) Check() error {
	if !c.started.Load() {
		return nil
	}
	last := time.Unix(0, c.last.Load())
	if d := c.clock.Since(last); d > c.bound {
		return fmt.Errorf("no answer from the API server for %v; bound is %v", d.Round(time.Second), c.bound)
	}
	return nil
}

// MinSyncLoopBound is the least bound of SyncLoopCheck, the kubelet's.
const MinSyncLoopBound = 5 * time.Minute

// SyncLoopCheck is the kubelet's syncloop check: it fails when the loop
// last began an iteration (latest) longer than max(2 × resync,
// MinSyncLoopBound) ago, and passes while latest is zero (not started).
func SyncLoopCheck(clk clock.PassiveClock, latest func() time.Time, resync time.Duration) func() error {
	if clk == nil {
		clk = clock.RealClock{}
	}
	bound := max(2*resync, MinSyncLoopBound)
	return func() error {
		last := latest()
		if last.IsZero() {
			return nil
		}
		if d := clk.Since(last); d > bound {
			return fmt.Errorf("the sync loop last ran %v ago; bound is %v", d.Round(time.Second), bound)
		}
		return nil
	}
}
