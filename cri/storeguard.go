package cri

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sync/semaphore"
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
// The guard is a readers-writer lock around whole RPCs: the sandbox-stats
// call takes it exclusively (so it also excludes itself), the calls that
// read the sandbox map and answer quickly share it. It narrows the race,
// it does not close it: calls that look a sandbox up once and then run
// long (CreateContainer, StartContainer, StopPodSandbox, RemovePodSandbox,
// and the streaming calls such as PortForward) are left out, because
// holding them would stall the stats for their duration and their exposure
// is one lookup, not a walk over every sandbox; containerd's own event
// loop looks sandboxes up in the store on its own; other clients of the same
// containerd (a kubelet, crictl) are not ordered at all.
//
// A call waits for the guard before its own deadline starts. The wait ends
// with the caller's context (enter returns its error), and otherwise when
// the call it waits for returns, within that call's deadline (the request
// timeout): a hung ListPodSandboxStats still holds the shared calls of
// contexts that do not end (the PLEG's relist) for up to the request
// timeout, but no longer those of an HTTP request whose client went away,
// a pod sync that was cancelled, or a shutdown. The sandbox stats calls
// keep the kubelet's deadline (the request timeout, as its
// remoteRuntimeService.ListPodSandboxStats): a shorter one would not make
// containerd stop, since its handler walks the sandboxes without watching
// the context, and the guard would be released while that walk may still
// write the map, the very overlap it is for (at the request timeout that
// can happen too, but only after a call hung that long).
//
// The waiters are served in order (semaphore.Weighted): a waiting sandbox
// stats call keeps later shared calls from passing it, so the stats are
// not starved by a steady flow of listings.
//
// A nil *storeGuard guards nothing: runtimes that are not affected pay one
// nil check per call.
type storeGuard struct {
	sem *semaphore.Weighted
}

// guardWeight is the guard's capacity: an exclusive call takes all of it,
// a shared one 1. It is far more than crivk ever has shared calls in flight.
const guardWeight = 1 << 30

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
	return &storeGuard{sem: semaphore.NewWeighted(guardWeight)}
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

// enter takes the guard as call needs it and returns its release; if ctx
// ends first, it returns ctx's error and holds nothing. It is safe on a nil
// guard.
func (g *storeGuard) enter(ctx context.Context, call string) (release func(), err error) {
	n := g.weight(call)
	if n == 0 {
		return func() {}, nil
	}
	if err := g.sem.Acquire(ctx, n); err != nil {
		return nil, fmt.Errorf("waiting for the sandbox store guard: %w", err)
	}
	return func() { g.sem.Release(n) }, nil
}

// weight is how much of the guard call takes, 0 for none (also on a nil
// guard).
func (g *storeGuard) weight(call string) int64 {
	if g == nil {
		return 0
	}
	switch guardModes[call] {
	case guardExclusive:
		return guardWeight
	case guardShared:
		return 1
	}
	return 0
}
