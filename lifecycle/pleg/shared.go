package pleg

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Walker is what Shared needs of the runtime: the process' base
// *cri.Runtime, which lists every node's objects at once.
type Walker interface {
	// SnapshotNodes lists every crivk sandbox and container once and
	// splits them by node.
	SnapshotNodes(ctx context.Context) (*cri.NodeSnapshots, error)
}

var _ Walker = (*cri.Runtime)(nil)

// SharedConfig configures NewShared.
type SharedConfig struct {
	// Runtime is walked every Period and on Wake. Required.
	Runtime Walker
	// Clock defaults to clock.RealClock{}.
	Clock clock.WithTicker
	// Period, Wake and WakeSpacing are Config's, for the one walk of
	// every node (Period defaults to DefaultRelistPeriod).
	Period      time.Duration
	Wake        <-chan struct{}
	WakeSpacing time.Duration
	// ObserveWalk, if set, is told each walk's duration and whether it
	// failed. Optional.
	ObserveWalk func(duration time.Duration, err error)
}

// Shared walks the runtime once per period (and on wakes) for every node
// of a multi-node crivk and hands each node's PLEG its share (Feed). The
// diagram and the rules are in the package doc.
type Shared struct {
	rt      Walker
	clock   clock.WithTicker
	period  time.Duration
	wake    <-chan struct{}
	woken   *rate.Limiter
	observe func(time.Duration, error)

	mu sync.Mutex
	// feeds are the nodes' mailboxes by node name. Guarded by mu.
	feeds map[string]*Feed

	// walkMu serializes Walk.
	walkMu sync.Mutex
	// strangers are the node names of objects no feed asked for, each
	// logged once; unlabelled is whether objects without a node label
	// were logged. Guarded by walkMu.
	strangers  map[string]bool
	unlabelled bool
}

// NewShared checks cfg and fills its defaults.
func NewShared(cfg SharedConfig) (*Shared, error) {
	if cfg.Runtime == nil {
		return nil, errors.New("pleg: the shared walk needs a runtime")
	}
	if cfg.Period < 0 {
		return nil, fmt.Errorf("pleg: shared walk period %v must not be negative", cfg.Period)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Period == 0 {
		cfg.Period = DefaultRelistPeriod
	}
	return &Shared{rt: cfg.Runtime, clock: cfg.Clock, period: cfg.Period, wake: cfg.Wake, woken: wakeLimiter(cfg.WakeSpacing),
		observe: cfg.ObserveWalk, feeds: map[string]*Feed{}, strangers: map[string]bool{}}, nil
}

// Feed returns node's mailbox, made on the first call: give it to the
// node's PLEG (Config.Feed). Call it for every node before Run, so that
// the first walk reaches them all.
func (s *Shared) Feed(node string) *Feed {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.feeds[node]
	if !ok {
		f = &Feed{ready: make(chan struct{}, 1)}
		s.feeds[node] = f
	}
	return f
}

// Run walks at once, then every period and on wakes (spaced as a PLEG's
// woken relists), until ctx ends.
func (s *Shared) Run(ctx context.Context) {
	loop(ctx, s.clock, s.period, s.wake, s.woken, s.Walk)
}

// Walk lists the runtime once and puts each node's share, or the list's
// error, in every feed. It never waits for a node: a feed holds only the
// latest walk. Run calls it; it is exported for tests, and concurrent
// calls take turns.
func (s *Shared) Walk(ctx context.Context) {
	s.walkMu.Lock()
	defer s.walkMu.Unlock()
	start := s.clock.Now()
	all, err := s.rt.SnapshotNodes(ctx)
	if s.observe != nil {
		s.observe(s.clock.Since(start), err)
	}
	if err != nil {
		err = fmt.Errorf("the shared walk of the runtime: %w", err)
	}
	s.mu.Lock()
	feeds := make(map[string]*Feed, len(s.feeds))
	for n, f := range s.feeds {
		feeds[n] = f
	}
	s.mu.Unlock()
	for n, f := range feeds {
		w := walk{start: start, err: err}
		if err == nil {
			w.snap = all.Nodes[n]
			if w.snap == nil {
				w.snap = &cri.Snapshot{Pods: map[types.UID]map[string]cri.State{}, Refs: map[types.UID]cri.PodRef{}}
			}
		}
		f.put(w)
	}
	if err == nil {
		s.logStrangers(ctx, all, feeds)
	}
}

// logStrangers logs, once per name and process, the objects labelled for
// a node this process does not serve (--node-count shrank) and, once,
// those with no node label: nobody's, left alone. walkMu must be held.
func (s *Shared) logStrangers(ctx context.Context, all *cri.NodeSnapshots, feeds map[string]*Feed) {
	var names []string
	for n := range all.Nodes {
		if _, ok := feeds[n]; !ok && !s.strangers[n] {
			s.strangers[n] = true
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		log.G(ctx).WithField("node", n).WithField("pods", len(all.Nodes[n].Pods)).
			Warn("the runtime holds crivk objects of a node this process does not serve; they are left alone (docs/scale.md)")
	}
	if all.Unlabelled > 0 && !s.unlabelled {
		s.unlabelled = true
		log.G(ctx).WithField("objects", all.Unlabelled).
			Warn("the runtime holds crivk objects without a node label (a single-node crivk's); they are left alone (docs/scale.md)")
	}
}

// walk is one shared walk as a node sees it: when it started, and the
// node's share or the list's error.
type walk struct {
	start time.Time
	snap  *cri.Snapshot
	err   error
}

// Feed is one node's mailbox of shared walks: it holds the latest walk the
// node's PLEG has not taken yet, so that a slow node skips walks instead
// of holding the others or the walk up.
type Feed struct {
	// ready has a token while pending is set (capacity 1).
	ready chan struct{}
	mu    sync.Mutex
	// pending is the latest walk not taken; guarded by mu.
	pending *walk
}

// put replaces the pending walk with w and signals it without blocking.
func (f *Feed) put(w walk) {
	f.mu.Lock()
	f.pending = &w
	f.mu.Unlock()
	select {
	case f.ready <- struct{}{}:
	default:
	}
}

// take returns the pending walk and empties the mailbox.
func (f *Feed) take() (walk, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pending == nil {
		return walk{}, false
	}
	w := *f.pending
	f.pending = nil
	return w, true
}
