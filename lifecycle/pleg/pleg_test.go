package pleg

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestGenerateEvents(t *testing.T) {
	for name, tc := range map[string]struct {
		old, cur cri.State
		want     []EventType
	}{
		"unchanged":                {cri.StateRunning, cri.StateRunning, nil},
		"new running":              {"", cri.StateRunning, []EventType{ContainerStarted}},
		"created -> running":       {cri.StateCreated, cri.StateRunning, []EventType{ContainerStarted}},
		"running -> exited":        {cri.StateRunning, cri.StateExited, []EventType{ContainerDied}},
		"exited -> gone":           {cri.StateExited, "", []EventType{ContainerRemoved}},
		"running -> gone":          {cri.StateRunning, "", []EventType{ContainerDied, ContainerRemoved}},
		"new created":              {"", cri.StateCreated, []EventType{ContainerChanged}},
		"running -> unknown":       {cri.StateRunning, cri.StateUnknown, []EventType{ContainerChanged}},
		"new sandbox":              {"", cri.SandboxReady, []EventType{ContainerStarted}},
		"sandbox stopped":          {cri.SandboxReady, cri.SandboxNotReady, []EventType{ContainerDied}},
		"stopped sandbox removed":  {cri.SandboxNotReady, "", []EventType{ContainerRemoved}},
		"ready sandbox vanished":   {cri.SandboxReady, "", []EventType{ContainerDied, ContainerRemoved}},
		"exited container started": {cri.StateExited, cri.StateRunning, []EventType{ContainerStarted}},
	} {
		t.Run(name, func(t *testing.T) {
			var got []EventType
			for _, e := range generateEvents("u", "c", tc.old, tc.cur) {
				if e.UID != "u" || e.ID != "c" {
					t.Errorf("event %+v names the wrong container", e)
				}
				got = append(got, e.Type)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("events %v, want %v", got, tc.want)
			}
		})
	}
}

func snap(pods map[types.UID]map[string]cri.State) *cri.Snapshot { return &cri.Snapshot{Pods: pods} }

func TestDiffSnapshots(t *testing.T) {
	old := snap(map[types.UID]map[string]cri.State{
		"a": {"sa": cri.SandboxReady, "c1": cri.StateRunning},
		"b": {"sb": cri.SandboxReady, "c2": cri.StateRunning},
		"d": {"sd": cri.SandboxNotReady, "c4": cri.StateExited},
	})
	cur := snap(map[types.UID]map[string]cri.State{
		"a": {"sa": cri.SandboxReady, "c1": cri.StateRunning}, // unchanged
		"b": {"sb": cri.SandboxReady, "c2": cri.StateExited},  // container died
		"c": {"sc": cri.SandboxReady},                         // new pod
		// d removed entirely
	})
	got := diffSnapshots(old, cur)
	want := []Event{
		{UID: "b", Type: ContainerDied, ID: "c2"},
		{UID: "c", Type: ContainerStarted, ID: "sc"},
		{UID: "d", Type: ContainerRemoved, ID: "c4"},
		{UID: "d", Type: ContainerRemoved, ID: "sd"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events\n got %+v\nwant %+v", got, want)
	}
}

// plegReader is a fake runtime for the PLEG, a struct of funcs that
// records its calls. A nil getPodStatus returns readStatus.
type plegReader struct {
	snapshot     func(ctx context.Context) (*cri.Snapshot, error)
	getPodStatus func(ctx context.Context, ref cri.PodRef) (*cri.PodStatus, error)

	mu    sync.Mutex
	reads []cri.PodRef                 // every GetPodStatus, in order
	last  map[types.UID]*cri.PodStatus // the last successful read of each pod
}

var _ PodStatusReader = (*plegReader)(nil)

func (f *plegReader) Snapshot(ctx context.Context) (*cri.Snapshot, error) { return f.snapshot(ctx) }

func (f *plegReader) GetPodStatus(ctx context.Context, ref cri.PodRef) (*cri.PodStatus, error) {
	f.mu.Lock()
	f.reads = append(f.reads, ref)
	n := len(f.reads)
	f.mu.Unlock()
	var st *cri.PodStatus
	var err error
	if f.getPodStatus != nil {
		st, err = f.getPodStatus(ctx, ref)
	} else {
		st = readStatus(ref, n)
	}
	if err == nil {
		f.mu.Lock()
		if f.last == nil {
			f.last = map[types.UID]*cri.PodStatus{}
		}
		f.last[ref.UID] = st
		f.mu.Unlock()
	}
	return st, err
}

func (f *plegReader) takeReads() []cri.PodRef {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.reads
	f.reads = nil
	return r
}

func (f *plegReader) lastRead(uid types.UID) *cri.PodStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last[uid]
}

// readStatus is the status of the n-th read: one sandbox whose ID says n,
// so that a test can tell reads apart.
func readStatus(ref cri.PodRef, n int) *cri.PodStatus {
	return &cri.PodStatus{Ref: ref, Sandboxes: []cri.SandboxStatus{{ID: fmt.Sprintf("read-%d", n), Ready: true}}}
}

// refOf is the identity the fake runtime labels pod uid with.
func refOf(uid types.UID) cri.PodRef {
	return cri.PodRef{UID: uid, Name: "name-" + string(uid), Namespace: "ns"}
}

// world is a snapshot whose pods all carry their labels (see refOf).
func world(pods map[types.UID]map[string]cri.State) *cri.Snapshot {
	s := &cri.Snapshot{Pods: pods, Refs: map[types.UID]cri.PodRef{}}
	for uid := range pods {
		s.Refs[uid] = refOf(uid)
	}
	return s
}

type plegFixture struct {
	clock  *clocktesting.FakeClock
	cache  *Cache
	rt     *plegReader
	pleg   *PLEG
	cur    *cri.Snapshot // what the next Snapshot returns
	kicked []types.UID
}

func newPLEGFixture(t *testing.T) *plegFixture {
	t.Helper()
	f := &plegFixture{clock: clocktesting.NewFakeClock(cacheT0), cache: NewCache(), cur: world(nil)}
	f.rt = &plegReader{snapshot: func(context.Context) (*cri.Snapshot, error) { return f.cur, nil }}
	var err error
	f.pleg, err = New(Config{Runtime: f.rt, Cache: f.cache, Clock: f.clock,
		OnChange: func(uid types.UID) { f.kicked = append(f.kicked, uid) }})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return f
}

func (f *plegFixture) takeKicked() []types.UID {
	k := f.kicked
	f.kicked = nil
	return k
}

// cacheWant is what a test expects of a pod's cache entry.
type cacheWant int

const (
	lastRead   cacheWant = iota // the last successful read of the pod
	readFailed                  // an empty status and the read's error
	emptyNamed                  // an empty status naming the pod, no error (the PLEG saw it go)
	noEntry                     // what Get returns without an entry
)

func checkEntry(t *testing.T, f *plegFixture, uid types.UID, want cacheWant) {
	t.Helper()
	st, err := f.cache.Get(uid)
	switch want {
	case lastRead:
		if read := f.rt.lastRead(uid); err != nil || read == nil || st != read {
			t.Errorf("cache entry of %s = %+v, %v; want the last read %+v", uid, st, err, read)
		}
	case readFailed:
		if err == nil || len(st.Sandboxes)+len(st.Containers) != 0 {
			t.Errorf("cache entry of %s = %+v, %v; want an empty status and an error", uid, st, err)
		}
	case emptyNamed:
		if err != nil || !reflect.DeepEqual(st, &cri.PodStatus{Ref: refOf(uid)}) {
			t.Errorf("cache entry of %s = %+v, %v; want an empty status with its ref", uid, st, err)
		}
	case noEntry:
		if err != nil || !reflect.DeepEqual(st, &cri.PodStatus{Ref: cri.PodRef{UID: uid}}) {
			t.Errorf("cache entry of %s = %+v, %v; want none", uid, st, err)
		}
	}
}

func TestPLEGRelist(t *testing.T) {
	type pods = map[types.UID]map[string]cri.State
	running := pods{"a": {"sa": cri.SandboxReady, "c1": cri.StateRunning}, "b": {"sb": cri.SandboxReady}}
	aDied := pods{"a": {"sa": cri.SandboxReady, "c1": cri.StateExited}, "b": {"sb": cri.SandboxReady}}
	onlyB := pods{"b": {"sb": cri.SandboxReady}}
	type step struct {
		snap      *cri.Snapshot
		failReads map[types.UID]bool // GetPodStatus of these pods fails
		wantReads []types.UID        // in order, each with refOf(uid)
		wantKicks []types.UID
		wantCache map[types.UID]cacheWant
	}
	for name, steps := range map[string][]step{
		"new pods are read and kicked once": {
			{snap: world(running), wantReads: []types.UID{"a", "b"}, wantKicks: []types.UID{"a", "b"},
				wantCache: map[types.UID]cacheWant{"a": lastRead, "b": lastRead, "c": noEntry}},
			{snap: world(running)},
		},
		"only the pod that changed is read and kicked": {
			{snap: world(running), wantReads: []types.UID{"a", "b"}, wantKicks: []types.UID{"a", "b"}},
			{snap: world(aDied), wantReads: []types.UID{"a"}, wantKicks: []types.UID{"a"},
				wantCache: map[types.UID]cacheWant{"a": lastRead, "b": lastRead}},
			{snap: world(aDied)},
		},
		"a failed read is retried at the next relist and kicks then": {
			{snap: world(running), failReads: map[types.UID]bool{"b": true},
				wantReads: []types.UID{"a", "b"}, wantKicks: []types.UID{"a"},
				wantCache: map[types.UID]cacheWant{"a": lastRead, "b": readFailed}},
			{snap: world(running), wantReads: []types.UID{"b"}, wantKicks: []types.UID{"b"},
				wantCache: map[types.UID]cacheWant{"b": lastRead}},
			{snap: world(running)},
		},
		"a failed read is retried even when the change is undone": {
			{snap: world(running), wantReads: []types.UID{"a", "b"}, wantKicks: []types.UID{"a", "b"}},
			{snap: world(aDied), failReads: map[types.UID]bool{"a": true}, wantReads: []types.UID{"a"},
				wantCache: map[types.UID]cacheWant{"a": readFailed}},
			// Back to what the PLEG last read successfully: no events, but
			// the cache holds an error until a read succeeds.
			{snap: world(running), wantReads: []types.UID{"a"}, wantCache: map[types.UID]cacheWant{"a": lastRead}},
			{snap: world(running)},
		},
		"a removed pod gets an empty status, dropped one relist later": {
			{snap: world(running), wantReads: []types.UID{"a", "b"}, wantKicks: []types.UID{"a", "b"}},
			{snap: world(onlyB), wantKicks: []types.UID{"a"},
				wantCache: map[types.UID]cacheWant{"a": emptyNamed, "b": lastRead}},
			{snap: world(onlyB), wantCache: map[types.UID]cacheWant{"a": noEntry, "b": lastRead}},
		},
		"a pod whose read failed and that then went away": {
			{snap: world(running), wantReads: []types.UID{"a", "b"}, wantKicks: []types.UID{"a", "b"}},
			{snap: world(aDied), failReads: map[types.UID]bool{"a": true}, wantReads: []types.UID{"a"},
				wantCache: map[types.UID]cacheWant{"a": readFailed}},
			{snap: world(onlyB), wantKicks: []types.UID{"a"}, wantCache: map[types.UID]cacheWant{"a": emptyNamed}},
		},
		"a pod that failed its first read and went away": {
			{snap: world(onlyB), wantReads: []types.UID{"b"}, wantKicks: []types.UID{"b"}},
			{snap: world(running), failReads: map[types.UID]bool{"a": true}, wantReads: []types.UID{"a"},
				wantCache: map[types.UID]cacheWant{"a": readFailed}},
			// No events (never recorded), but reinspected: it is gone.
			{snap: world(onlyB), wantCache: map[types.UID]cacheWant{"a": emptyNamed}},
		},
		"a pod whose sandbox is gone is read with its old identity": {
			{snap: world(running), wantReads: []types.UID{"a", "b"}, wantKicks: []types.UID{"a", "b"}},
			{snap: &cri.Snapshot{
				Pods: pods{"a": {"c1": cri.StateExited}, "b": {"sb": cri.SandboxReady}},
				Refs: map[types.UID]cri.PodRef{"a": {UID: "a"}, "b": refOf("b")},
			}, wantReads: []types.UID{"a"}, wantKicks: []types.UID{"a"}, wantCache: map[types.UID]cacheWant{"a": lastRead}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newPLEGFixture(t)
			var fail map[types.UID]bool
			f.rt.getPodStatus = func(_ context.Context, ref cri.PodRef) (*cri.PodStatus, error) {
				if fail[ref.UID] {
					return nil, fmt.Errorf("reading pod %s: runtime hiccup", ref)
				}
				return readStatus(ref, int(f.clock.Now().Unix())), nil
			}
			for i, s := range steps {
				f.clock.Step(time.Second)
				f.cur, fail = s.snap, s.failReads
				f.pleg.Relist(context.Background())
				var wantReads []cri.PodRef
				for _, uid := range s.wantReads {
					wantReads = append(wantReads, refOf(uid))
				}
				if got := f.rt.takeReads(); !reflect.DeepEqual(got, wantReads) {
					t.Errorf("relist %d read %v, want %v", i, got, wantReads)
				}
				if got := f.takeKicked(); !reflect.DeepEqual(got, s.wantKicks) {
					t.Errorf("relist %d kicked %v, want %v", i, got, s.wantKicks)
				}
				for uid, want := range s.wantCache {
					checkEntry(t, f, uid, want)
				}
				if _, ok, _ := ready(f.cache, "any", f.clock.Now().Add(-time.Nanosecond)); !ok {
					t.Errorf("relist %d did not raise the cache's time", i)
				}
			}
		})
	}
}

func TestPLEGCacheIsWrittenBeforeOnChange(t *testing.T) {
	f := newPLEGFixture(t)
	f.cur = world(map[types.UID]map[string]cri.State{"a": {"sa": cri.SandboxReady}})
	relistAt := f.clock.Now()
	calls := 0
	f.pleg.onChange = func(uid types.UID) {
		calls++
		checkEntry(t, f, uid, lastRead)
		// A worker that synced just before the relist started gets the
		// relist's read without waiting.
		if st, ok, err := ready(f.cache, uid, relistAt.Add(-time.Nanosecond)); !ok || err != nil || st != f.rt.lastRead(uid) {
			t.Errorf("GetNewerThan in OnChange = %+v, %v, %v", st, ok, err)
		}
		if _, ok, _ := ready(f.cache, "other", relistAt.Add(-time.Nanosecond)); !ok {
			t.Error("the cache's time was not raised before OnChange")
		}
	}
	f.pleg.Relist(context.Background())
	if calls != 1 {
		t.Errorf("OnChange called %d times, want 1", calls)
	}
}

func TestPLEGTimestamps(t *testing.T) {
	f := newPLEGFixture(t)
	f.cur = world(map[types.UID]map[string]cri.State{"a": {"sa": cri.SandboxReady}, "b": {"sb": cri.SandboxReady}})
	// Each read takes a second.
	f.rt.getPodStatus = func(_ context.Context, ref cri.PodRef) (*cri.PodStatus, error) {
		f.clock.Step(time.Second)
		return readStatus(ref, 0), nil
	}
	start := f.clock.Now()
	f.pleg.Relist(context.Background())
	// a was read from start, b from start+1s: each entry has the time its
	// own read started; the cache's time is the relist's start.
	for _, tc := range []struct {
		uid     types.UID
		minTime time.Time
		want    bool
	}{
		{"a", start.Add(-time.Nanosecond), true},
		{"a", start, false},
		{"b", start, true},
		{"b", start.Add(time.Second), false},
		{"unknown", start.Add(-time.Nanosecond), true},
		{"unknown", start, false},
	} {
		if _, ok, _ := ready(f.cache, tc.uid, tc.minTime); ok != tc.want {
			t.Errorf("%s newer than start%+v: %v, want %v", tc.uid, tc.minTime.Sub(start), ok, tc.want)
		}
	}
}

func TestPLEGFailedListChangesNothing(t *testing.T) {
	f := newPLEGFixture(t)
	f.cur = world(map[types.UID]map[string]cri.State{"a": {"sa": cri.SandboxReady}})
	f.pleg.Relist(context.Background())
	f.takeKicked()
	f.clock.Step(time.Second)
	f.rt.snapshot = func(context.Context) (*cri.Snapshot, error) { return nil, errors.New("runtime down") }
	f.pleg.Relist(context.Background())
	if k := f.takeKicked(); len(k) != 0 {
		t.Errorf("a failed relist kicked %v", k)
	}
	if _, ok, _ := ready(f.cache, "a", f.clock.Now().Add(-time.Nanosecond)); ok {
		t.Error("a failed relist raised the cache's time")
	}
	checkEntry(t, f, "a", lastRead)
}

func TestPLEGCancelledRelist(t *testing.T) {
	f := newPLEGFixture(t)
	f.cur = world(map[types.UID]map[string]cri.State{"a": {"sa": cri.SandboxReady}, "b": {"sb": cri.SandboxReady}})
	ctx, cancel := context.WithCancel(context.Background())
	f.rt.getPodStatus = func(ctx context.Context, ref cri.PodRef) (*cri.PodStatus, error) {
		if ref.UID == "b" {
			cancel()
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return readStatus(ref, 0), nil
	}
	start := f.clock.Now()
	f.pleg.Relist(ctx)
	if k := f.takeKicked(); len(k) != 0 {
		t.Errorf("a cancelled relist kicked %v", k)
	}
	if _, ok, _ := ready(f.cache, "other", start.Add(-time.Nanosecond)); ok {
		t.Error("a cancelled relist raised the cache's time")
	}
	checkEntry(t, f, "b", noEntry)

	f.clock.Step(time.Second)
	f.rt.takeReads()
	f.pleg.Relist(context.Background())
	if got, want := f.rt.takeReads(), []cri.PodRef{refOf("a"), refOf("b")}; !reflect.DeepEqual(got, want) {
		t.Errorf("the next relist read %v, want %v (all over again)", got, want)
	}
	if got, want := f.takeKicked(), []types.UID{"a", "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("the next relist kicked %v, want %v", got, want)
	}
}

func TestPLEGHealth(t *testing.T) {
	f := newPLEGFixture(t)
	f.pleg.Relist(context.Background())
	if err := f.pleg.Healthy(); err != nil {
		t.Fatalf("healthy PLEG reported %v", err)
	}
	f.rt.snapshot = func(context.Context) (*cri.Snapshot, error) { return nil, errors.New("runtime down") }
	f.clock.Step(DefaultRelistThreshold - time.Second)
	f.pleg.Relist(context.Background())
	if err := f.pleg.Healthy(); err != nil {
		t.Fatalf("within the threshold: %v", err)
	}
	f.clock.Step(2 * time.Second)
	f.pleg.Relist(context.Background())
	err := f.pleg.Healthy()
	if err == nil || !strings.Contains(err.Error(), "PLEG is not healthy: pleg was last seen active 3m1s ago; threshold is 3m0s") {
		t.Fatalf("past the threshold: %v", err)
	}
	f.rt.snapshot = func(context.Context) (*cri.Snapshot, error) { return world(nil), nil }
	f.pleg.Relist(context.Background())
	if err := f.pleg.Healthy(); err != nil {
		t.Errorf("after a successful relist: %v", err)
	}
}

func TestPLEGHealthGraceAtStart(t *testing.T) {
	clk := clocktesting.NewFakeClock(cacheT0)
	p, err := New(Config{Runtime: &plegReader{}, Cache: NewCache(), Clock: clk, Threshold: time.Minute, OnChange: func(types.UID) {}})
	if err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute)
	if err := p.Healthy(); err != nil {
		t.Errorf("within the threshold of the start: %v", err)
	}
	clk.Step(time.Second)
	if err := p.Healthy(); err == nil {
		t.Error("no relist for longer than the threshold since the start, yet healthy")
	}
}

func TestPLEGRun(t *testing.T) {
	clk := clocktesting.NewFakeClock(cacheT0)
	relisted := make(chan struct{})
	rt := &plegReader{snapshot: func(context.Context) (*cri.Snapshot, error) {
		relisted <- struct{}{}
		return world(nil), nil
	}}
	p, err := New(Config{Runtime: rt, Cache: NewCache(), Clock: clk, Period: 5 * time.Second, OnChange: func(types.UID) {}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	deadline := time.After(10 * time.Second)
	wait := func(what string) {
		t.Helper()
		select {
		case <-relisted:
		case <-deadline:
			t.Fatalf("no %s", what)
		}
	}
	wait("relist at start")
	clk.Step(5 * time.Second)
	wait("relist after one period")
	cancel()
	select {
	case <-done:
	case <-deadline:
		t.Fatal("Run did not return after its context ended")
	}
}

// A wake relists at once, without waiting for the period; the periodic
// relist still happens.
func TestPLEGRunWake(t *testing.T) {
	clk := clocktesting.NewFakeClock(cacheT0)
	relisted := make(chan struct{})
	rt := &plegReader{snapshot: func(context.Context) (*cri.Snapshot, error) {
		relisted <- struct{}{}
		return world(nil), nil
	}}
	wake := make(chan struct{}, 1)
	p, err := New(Config{Runtime: rt, Cache: NewCache(), Clock: clk, Period: time.Hour, Wake: wake, OnChange: func(types.UID) {}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	deadline := time.After(10 * time.Second)
	wait := func(what string) {
		t.Helper()
		select {
		case <-relisted:
		case <-deadline:
			t.Fatalf("no %s", what)
		}
	}
	wait("relist at start")
	wake <- struct{}{}
	wait("relist on wake, long before the period")
	wake <- struct{}{}
	wait("relist on a second wake")
	clk.Step(time.Hour)
	wait("relist after one period")
	select {
	case <-relisted:
		t.Fatal("a relist nobody asked for")
	default:
	}
	cancel()
	select {
	case <-done:
	case <-deadline:
		t.Fatal("Run did not return after its context ended")
	}
}

// With WakeSpacing, the first wakeBurst woken relists in a row start at
// once (the events of one change); the next waits until the bucket has a
// token again, the wakes meanwhile sharing it; after a quiet spell wakes
// relist at once again.
func TestPLEGRunWakeSpacing(t *testing.T) {
	clk := clocktesting.NewFakeClock(cacheT0)
	relisted := make(chan time.Time) // the fake time of each relist
	rt := &plegReader{snapshot: func(ctx context.Context) (*cri.Snapshot, error) {
		select {
		case relisted <- clk.Now():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return world(nil), nil
	}}
	wake := make(chan struct{}, 1)
	p, err := New(Config{Runtime: rt, Cache: NewCache(), Clock: clk, Period: time.Hour, Wake: wake,
		WakeSpacing: 100 * time.Millisecond, OnChange: func(types.UID) {}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	deadline := time.After(10 * time.Second)
	wait := func(what string) {
		t.Helper()
		select {
		case <-relisted:
		case <-deadline:
			t.Fatalf("no %s", what)
		}
	}
	none := func(what string) {
		t.Helper()
		select {
		case <-relisted:
			t.Fatalf("a relist %s", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
	wait("relist at start")
	start := clk.Now()
	for i := 0; i < wakeBurst; i++ {
		wake <- struct{}{}
		wait(fmt.Sprintf("woken relist %d of the burst, at once", i+1))
	}
	wake <- struct{}{}
	none("beyond the burst, before the spacing")
	// Time passes in small steps, more wakes come meanwhile: one relist,
	// once a token is back (100 ms after the burst). The wakes stop when
	// the token is due, so that all of them come before Run's wait for it
	// ends, however late Run is; the steps go on until the relist (Run may
	// start its wait for the token only after a step).
	for relists := 0; relists == 0; {
		select {
		case at := <-relisted:
			relists++
			if got := at.Sub(start); got < 100*time.Millisecond {
				t.Fatalf("relist beyond the burst %s after it, want at least 100ms", got)
			}
		case <-deadline:
			t.Fatal("no relist once the spacing has passed")
		case <-time.After(5 * time.Millisecond):
			if clk.Since(start) < 100*time.Millisecond {
				select {
				case wake <- struct{}{}:
				default:
				}
			}
			clk.Step(10 * time.Millisecond)
		}
	}
	// The wakes that came during the wait shared that relist: none is
	// left to relist, even once a token is back.
	clk.Step(100 * time.Millisecond)
	none("for the wakes that came during the wait")
	clk.Step(time.Second)
	wake <- struct{}{}
	wait("relist at once after a quiet second")
	cancel()
	select {
	case <-done:
	case <-deadline:
		t.Fatal("Run did not return after its context ended")
	}
}

func TestNewPLEGValidates(t *testing.T) {
	ok := Config{Runtime: &plegReader{}, Cache: NewCache(), OnChange: func(types.UID) {}}
	for name, tc := range map[string]struct {
		mutate  func(*Config)
		wantErr bool
	}{
		"defaults":           {mutate: func(*Config) {}},
		"no runtime":         {mutate: func(c *Config) { c.Runtime = nil }, wantErr: true},
		"no cache":           {mutate: func(c *Config) { c.Cache = nil }, wantErr: true},
		"no OnChange":        {mutate: func(c *Config) { c.OnChange = nil }, wantErr: true},
		"negative period":    {mutate: func(c *Config) { c.Period = -time.Second }, wantErr: true},
		"negative threshold": {mutate: func(c *Config) { c.Threshold = -time.Second }, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := ok
			tc.mutate(&cfg)
			p, err := New(cfg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("New error %v, want error %v", err, tc.wantErr)
			}
			if err == nil && (p.period != DefaultRelistPeriod || p.threshold != DefaultRelistThreshold || p.clock == nil) {
				t.Errorf("defaults not filled: period %v threshold %v clock %v", p.period, p.threshold, p.clock)
			}
		})
	}
}

// TestPLEGObserveRelist: each relist reports its duration, and from the
// second on the time since the previous one started.
func TestPLEGObserveRelist(t *testing.T) {
	clk := clocktesting.NewFakeClock(cacheT0)
	var intervals []time.Duration
	empty := func(context.Context) (*cri.Snapshot, error) {
		return &cri.Snapshot{Pods: map[types.UID]map[string]cri.State{}, Refs: map[types.UID]cri.PodRef{}}, nil
	}
	p, err := New(Config{Runtime: &plegReader{snapshot: empty}, Cache: NewCache(), Clock: clk, OnChange: func(types.UID) {},
		ObserveRelist: func(took, interval time.Duration) {
			if took < 0 {
				t.Errorf("relist duration %v", took)
			}
			intervals = append(intervals, interval)
		}})
	if err != nil {
		t.Fatal(err)
	}
	p.Relist(context.Background())
	clk.Step(time.Second)
	p.Relist(context.Background())
	clk.Step(3 * time.Second)
	p.Relist(context.Background())
	if want := []time.Duration{0, time.Second, 3 * time.Second}; fmt.Sprint(intervals) != fmt.Sprint(want) {
		t.Errorf("intervals %v, want %v", intervals, want)
	}
}

// The engine reads a pod right after it acts on it (refresh); a relist
// that lists exactly the states of that read keeps it instead of reading
// the pod again, and still kicks the pod. A relist that lists anything
// else reads, and so does one in which something of the pod died.
func TestPLEGKeepsTheEnginesCurrentRead(t *testing.T) {
	type states = map[string]cri.State
	sbReady := cri.SandboxStatus{ID: "sa", Ready: true}
	status := func(c1 cri.State) *cri.PodStatus {
		return &cri.PodStatus{Ref: refOf("a"), Sandboxes: []cri.SandboxStatus{sbReady},
			Containers: []cri.ContainerStatus{{ID: "c1", Name: "app", State: c1}}}
	}
	running, created, exited := status(cri.StateRunning), status(cri.StateCreated), status(cri.StateExited)
	listRunning := states{"sa": cri.SandboxReady, "c1": cri.StateRunning}
	for name, tc := range map[string]struct {
		before     states // what the previous relist listed of a (nil: nothing)
		engineRead *cri.PodStatus
		engineErr  error
		// engineDuringList: the engine's read is stored after the relist
		// started, before its list returns (else a second before it).
		engineDuringList bool
		listed           states // what the relist lists of a
		wantRead         bool
	}{
		"same states: kept":                       {nil, running, nil, false, listRunning, false},
		"same states, read during the list: kept": {nil, running, nil, true, listRunning, false},
		"a container moved on: read":              {nil, created, nil, false, listRunning, true},
		"a new container: read":                   {nil, running, nil, false, states{"sa": cri.SandboxReady, "c1": cri.StateRunning, "c2": cri.StateCreated}, true},
		"a container gone: read":                  {nil, running, nil, false, states{"sa": cri.SandboxReady}, true},
		"the sandbox stopped: read":               {nil, running, nil, false, states{"sa": cri.SandboxNotReady, "c1": cri.StateRunning}, true},
		"the engine's read failed: read":          {nil, nil, errors.New("hiccup"), false, listRunning, true},
		"no entry (never read): read":             {nil, nil, nil, false, listRunning, true},
		// The time-based rule this replaced missed this exit for good.
		"running read during the list, exited listed: read": {listRunning, running, nil, true, states{"sa": cri.SandboxReady, "c1": cri.StateExited}, true},
		// An exit's details may settle after its state: always read.
		"a container died, the engine saw it exited: read": {listRunning, exited, nil, false, states{"sa": cri.SandboxReady, "c1": cri.StateExited}, true},
	} {
		t.Run(name, func(t *testing.T) {
			f := newPLEGFixture(t)
			if tc.before != nil {
				f.cur = world(map[types.UID]map[string]cri.State{"a": tc.before})
			}
			f.clock.Step(time.Second)
			f.pleg.Relist(context.Background())
			f.rt.takeReads()
			f.takeKicked()
			f.clock.Step(time.Second)
			engineAt := f.clock.Now()
			store := func() {
				if tc.engineRead != nil || tc.engineErr != nil {
					f.cache.Set("a", tc.engineRead, tc.engineErr, engineAt)
				}
			}
			listed := world(map[types.UID]map[string]cri.State{"a": tc.listed})
			if tc.engineDuringList {
				f.rt.snapshot = func(context.Context) (*cri.Snapshot, error) {
					engineAt = f.clock.Now()
					store()
					return listed, nil
				}
			} else {
				store()
				f.cur = listed
			}
			f.clock.Step(time.Second)
			relistAt := f.clock.Now()
			f.pleg.Relist(context.Background())
			reads := f.rt.takeReads()
			if len(reads) > 1 || (len(reads) == 1) != tc.wantRead {
				t.Fatalf("the relist read a %d times, want a read: %v", len(reads), tc.wantRead)
			}
			if got := f.takeKicked(); !reflect.DeepEqual(got, []types.UID{"a"}) {
				t.Errorf("kicked %v, want [a]", got)
			}
			if tc.wantRead {
				checkEntry(t, f, "a", lastRead)
				return
			}
			if st, err := f.cache.Get("a"); err != nil || st != tc.engineRead {
				t.Errorf("cache entry %+v, %v; want the engine's read kept", st, err)
			}
			// A worker that synced after the engine's read and before the
			// relist gets the kept read: it holds as of the relist's start.
			if got, ok, err := ready(f.cache, "a", relistAt.Add(-time.Nanosecond)); !ok || err != nil || got != tc.engineRead {
				t.Errorf("GetNewerThan(relist start - 1ns) = %+v, %v, %v; want the engine's read", got, ok, err)
			}
			if m, ok := f.cache.Modified("a"); !ok || !m.Equal(engineAt) {
				t.Errorf("entry modified %v, %v; want the engine's read time %v", m, ok, engineAt)
			}
			// The same list again: nothing to do. The container's exit
			// later: read, as any death.
			f.clock.Step(time.Second)
			f.pleg.Relist(context.Background())
			if r, k := f.rt.takeReads(), f.takeKicked(); len(r)+len(k) != 0 {
				t.Errorf("an unchanged relist read %v and kicked %v", r, k)
			}
			f.rt.snapshot = func(context.Context) (*cri.Snapshot, error) {
				return world(map[types.UID]map[string]cri.State{"a": {"sa": cri.SandboxReady, "c1": cri.StateExited}}), nil
			}
			f.clock.Step(time.Second)
			f.pleg.Relist(context.Background())
			if r := f.rt.takeReads(); len(r) != 1 {
				t.Errorf("the exit after the kept read was read %d times, want once", len(r))
			}
			checkEntry(t, f, "a", lastRead)
		})
	}
}

// Any successful read is kept, not only the engine's: a relist's read that
// was ahead of its own list (the container started in between) is not
// read again when the next relist lists what it showed.
func TestPLEGKeepsItsOwnReadAheadOfTheList(t *testing.T) {
	f := newPLEGFixture(t)
	running := &cri.PodStatus{Ref: refOf("a"), Sandboxes: []cri.SandboxStatus{{ID: "sa", Ready: true}},
		Containers: []cri.ContainerStatus{{ID: "c1", Name: "app", State: cri.StateRunning}}}
	f.rt.getPodStatus = func(context.Context, cri.PodRef) (*cri.PodStatus, error) { return running, nil }
	f.cur = world(map[types.UID]map[string]cri.State{"a": {"sa": cri.SandboxReady, "c1": cri.StateCreated}})
	f.clock.Step(time.Second)
	f.pleg.Relist(context.Background())
	if r := f.rt.takeReads(); len(r) != 1 {
		t.Fatalf("first relist read %d times, want once", len(r))
	}
	f.takeKicked()
	f.cur = world(map[types.UID]map[string]cri.State{"a": {"sa": cri.SandboxReady, "c1": cri.StateRunning}})
	f.clock.Step(time.Second)
	f.pleg.Relist(context.Background())
	if r := f.rt.takeReads(); len(r) != 0 {
		t.Errorf("the relist read %v again, want its earlier read kept", r)
	}
	if k := f.takeKicked(); !reflect.DeepEqual(k, []types.UID{"a"}) {
		t.Errorf("kicked %v, want [a]", k)
	}
	if st, err := f.cache.Get("a"); err != nil || st != running {
		t.Errorf("cache entry %+v, %v; want the earlier read", st, err)
	}
}

func TestPodStatusStates(t *testing.T) {
	st := &cri.PodStatus{
		Sandboxes:  []cri.SandboxStatus{{ID: "s2", Ready: true}, {ID: "s1"}},
		Containers: []cri.ContainerStatus{{ID: "c2", State: cri.StateRunning}, {ID: "c1", State: cri.StateExited}, {ID: "c0", State: cri.StateUnknown}},
	}
	want := map[string]cri.State{"s2": cri.SandboxReady, "s1": cri.SandboxNotReady, "c2": cri.StateRunning, "c1": cri.StateExited, "c0": cri.StateUnknown}
	if got := st.States(); !reflect.DeepEqual(got, want) {
		t.Errorf("States() = %v, want %v", got, want)
	}
	if got := (&cri.PodStatus{}).States(); len(got) != 0 {
		t.Errorf("States() of an empty status = %v, want none", got)
	}
}

// TestCountRunning: pods with a ready sandbox and containers by state, as
// the kubelet's kubelet_running_pods and kubelet_running_containers.
func TestCountRunning(t *testing.T) {
	pods, containers := countRunning(snap(map[types.UID]map[string]cri.State{
		"a": {"sb-a": cri.SandboxReady, "c1": cri.StateRunning, "c0": cri.StateExited},
		"b": {"sb-b": cri.SandboxNotReady, "c2": cri.StateExited},
		"c": {"sb-c": cri.SandboxReady, "c3": cri.StateCreated, "c4": cri.StateRunning},
	}))
	want := map[cri.State]int{cri.StateRunning: 2, cri.StateExited: 2, cri.StateCreated: 1}
	if pods != 2 || !reflect.DeepEqual(containers, want) {
		t.Errorf("countRunning = %d, %v; want 2, %v", pods, containers, want)
	}
}
