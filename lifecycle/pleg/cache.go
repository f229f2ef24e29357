package pleg

import (
	"context"
	"sync"
	"time"

	"github.com/crivk/crivk/cri"
	"k8s.io/apimachinery/pkg/types"
)

// Cache holds the latest runtime status read for each pod, with the time the
// read started, and answers "the status of pod U as of some moment after
// T" (the kubelet's pod cache, pkg/kubelet/container/cache.go).
//
// Writers:
//   - the PLEG, for every pod whose sandboxes or containers changed (and
//     every pod whose read failed in the previous relist) unless the
//     entry already shows the states the relist listed, then UpdateTime
//     with the relist's start time once every such pod is written: from
//     then on, the cache holds every pod's state as of that time;
//   - the engine (lifecycle's syncer.refresh), right after it acted on a pod, so
//     the result reaches the pod's next sync and the API without waiting
//     for the next relist.
//
// Readers: the pod workers call GetNewerThan(uid, last sync time) before
// each piece of work, so that a sync never acts on a state read before
// the previous sync of the same pod ended; Get is for a quick look.
//
// Timestamps are the writer's clock reading taken before the read started.
// A pod the runtime knows nothing of has no entry: Get returns an empty
// status for it. Entries are removed by Delete; the PLEG also drops the
// entries of pods that a relist no longer sees (see PLEG), so an entry
// never outlives its pod by more than a relist period or two.
//
// A returned *cri.PodStatus is shared: callers must not modify it.
type Cache struct {
	mu sync.Mutex
	// entries maps a pod UID to its latest read. Guarded by mu.
	entries map[types.UID]cacheEntry
	// global is the time as of which every pod's state is in entries; zero
	// until the first UpdateTime. Only goes up. Guarded by mu.
	global time.Time
	// waiters are the blocked GetNewerThan calls by UID, including UIDs
	// with no entry. Guarded by mu.
	waiters map[types.UID]map[*cacheWaiter]struct{}
}

type cacheEntry struct {
	status   *cri.PodStatus // never nil
	err      error
	modified time.Time // when the read that produced status started
}

// cacheWaiter is one blocked GetNewerThan. The writer that satisfies it
// removes it from Cache.waiters and sends the entry on ch (buffered, so
// the writer never blocks); a waiter whose context ends removes itself.
type cacheWaiter struct {
	minTime time.Time
	ch      chan cacheEntry
}

// NewCache returns an empty cache whose global timestamp is unset: until
// the first UpdateTime, GetNewerThan waits for the pod's own entry.
func NewCache() *Cache {
	return &Cache{entries: map[types.UID]cacheEntry{}, waiters: map[types.UID]map[*cacheWaiter]struct{}{}}
}

func emptyStatus(uid types.UID) *cri.PodStatus {
	return &cri.PodStatus{Ref: cri.PodRef{UID: uid}}
}

// Get returns the latest entry for uid: its status (never nil; for a pod
// without an entry an empty status whose Ref holds only the UID) and the
// error of the read that produced it. When err is not nil the status is
// empty and says nothing of the pod.
func (c *Cache) Get(uid types.UID) (status *cri.PodStatus, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.get(uid)
	return e.status, e.err
}

// Modified returns when the read behind uid's entry started, and false if
// the pod has no entry (or the read failed).
func (c *Cache) Modified(uid types.UID) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[uid]
	if !ok || e.err != nil {
		return time.Time{}, false
	}
	return e.modified, true
}

// get returns uid's entry or an empty one; c.mu must be held.
func (c *Cache) get(uid types.UID) cacheEntry {
	if e, ok := c.entries[uid]; ok {
		return e
	}
	return cacheEntry{status: emptyStatus(uid)}
}

// newerThan returns uid's entry (or an empty one) if it reflects the
// runtime as of some moment after minTime: the entry's own read started
// after minTime, or a relist that started after minTime has completed
// (then a missing entry means the runtime has nothing of the pod). c.mu
// must be held.
//
// Both comparisons are strict, so a read that started at the very clock
// reading minTime (possibly before what happened at minTime) never counts.
func (c *Cache) newerThan(uid types.UID, minTime time.Time) (cacheEntry, bool) {
	e, ok := c.entries[uid]
	if (ok && e.modified.After(minTime)) || c.global.After(minTime) {
		return c.get(uid), true
	}
	return cacheEntry{}, false
}

// GetNewerThan returns what Get would, once the cache reflects the runtime
// as of some moment after minTime: uid's entry was read after minTime, or
// UpdateTime was called with a time after minTime (then the pod's entry,
// or an empty status if it has none). It blocks until then or until ctx
// ends; it then returns an empty status and ctx.Err().
func (c *Cache) GetNewerThan(ctx context.Context, uid types.UID, minTime time.Time) (*cri.PodStatus, error) {
	c.mu.Lock()
	if e, ok := c.newerThan(uid, minTime); ok {
		c.mu.Unlock()
		return e.status, e.err
	}
	w := &cacheWaiter{minTime: minTime, ch: make(chan cacheEntry, 1)}
	if c.waiters[uid] == nil {
		c.waiters[uid] = map[*cacheWaiter]struct{}{}
	}
	c.waiters[uid][w] = struct{}{}
	c.mu.Unlock()

	select {
	case e := <-w.ch:
		return e.status, e.err
	case <-ctx.Done():
	}
	c.mu.Lock()
	c.removeWaiter(uid, w)
	c.mu.Unlock()
	// A writer may have satisfied w just before it was removed; the
	// caller asked to stop, so that answer is dropped.
	return emptyStatus(uid), ctx.Err()
}

// removeWaiter forgets w; c.mu must be held.
func (c *Cache) removeWaiter(uid types.UID, w *cacheWaiter) {
	ws := c.waiters[uid]
	delete(ws, w)
	if len(ws) == 0 {
		delete(c.waiters, uid)
	}
}

// notify hands the waiters of uid that are now satisfied their answer;
// c.mu must be held.
func (c *Cache) notify(uid types.UID) {
	for w := range c.waiters[uid] {
		if e, ok := c.newerThan(uid, w.minTime); ok {
			w.ch <- e
			c.removeWaiter(uid, w)
		}
	}
}

// Set stores status and err as uid's entry, read at timestamp (taken
// before the read started), unless the stored entry was read later: then
// it returns false and changes nothing. An equal timestamp replaces the
// entry. A nil status is stored as an empty one (as with a failed read,
// whose err is not nil). Waiters that the new entry satisfies return.
func (c *Cache) Set(uid types.UID, status *cri.PodStatus, err error, timestamp time.Time) bool {
	if status == nil {
		status = emptyStatus(uid)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[uid]; ok && old.modified.After(timestamp) {
		return false
	}
	c.entries[uid] = cacheEntry{status: status, err: err, modified: timestamp}
	c.notify(uid)
	return true
}

// Delete forgets uid's entry: Get returns an empty status for it again.
// Waiters of uid keep waiting, for a later Set or UpdateTime.
func (c *Cache) Delete(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, uid)
}

// UpdateTime records that every pod's state as of t is in the cache (the
// PLEG calls it after each successful relist that started at t). A t not
// after the current global timestamp changes nothing. Waiters that the
// new time satisfies return.
func (c *Cache) UpdateTime(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !t.After(c.global) {
		return
	}
	c.global = t
	for uid := range c.waiters {
		c.notify(uid)
	}
}

// deleteStale drops the entries of the pods for which present is false
// and whose read started before t: the PLEG's relist that started at t
// saw nothing of those pods in the runtime, so their entries say nothing
// that an empty status does not say better. Entries read after t (an
// engine read racing the relist) are kept.
func (c *Cache) deleteStale(present func(types.UID) bool, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid, e := range c.entries {
		if e.modified.Before(t) && !present(uid) {
			delete(c.entries, uid)
		}
	}
}
