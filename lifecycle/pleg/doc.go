// Package pleg keeps the node's view of the runtime current: the PLEG (the
// kubelet's generic pod lifecycle event generator, pkg/kubelet/pleg) relists
// the runtime and writes what changed into the Cache (the kubelet's pod
// status cache, pkg/kubelet/container/cache.go), which the pod workers read
// before each piece of work. The two live in one package because the PLEG is
// the Cache's only writer besides the engine and the only one that drops
// its stale entries.
//
// The caller (cmd/crivk) wires it as:
//
//	cache := NewCache()                    shared with lifecycle.Config.Cache
//	p, err := New(Config{Runtime, Cache: cache, OnChange: engine.Kick,
//	                     Wake: <containerd task events>, ...})
//	go p.Run(ctx)                          relist every Period and on Wake
//	p.Healthy()                            the node's PLEG health check
//
// One relist (PLEG.Relist; the diagram is above the PLEG type) lists every
// sandbox and container once, diffs the list with the previous one
// (generateEvents, a pure function, and diffSnapshots), reads each pod that
// changed into the Cache, raises the Cache's global time to the relist's
// start (Cache.UpdateTime), drops the entries of pods the runtime no
// longer has, and only then calls OnChange for each changed pod. A pod
// whose read failed is read again at the next relist.
//
// The Cache answers "the status of pod U as of some moment after T"
// (Cache.GetNewerThan, which blocks until a read or a relist that started
// after T is in); the engine also writes it right after it acted on a pod
// (Cache.Set), so that the result reaches the next sync without waiting
// for a relist. A returned *cri.PodStatus is shared and must not be
// modified.
//
// # One walk for many nodes (Shared)
//
// A multi-node crivk (--node-count above 1, docs/scale.md) walks the
// shared runtime once per period for all its nodes, not once per node:
//
//	internal/nodeagent (runNodes)             once per process
//	  s := NewShared(SharedConfig{Runtime: base, Period, Wake: <one task-event stream>, WakeSpacing})
//	  for each node: p := New(Config{..., Feed: s.Feed(node)}); go p.Run(ctx)
//	  go s.Run(ctx)
//
//	Shared.Run: every Period and on Wake (spaced as a PLEG's woken relists)
//	  start := now; base.SnapshotNodes ──> 2 list calls, split by io.crivk.node
//	  for each node's Feed: put(start, its share or the list's error)   never blocks
//	PLEG.Run (one goroutine per node): take the latest walk of its Feed
//	  relist from it as from its own list, with the walk's start as ts
//
// Each node's PLEG keeps the kubelet's semantics for its own pods: it diffs
// its share against its previous relist, reads (GetPodStatus, through its
// own node's runtime) only its pods that changed, raises its own Cache's
// time to the walk's start, on which its pod workers wait (GetNewerThan),
// and kicks only its own engine. Its Healthy and its ObserveRelist are its
// own: a relist's duration runs from the walk's start to the end of the
// node's reads, its interval between the starts of the walks it took.
//
// A slow node: a Feed holds the latest walk only. A node whose reads hang
// (a runtime call up to its timeout) takes the newest walk when it is done
// and skips those in between (as the kubelet, a PLEG sees what changed
// between two lists, not each step); the walk and the other nodes go on.
// Its lastRelist stays at the walk it is stuck in, so past the threshold
// that node alone reports "PLEG is not healthy". A runtime error: the
// walk's error is put in every Feed, every node logs it as a failed relist
// and changes nothing, and past the threshold every node is unhealthy, as
// a single node would be. Objects labelled for a node the process does not
// serve, or unlabelled, are nobody's: logged once, never fed to a node.
//
// Relist still lists the node's own runtime (a forced relist); a walk
// that started before a node's previous relist is skipped by that node.
// A single-node crivk has no Shared: its PLEG lists its runtime itself,
// exactly as before.
//
// It must never act on a pod: it only reads the runtime, which it knows
// through PodStatusReader. OnChange runs on the relist goroutine and must
// not block. It must not import lifecycle.
package pleg
