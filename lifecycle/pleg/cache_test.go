package pleg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/crivk/crivk/cri"
	"k8s.io/apimachinery/pkg/types"
)

var cacheT0 = time.Unix(1000, 0)

// at returns cacheT0 plus n seconds.
func at(n int) time.Time { return cacheT0.Add(time.Duration(n) * time.Second) }

// statusNamed is a status told apart by the pod name in its Ref.
func statusNamed(uid types.UID, name string) *cri.PodStatus {
	return &cri.PodStatus{Ref: cri.PodRef{UID: uid, Name: name}}
}

// ready reports whether GetNewerThan would return at once: it is called
// with a cancelled context, so a call that would block returns
// context.Canceled instead.
func ready(c *Cache, uid types.UID, minTime time.Time) (st *cri.PodStatus, ok bool, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	st, err = c.GetNewerThan(ctx, uid, minTime)
	if errors.Is(err, context.Canceled) {
		return st, false, nil
	}
	return st, true, err
}

func TestCacheGetAndSet(t *testing.T) {
	boom := errors.New("boom")
	type set struct {
		status *cri.PodStatus
		err    error
		at     int
		want   bool // Set's result
	}
	for name, tc := range map[string]struct {
		sets     []set
		wantName string // Ref.Name of Get's status
		wantErr  error
	}{
		"no entry":                 {wantName: ""},
		"one read":                 {sets: []set{{statusNamed("u", "a"), nil, 1, true}}, wantName: "a"},
		"newer read replaces":      {sets: []set{{statusNamed("u", "a"), nil, 1, true}, {statusNamed("u", "b"), nil, 2, true}}, wantName: "b"},
		"older read is ignored":    {sets: []set{{statusNamed("u", "b"), nil, 2, true}, {statusNamed("u", "a"), nil, 1, false}}, wantName: "b"},
		"same time replaces":       {sets: []set{{statusNamed("u", "a"), nil, 1, true}, {statusNamed("u", "b"), nil, 1, true}}, wantName: "b"},
		"failed read is stored":    {sets: []set{{statusNamed("u", "a"), nil, 1, true}, {nil, boom, 2, true}}, wantName: "", wantErr: boom},
		"good read clears failure": {sets: []set{{nil, boom, 1, true}, {statusNamed("u", "b"), nil, 2, true}}, wantName: "b"},
	} {
		t.Run(name, func(t *testing.T) {
			c := NewCache()
			for i, s := range tc.sets {
				if got := c.Set("u", s.status, s.err, at(s.at)); got != s.want {
					t.Errorf("Set #%d = %v, want %v", i, got, s.want)
				}
			}
			st, err := c.Get("u")
			if st == nil {
				t.Fatal("Get returned a nil status")
			}
			if st.Ref.UID != "u" || st.Ref.Name != tc.wantName {
				t.Errorf("Get status ref %+v, want uid u name %q", st.Ref, tc.wantName)
			}
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Errorf("Get error %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestCacheDelete(t *testing.T) {
	c := NewCache()
	c.Set("u", statusNamed("u", "a"), nil, at(1))
	c.Set("v", statusNamed("v", "b"), nil, at(1))
	c.Delete("u")
	c.Delete("never-there")
	if st, err := c.Get("u"); err != nil || st.Ref != (cri.PodRef{UID: "u"}) {
		t.Errorf("after Delete, Get = %+v, %v; want an empty status", st, err)
	}
	if st, _ := c.Get("v"); st.Ref.Name != "b" {
		t.Errorf("Delete of u changed v: %+v", st)
	}
	// A deleted entry no longer holds back an older read.
	if !c.Set("u", statusNamed("u", "old"), nil, at(0)) {
		t.Error("Set after Delete was refused")
	}
}

func TestCacheGetNewerThanReadiness(t *testing.T) {
	for name, tc := range map[string]struct {
		entryAt  int // 0: no entry
		globalAt int // 0: no UpdateTime
		minTime  int
		want     bool
		wantName string // of the returned status when ready
	}{
		"empty cache":                     {minTime: 1, want: false},
		"entry after minTime":             {entryAt: 5, minTime: 4, want: true, wantName: "a"},
		"entry at minTime is not newer":   {entryAt: 5, minTime: 5, want: false},
		"entry before minTime":            {entryAt: 3, minTime: 4, want: false},
		"global after minTime, no entry":  {globalAt: 5, minTime: 4, want: true, wantName: ""},
		"global after minTime, old entry": {entryAt: 3, globalAt: 5, minTime: 4, want: true, wantName: "a"},
		"global at minTime is not newer":  {globalAt: 5, minTime: 5, want: false},
		"global and entry before minTime": {entryAt: 5, globalAt: 6, minTime: 7, want: false},
		"entry newer, global older":       {entryAt: 8, globalAt: 6, minTime: 7, want: true, wantName: "a"},
	} {
		t.Run(name, func(t *testing.T) {
			c := NewCache()
			if tc.entryAt != 0 {
				c.Set("u", statusNamed("u", "a"), nil, at(tc.entryAt))
			}
			if tc.globalAt != 0 {
				c.UpdateTime(at(tc.globalAt))
			}
			st, ok, err := ready(c, "u", at(tc.minTime))
			if ok != tc.want {
				t.Fatalf("ready = %v, want %v", ok, tc.want)
			}
			if err != nil {
				t.Errorf("error %v", err)
			}
			if st == nil || st.Ref.UID != "u" {
				t.Fatalf("status %+v, want one for u", st)
			}
			if ok && st.Ref.Name != tc.wantName {
				t.Errorf("status name %q, want %q", st.Ref.Name, tc.wantName)
			}
		})
	}
}

func TestCacheUpdateTime(t *testing.T) {
	c := NewCache()
	// A worker's first sync waits with a zero time: a new cache has
	// nothing to offer until the first relist.
	if _, ok, _ := ready(c, "u", time.Time{}); ok {
		t.Error("a new cache answered for the zero time")
	}
	c.UpdateTime(at(5))
	if _, ok, _ := ready(c, "u", time.Time{}); !ok {
		t.Error("the first UpdateTime did not answer for the zero time")
	}
	c.UpdateTime(at(3))
	if _, ok, _ := ready(c, "u", at(4)); !ok {
		t.Error("an older UpdateTime lowered the global time")
	}
	if _, ok, _ := ready(c, "u", at(5)); ok {
		t.Error("global time is after 5")
	}
}

// getter runs GetNewerThan in a goroutine and hands its result over.
type getter struct {
	done chan struct{}
	st   *cri.PodStatus
	err  error
}

func startGet(ctx context.Context, c *Cache, uid types.UID, minTime time.Time) *getter {
	g := &getter{done: make(chan struct{})}
	go func() {
		defer close(g.done)
		g.st, g.err = c.GetNewerThan(ctx, uid, minTime)
	}()
	return g
}

// returned waits until every goroutine of the bubble is blocked, then
// reports whether the call has returned.
func (g *getter) returned() bool {
	synctest.Wait()
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}

func (c *Cache) waiterCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, ws := range c.waiters {
		n += len(ws)
	}
	return n
}

func TestCacheGetNewerThanBlocks(t *testing.T) {
	boom := errors.New("boom")
	for name, tc := range map[string]struct {
		// before runs after the waiter blocked and must not release it;
		// release must.
		before, release func(c *Cache)
		wantName        string
		wantErr         error
	}{
		"own newer read": {
			before:   func(c *Cache) { c.Set("u", statusNamed("u", "old"), nil, at(5)) },
			release:  func(c *Cache) { c.Set("u", statusNamed("u", "new"), nil, at(6)) },
			wantName: "new",
		},
		"failed newer read": {
			release: func(c *Cache) { c.Set("u", nil, boom, at(6)) },
			wantErr: boom,
		},
		"global time": {
			before: func(c *Cache) {
				c.Set("u", statusNamed("u", "a"), nil, at(1))
				c.UpdateTime(at(5))
			},
			release:  func(c *Cache) { c.UpdateTime(at(6)) },
			wantName: "a",
		},
		"global time, no entry": {
			release: func(c *Cache) { c.UpdateTime(at(6)) },
		},
		"another pod's read": {
			before:   func(c *Cache) { c.Set("v", statusNamed("v", "x"), nil, at(9)) },
			release:  func(c *Cache) { c.Set("u", statusNamed("u", "a"), nil, at(9)) },
			wantName: "a",
		},
		"read after a delete": {
			before: func(c *Cache) {
				c.Set("u", statusNamed("u", "old"), nil, at(4))
				c.Delete("u")
			},
			release:  func(c *Cache) { c.Set("u", statusNamed("u", "new"), nil, at(7)) },
			wantName: "new",
		},
		"global time after a delete": {
			before: func(c *Cache) {
				c.Set("u", statusNamed("u", "old"), nil, at(4))
				c.Delete("u")
			},
			release: func(c *Cache) { c.UpdateTime(at(7)) },
		},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := NewCache()
				g := startGet(context.Background(), c, "u", at(5))
				if g.returned() {
					t.Fatalf("GetNewerThan returned at once: %+v, %v", g.st, g.err)
				}
				if tc.before != nil {
					tc.before(c)
				}
				if g.returned() {
					t.Fatalf("GetNewerThan returned before its condition held: %+v, %v", g.st, g.err)
				}
				tc.release(c)
				if !g.returned() {
					t.Fatal("GetNewerThan still blocks")
				}
				if g.st == nil || g.st.Ref.UID != "u" || g.st.Ref.Name != tc.wantName {
					t.Errorf("status %+v, want uid u name %q", g.st, tc.wantName)
				}
				if !errors.Is(g.err, tc.wantErr) || (g.err == nil) != (tc.wantErr == nil) {
					t.Errorf("error %v, want %v", g.err, tc.wantErr)
				}
				if n := c.waiterCount(); n != 0 {
					t.Errorf("%d waiters left", n)
				}
			})
		})
	}
}

func TestCacheGetNewerThanWakesOnlySatisfiedWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCache()
		early := startGet(context.Background(), c, "u", at(1))
		late := startGet(context.Background(), c, "u", at(10))
		other := startGet(context.Background(), c, "v", at(1))
		c.Set("u", statusNamed("u", "a"), nil, at(5))
		if !early.returned() || early.st.Ref.Name != "a" {
			t.Errorf("waiter for 1 after a read at 5: returned %v with %+v", early.returned(), early.st)
		}
		if late.returned() || other.returned() {
			t.Fatalf("late returned %v, other returned %v; both must still wait", late.returned(), other.returned())
		}
		c.UpdateTime(at(10))
		if late.returned() {
			t.Fatal("global time 10 is not after 10")
		}
		if !other.returned() || other.st.Ref != (cri.PodRef{UID: "v"}) || other.err != nil {
			t.Errorf("waiter for v after global time 10: %+v, %v", other.st, other.err)
		}
		c.UpdateTime(at(11))
		if !late.returned() || late.st.Ref.Name != "a" {
			t.Errorf("waiter for 10 after global time 11: %+v", late.st)
		}
		if n := c.waiterCount(); n != 0 {
			t.Errorf("%d waiters left", n)
		}
	})
}

func TestCacheGetNewerThanContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCache()
		ctx, cancel := context.WithCancel(context.Background())
		g := startGet(ctx, c, "u", at(5))
		stay := startGet(context.Background(), c, "u", at(5))
		if g.returned() {
			t.Fatal("returned before the context ended")
		}
		cancel()
		if !g.returned() {
			t.Fatal("still blocked after the context ended")
		}
		if !errors.Is(g.err, context.Canceled) || g.st == nil || g.st.Ref.UID != "u" {
			t.Errorf("got %+v, %v; want an empty status and context.Canceled", g.st, g.err)
		}
		if n := c.waiterCount(); n != 1 {
			t.Errorf("%d waiters registered, want only the other one", n)
		}
		c.Set("u", statusNamed("u", "a"), nil, at(6))
		if !stay.returned() || stay.st.Ref.Name != "a" {
			t.Errorf("the other waiter got %+v", stay.st)
		}
	})

	t.Run("deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := NewCache()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := c.GetNewerThan(ctx, "u", at(5))
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error %v, want context.DeadlineExceeded", err)
			}
			if n := c.waiterCount(); n != 0 {
				t.Errorf("%d waiters left", n)
			}
		})
	})
}

func TestCacheDeleteStale(t *testing.T) {
	c := NewCache()
	c.Set("present-old", statusNamed("present-old", "a"), nil, at(1))
	c.Set("gone-old", statusNamed("gone-old", "b"), nil, at(1))
	c.Set("gone-at", statusNamed("gone-at", "c"), nil, at(5))
	c.Set("gone-newer", statusNamed("gone-newer", "d"), nil, at(6))
	present := map[types.UID]bool{"present-old": true}
	c.deleteStale(func(uid types.UID) bool { return present[uid] }, at(5))
	for uid, want := range map[types.UID]string{"present-old": "a", "gone-old": "", "gone-at": "c", "gone-newer": "d"} {
		if st, _ := c.Get(uid); st.Ref.Name != want {
			t.Errorf("%s: name %q, want %q", uid, st.Ref.Name, want)
		}
	}
}

// TestCacheConcurrent is for the race detector: writers and waiters of
// several pods at once; every waiter must return.
func TestCacheConcurrent(t *testing.T) {
	c := NewCache()
	var wg sync.WaitGroup
	for i := range 8 {
		uid := types.UID(fmt.Sprintf("pod-%d", i%3))
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := range 50 {
				c.Set(uid, statusNamed(uid, "x"), nil, at(j))
				if j%10 == 0 {
					c.Delete(uid)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for j := range 50 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if _, err := c.GetNewerThan(ctx, uid, at(j%40)); err != nil {
					t.Errorf("GetNewerThan(%s, %d): %v", uid, j, err)
				}
				cancel()
			}
		}()
	}
	// Whatever the interleaving, a global time after every minTime
	// releases every waiter.
	c.UpdateTime(at(100))
	wg.Wait()
	if n := c.waiterCount(); n != 0 {
		t.Errorf("%d waiters left", n)
	}
}
