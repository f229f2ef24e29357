package pleg

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// sharedWalker is a fake Walker: each call returns next's result.
type sharedWalker struct {
	mu    sync.Mutex
	calls int
	next  func() (*cri.NodeSnapshots, error)
}

func (w *sharedWalker) SnapshotNodes(context.Context) (*cri.NodeSnapshots, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	return w.next()
}

func (w *sharedWalker) set(next func() (*cri.NodeSnapshots, error)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.next = next
}

func (w *sharedWalker) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls
}

// nodes is a walk's result.
func nodes(m map[string]map[types.UID]map[string]cri.State) func() (*cri.NodeSnapshots, error) {
	return func() (*cri.NodeSnapshots, error) {
		out := &cri.NodeSnapshots{Nodes: map[string]*cri.Snapshot{}}
		for n, pods := range m {
			out.Nodes[n] = world(pods)
		}
		return out, nil
	}
}

func TestSharedWalk(t *testing.T) {
	boom := errors.New("boom")
	podA := map[types.UID]map[string]cri.State{"pa": {"sa": cri.SandboxReady}}
	podB := map[types.UID]map[string]cri.State{"pb": {"sb": cri.SandboxReady, "cb": cri.StateRunning}}
	tests := map[string]struct {
		next    func() (*cri.NodeSnapshots, error)
		want    map[string]*cri.Snapshot // by feed; nil: the error
		wantErr bool
	}{
		"each node its share": {
			next: nodes(map[string]map[types.UID]map[string]cri.State{"a": podA, "b": podB}),
			want: map[string]*cri.Snapshot{"a": world(podA), "b": world(podB), "c": world(map[types.UID]map[string]cri.State{})},
		},
		"a node this process does not serve is nobody's": {
			next: nodes(map[string]map[types.UID]map[string]cri.State{"a": podA, "z": podB}),
			want: map[string]*cri.Snapshot{"a": world(podA), "b": world(map[types.UID]map[string]cri.State{}), "c": world(map[types.UID]map[string]cri.State{})},
		},
		"a failed list reaches every node": {
			next:    func() (*cri.NodeSnapshots, error) { return nil, boom },
			wantErr: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(cacheT0)
			w := &sharedWalker{next: tc.next}
			var observed []error
			s, err := NewShared(SharedConfig{Runtime: w, Clock: clk, ObserveWalk: func(_ time.Duration, err error) { observed = append(observed, err) }})
			if err != nil {
				t.Fatal(err)
			}
			feeds := map[string]*Feed{"a": s.Feed("a"), "b": s.Feed("b"), "c": s.Feed("c")}
			if s.Feed("a") != feeds["a"] {
				t.Error("Feed made a second mailbox for the same node")
			}
			s.Walk(context.Background())
			if w.count() != 1 || len(observed) != 1 {
				t.Errorf("one walk: %d lists, %d observed, want 1 each", w.count(), len(observed))
			}
			for n, f := range feeds {
				got, ok := f.take()
				if !ok {
					t.Fatalf("node %s: no walk", n)
				}
				if !got.start.Equal(cacheT0) {
					t.Errorf("node %s: walk started %v, want %v", n, got.start, cacheT0)
				}
				if tc.wantErr {
					if !errors.Is(got.err, boom) || got.snap != nil {
						t.Errorf("node %s: got %v, %v; want the list's error", n, got.snap, got.err)
					}
					continue
				}
				if got.err != nil || !reflect.DeepEqual(got.snap.Pods, tc.want[n].Pods) || !reflect.DeepEqual(got.snap.Refs, tc.want[n].Refs) {
					t.Errorf("node %s: got %+v, %v; want %+v", n, got.snap, got.err, tc.want[n])
				}
				if _, ok := f.take(); ok {
					t.Errorf("node %s: a walk taken twice", n)
				}
			}
		})
	}
}

// A node that takes nothing never holds the walk up: its mailbox keeps
// the latest walk only, while the other nodes get each one.
func TestSharedSlowNode(t *testing.T) {
	clk := clocktesting.NewFakeClock(cacheT0)
	w := &sharedWalker{next: nodes(nil)}
	s, err := NewShared(SharedConfig{Runtime: w, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	slow, fast := s.Feed("slow"), s.Feed("fast")
	for i := range 3 {
		done := make(chan struct{})
		go func() { defer close(done); s.Walk(context.Background()) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("walk %d blocked on the node that takes nothing", i)
		}
		if got, ok := fast.take(); !ok || !got.start.Equal(clk.Now()) {
			t.Errorf("walk %d: fast node got %v, %v", i, got.start, ok)
		}
		clk.Step(time.Second)
	}
	got, ok := slow.take()
	if want := cacheT0.Add(2 * time.Second); !ok || !got.start.Equal(want) {
		t.Errorf("slow node: walk of %v (%v), want only the latest, of %v", got.start, ok, want)
	}
	if _, ok := slow.take(); ok {
		t.Error("slow node: more than the latest walk kept")
	}
}

func TestNewSharedValidates(t *testing.T) {
	if _, err := NewShared(SharedConfig{}); err == nil {
		t.Error("NewShared without a runtime succeeded")
	}
	if _, err := NewShared(SharedConfig{Runtime: &sharedWalker{}, Period: -time.Second}); err == nil {
		t.Error("NewShared with a negative period succeeded")
	}
}

// feedNode is one node's PLEG running from a shared walk.
type feedNode struct {
	cache    *Cache
	rt       *plegReader
	pleg     *PLEG
	kicked   chan types.UID
	relisted chan struct{}
}

func newFeedNode(t *testing.T, s *Shared, name string, clk *clocktesting.FakeClock) *feedNode {
	t.Helper()
	n := &feedNode{cache: NewCache(), kicked: make(chan types.UID, 100), relisted: make(chan struct{}, 100)}
	n.rt = &plegReader{snapshot: func(context.Context) (*cri.Snapshot, error) {
		t.Errorf("node %s listed the runtime itself", name)
		return nil, errors.New("no list")
	}}
	var err error
	n.pleg, err = New(Config{Runtime: n.rt, Cache: n.cache, Clock: clk, Feed: s.Feed(name), Threshold: 3 * time.Minute,
		OnChange:      func(uid types.UID) { n.kicked <- uid },
		ObserveRelist: func(time.Duration, time.Duration) { n.relisted <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *feedNode) globalTime() time.Time {
	n.cache.mu.Lock()
	defer n.cache.mu.Unlock()
	return n.cache.global
}

// waitFor waits for one value of ch, failing the test at the deadline.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", what)
	}
	var zero T
	return zero
}

// Nodes' PLEGs relist from one shared walk: each sees its own pods only,
// its cache's time is the walk's start, a node stuck on a read neither
// blocks the others nor the walk and alone turns unhealthy, and a failed
// walk reaches every node.
func TestPLEGFromSharedWalk(t *testing.T) {
	clk := clocktesting.NewFakeClock(cacheT0)
	w := &sharedWalker{}
	s, err := NewShared(SharedConfig{Runtime: w, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	a, b := newFeedNode(t, s, "a", clk), newFeedNode(t, s, "b", clk)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, n := range []*feedNode{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); n.pleg.Run(ctx) }()
	}
	defer func() { cancel(); wg.Wait() }()

	// Walk 1: one pod each.
	w.set(nodes(map[string]map[types.UID]map[string]cri.State{
		"a": {"pa": {"sa": cri.SandboxReady}},
		"b": {"pb": {"sb": cri.SandboxReady}},
	}))
	s.Walk(ctx)
	if got := waitFor(t, a.kicked, "kick on a"); got != "pa" {
		t.Errorf("node a kicked %s, want pa", got)
	}
	if got := waitFor(t, b.kicked, "kick on b"); got != "pb" {
		t.Errorf("node b kicked %s, want pb", got)
	}
	waitFor(t, a.relisted, "relist of a")
	waitFor(t, b.relisted, "relist of b")
	for name, n := range map[string]*feedNode{"a": a, "b": b} {
		if got := n.globalTime(); !got.Equal(cacheT0) {
			t.Errorf("node %s: cache time %v, want the walk's start %v", name, got, cacheT0)
		}
		if reads := n.rt.takeReads(); len(reads) != 1 || reads[0].UID != types.UID("p"+name) {
			t.Errorf("node %s read %v, want only its own pod", name, reads)
		}
	}

	// Walk 2: b's new pod's read hangs; a goes on.
	unblock, blocked := make(chan struct{}), make(chan struct{}, 1)
	// b's PLEG waits for the next walk: the feed's lock orders this write
	// before its next read.
	b.rt.getPodStatus = func(ctx context.Context, ref cri.PodRef) (*cri.PodStatus, error) {
		if ref.UID == "pb2" {
			blocked <- struct{}{}
			<-unblock
		}
		return readStatus(ref, 0), nil
	}
	clk.Step(time.Second)
	w.set(nodes(map[string]map[types.UID]map[string]cri.State{
		"a": {"pa": {"sa": cri.SandboxReady}, "pa2": {"sa2": cri.SandboxReady}},
		"b": {"pb": {"sb": cri.SandboxReady}, "pb2": {"sb2": cri.SandboxReady}},
	}))
	s.Walk(ctx)
	if got := waitFor(t, a.kicked, "kick of pa2"); got != "pa2" {
		t.Errorf("node a kicked %s, want pa2", got)
	}
	waitFor(t, a.relisted, "relist 2 of a")
	// b is in walk 2's read of pb2 (it did not skip walk 2).
	waitFor(t, blocked, "b's read of pb2")
	// Past b's threshold: walks go on, a keeps up and stays healthy.
	clk.Step(4 * time.Minute)
	for range 3 {
		s.Walk(ctx)
		waitFor(t, a.relisted, "relist of a while b is stuck")
		clk.Step(time.Second)
	}
	if err := a.pleg.Healthy(); err != nil {
		t.Errorf("node a: %v", err)
	}
	if err := b.pleg.Healthy(); err == nil || !strings.Contains(err.Error(), "PLEG is not healthy") {
		t.Errorf("node b stuck for 4 minutes: Healthy = %v, want PLEG is not healthy", err)
	}
	// b resumes with the latest walk only, skipping the ones it missed.
	close(unblock)
	if got := waitFor(t, b.kicked, "kick of pb2"); got != "pb2" {
		t.Errorf("node b kicked %s, want pb2", got)
	}
	waitFor(t, b.relisted, "relist 2 of b")
	waitFor(t, b.relisted, "b's relist of the latest walk")
	if err := b.pleg.Healthy(); err != nil {
		t.Errorf("node b after it resumed: %v", err)
	}
	if got, want := b.globalTime(), clk.Now().Add(-time.Second); !got.Equal(want) {
		t.Errorf("node b: cache time %v, want the latest walk's start %v", got, want)
	}
	select {
	case <-b.relisted:
		t.Error("node b relisted a walk it had missed")
	default:
	}

	// A failed walk: every node relists nothing and, past the threshold,
	// every node is unhealthy.
	w.set(func() (*cri.NodeSnapshots, error) { return nil, errors.New("runtime down") })
	clk.Step(4 * time.Minute)
	s.Walk(ctx)
	waitFor(t, a.relisted, "a's failed relist")
	waitFor(t, b.relisted, "b's failed relist")
	for name, n := range map[string]*feedNode{"a": a, "b": b} {
		if err := n.pleg.Healthy(); err == nil {
			t.Errorf("node %s: healthy with the runtime down for 4 minutes", name)
		}
	}
	if got := w.count(); got != 6 {
		t.Errorf("%d lists for 6 walks of two nodes, want 6", got)
	}
}

// Run walks at once and every period.
func TestSharedRun(t *testing.T) {
	clk := clocktesting.NewFakeClock(cacheT0)
	walked := make(chan struct{})
	w := &sharedWalker{next: func() (*cri.NodeSnapshots, error) {
		walked <- struct{}{}
		return &cri.NodeSnapshots{}, nil
	}}
	s, err := NewShared(SharedConfig{Runtime: w, Clock: clk, Period: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	waitFor(t, walked, "walk at start")
	clk.Step(5 * time.Second)
	waitFor(t, walked, "walk after one period")
	cancel()
	waitFor(t, done, "Run's return")
}

// A walk that started before the node's own forced Relist is older than
// its cache and is skipped; a later one is relisted from.
func TestPLEGSkipsAWalkOlderThanItsRelist(t *testing.T) {
	f := newPLEGFixture(t)
	old := walk{start: f.clock.Now(), snap: world(map[types.UID]map[string]cri.State{"p": {"s": cri.SandboxReady}})}
	f.clock.Step(time.Second)
	f.pleg.Relist(context.Background()) // lists nothing
	f.pleg.relistFrom(context.Background(), old)
	if k := f.takeKicked(); len(k) != 0 {
		t.Errorf("an older walk kicked %v", k)
	}
	f.clock.Step(time.Second)
	f.pleg.relistFrom(context.Background(), walk{start: f.clock.Now(), snap: old.snap})
	if k := f.takeKicked(); !reflect.DeepEqual(k, []types.UID{"p"}) {
		t.Errorf("a newer walk kicked %v, want [p]", k)
	}
	f.cache.mu.Lock()
	defer f.cache.mu.Unlock()
	if !f.cache.global.Equal(f.clock.Now()) {
		t.Errorf("cache time %v, want the newer walk's start %v", f.cache.global, f.clock.Now())
	}
}
