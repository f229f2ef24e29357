package credentialprovider

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// purgeInterval: expired entries are dropped when looked up, and all of
// them at the first lookup this long after the last sweep (the kubelet's
// cachePurgeInterval).
const purgeInterval = 15 * time.Minute

// cache is one provider's cache of responses (the kubelet's
// cache.ExpirationStore of cacheEntry): credentials by key until their
// expiry. An entry is valid while the clock is not after its expiry.
type cache struct {
	clock clock.PassiveClock

	mu sync.Mutex
	// entries and lastPurge are guarded by mu.
	entries   map[string]cacheEntry
	lastPurge time.Time
}

type cacheEntry struct {
	auth      map[string]Credential
	expiresAt time.Time
}

func newCache(c clock.PassiveClock) *cache {
	return &cache{clock: c, entries: map[string]cacheEntry{}, lastPurge: c.Now()}
}

// get returns key's credentials if they are cached and not expired.
func (c *cache) get(key string) (map[string]Credential, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if now.After(c.lastPurge.Add(purgeInterval)) {
		for k, e := range c.entries {
			if now.After(e.expiresAt) {
				delete(c.entries, k)
			}
		}
		c.lastPurge = now
	}
	e, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	if now.After(e.expiresAt) {
		delete(c.entries, key)
		return nil, false
	}
	return e.auth, true
}

func (c *cache) add(key string, auth map[string]Credential, expiresAt time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[key] = cacheEntry{auth: auth, expiresAt: expiresAt}
}

// len is the number of entries, expired ones included (tests).
func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
