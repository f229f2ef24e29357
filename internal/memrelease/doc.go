// Package memrelease returns to the operating system the heap a burst of
// work left behind, once crivk has gone quiet.
//
// Why it exists: Go collects garbage when the heap grows past its goal
// (GOGC, twice the live heap) and otherwise only every two minutes (the
// runtime's forced collection). After a burst (a batch of pods created or
// deleted) crivk allocates little, so the burst's last garbage, up to the
// whole GOGC headroom, stays in the heap and in RSS until that forced
// collection; the spans it frees then go back to the OS through the
// background scavenger, gradually. An idle node therefore shows, for up to
// two minutes after each burst, the RSS of its busiest moment.
//
// # The loop
//
// cmd/crivk runs Run once, for the life of the process. Every Interval
// (10 s) it reads two counters of runtime/metrics: completed GC cycles and
// bytes allocated. It calls Release (debug.FreeOSMemory: one collection,
// then every free page returned at once) when both hold:
//
//  1. quiet: no GC cycle completed since the previous check, so the heap
//     is not growing towards a collection of its own;
//  2. a burst happened: at least MinAllocated bytes were allocated since
//     the last release (or since the start).
//
// An idle process is left alone (it allocates less than MinAllocated
// between releases) and so is a busy one (it collects on its own; its
// checks are not quiet). After a burst the release comes one or two
// intervals after the last collection of the burst. The counters are read
// again after each release, so that its own collection does not count as
// activity.
//
// # What it costs and what it must never do
//
// One forced collection of the live heap per burst (measured: 6 MB live
// after a 250-pod batch, 28 ms of CPU, most of it in idle-priority mark
// workers), and the page faults of reusing the pages it returned. A node
// with pods collects on its own every few seconds and is never quiet (110
// pods held for 180 s: no release).
// It only calls into the Go runtime: it must never change what crivk does
// or asks, nor run more often than once per Interval. The measurement that
// justified it is in docs/scale.md (W5 RSS).
package memrelease
