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
// It must never act on a pod: it only reads the runtime, which it knows
// through PodStatusReader. OnChange runs on the relist goroutine and must
// not block. It must not import lifecycle.
package pleg
