package cri

import (
	"strconv"
	"strings"
	"sync"
)

// storeGuard keeps crivk's own CRI calls from reaching a containerd whose
// CRI plugin writes its sandbox store's map under a read lock
// (containerd#8130, backported to 1.6 as containerd#8819) while another of
// crivk's calls reads that map.
//
// In containerd 1.6.0 to 1.6.21 (and 1.7.0's betas) the sandbox store's
// UpdateContainerStats takes the store's RLock and assigns to the map. It is
// called by PodSandboxStats and ListPodSandboxStats (cpuContainerStats ->
// getUsageNanoCores, once per sandbox). Any other goroutine in the store
// under the same RLock can then meet the write, and Go aborts the whole
// process: Store.List (ListPodSandbox, ListPodSandboxStats) with "concurrent
// map iteration and map write", another UpdateContainerStats (two sandbox
// stats calls at once) with "concurrent map writes", Store.Get with
// "concurrent map read and map write". The container store is not affected
// (its UpdateContainerStats takes the write lock).
//
// The guard is an RWMutex around whole RPCs: the sandbox-stats call takes
// the write side (so it also excludes itself), the calls that read the
// sandbox map and answer quickly take the read side. Calls that look a
// sandbox up once and then run long (CreateContainer, StartContainer,
// StopPodSandbox, RemovePodSandbox) are left out: holding them would stall
// the stats for their duration, and their exposure is one lookup, not a
// walk over every sandbox.
//
// A call waits for the guard before its own deadline starts, and the wait
// does not watch the caller's context: it is bounded by the deadline of the
// call it waits for (the request timeout).
//
// A nil *storeGuard guards nothing: runtimes that are not affected pay one
// nil check per call.
type storeGuard struct {
	mu sync.RWMutex
}

// guardMode is how one CRI call takes the guard.
type guardMode int

const (
	guardNone      guardMode = iota // the call does not read the sandbox map, or runs long
	guardShared                     // reads the sandbox map (List or Get) and returns quickly
	guardExclusive                  // writes the sandbox map under containerd's read lock
)

func (m guardMode) String() string {
	switch m {
	case guardShared:
		return "shared"
	case guardExclusive:
		return "exclusive"
	}
	return "none"
}

// guardModes are the calls crivk makes that the guard orders, by the CRI
// method name; every other call is guardNone.
var guardModes = map[string]guardMode{
	"ListPodSandboxStats": guardExclusive, // Store.List, then UpdateContainerStats per sandbox
	"PodSandboxStats":     guardExclusive, // UpdateContainerStats (crivk does not call it today)
	"ListPodSandbox":      guardShared,    // Store.List: the crash seen in the bench
	"PodSandboxStatus":    guardShared,    // Store.Get
	"ListContainers":      guardShared,    // Store.Get with a sandbox filter
	"ListContainerStats":  guardShared,    // Store.Get with a sandbox filter
}

// newStoreGuard is the guard for the runtime that answered Version with
// name and version: nil unless the runtime is an affected containerd.
func newStoreGuard(runtimeName, runtimeVersion string) *storeGuard {
	if !sandboxStatsRace(runtimeName, runtimeVersion) {
		return nil
	}
	return &storeGuard{}
}

// sandboxStatsRace tells whether the runtime is a containerd without
// containerd#8130/#8819: 1.6.0 to 1.6.21 (the sandbox store's
// UpdateContainerStats came with ListPodSandboxStats in 1.6.0; 1.6.22 has
// the fix) and 1.7.0's pre-releases before rc.0. A distribution's version
// ("1.6.20~ds1", "1.6.20-0ubuntu1") counts as its upstream version: a
// distribution that backported the fix is still guarded, which costs only
// the serialization. A version that cannot be parsed is not guarded.
func sandboxStatsRace(runtimeName, runtimeVersion string) bool {
	if runtimeName != "containerd" {
		return false
	}
	v := strings.TrimPrefix(runtimeVersion, "v")
	pre := ""
	if i := strings.IndexAny(v, "~+"); i >= 0 { // Debian's "~ds1", build metadata
		v = v[:i]
	}
	if i := strings.IndexByte(v, '-'); i >= 0 {
		v, pre = v[:i], v[i+1:]
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return false
	}
	var n [3]int
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil {
			return false
		}
		n[i] = x
	}
	switch {
	case n[0] == 1 && n[1] == 6:
		return n[2] < 22
	case n[0] == 1 && n[1] == 7 && n[2] == 0:
		return strings.HasPrefix(pre, "beta")
	}
	return false
}

// enter takes the guard as call needs it and returns its release. It is
// safe on a nil guard.
func (g *storeGuard) enter(call string) (release func()) {
	if g == nil {
		return func() {}
	}
	switch guardModes[call] {
	case guardExclusive:
		g.mu.Lock()
		return g.mu.Unlock
	case guardShared:
		g.mu.RLock()
		return g.mu.RUnlock
	}
	return func() {}
}

// tryEnter is enter without waiting: ok is false if call would wait.
func (g *storeGuard) tryEnter(call string) (release func(), ok bool) {
	if g == nil {
		return func() {}, true
	}
	switch guardModes[call] {
	case guardExclusive:
		if !g.mu.TryLock() {
			return nil, false
		}
		return g.mu.Unlock, true
	case guardShared:
		if !g.mu.TryRLock() {
			return nil, false
		}
		return g.mu.RUnlock, true
	}
	return func() {}, true
}
