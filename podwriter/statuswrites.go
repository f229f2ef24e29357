package podwriter

import (
	"context"
	"strconv"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// StatusWrites is what this agent last wrote of each pod's status, the part
// of the kubelet's status manager that virtual-kubelet lacks: the pod
// object the API server returned for the last successful status write
// (its resourceVersion and status), and which pods have their final status
// written or being written before their deletion.
//
// Two writers send a pod's status at its end: virtual-kubelet's status
// queue (every status the engine publishes) and DeleteOnTerminated (the
// final status, then the deletion). Each took its resourceVersion from the
// informer, which lags behind the other's write, so one of them conflicted
// (409) and was retried with a GET, on every deletion. With this record
// DeleteOnTerminated starts from the newest object known (the informer's
// or the one its own side last wrote) and virtual-kubelet's queued writes
// of a pod whose final status is written are dropped: nothing newer can
// follow it. Safe for concurrent use; entries go with the pod (Forget).
//
// A write of virtual-kubelet's may be in flight when the deletion path
// starts (the queue hands the engine's final status on as soon as it has
// it): Finalize marks the pod final and then waits for the writes in
// flight, so the deletion path starts from their result.
type StatusWrites struct {
	mu       sync.Mutex
	last     map[types.UID]*v1.Pod
	final    map[types.UID]bool
	inflight map[types.UID]*flight
}

// flight counts a pod's status writes in flight; idle is closed when the
// count drops to 0.
type flight struct {
	n      int
	idle   chan struct{}
	closed bool
}

// NewStatusWrites returns an empty record.
func NewStatusWrites() *StatusWrites {
	return &StatusWrites{last: map[types.UID]*v1.Pod{}, final: map[types.UID]bool{}, inflight: map[types.UID]*flight{}}
}

// Begin is called before a status write of the pod: ok false means the
// pod's final status is written by the deletion path and this write is
// stale (drop it); otherwise the write counts as in flight until end is
// called with the object the API returned (nil if the write failed).
//
// A write that ends after the pod was forgotten (Forget ran while it was
// in flight, after Finalize gave up waiting) records nothing: the pod is
// gone and its entry would never be removed.
func (w *StatusWrites) Begin(uid types.UID) (end func(written *v1.Pod), ok bool) {
	if w == nil {
		return func(*v1.Pod) {}, true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.final[uid] {
		return nil, false
	}
	f := w.inflight[uid]
	if f == nil {
		f = &flight{idle: make(chan struct{})}
		w.inflight[uid] = f
	}
	f.n++
	return func(written *v1.Pod) { w.end(uid, f, written) }, true
}

// end ends one write of flight f of the pod.
func (w *StatusWrites) end(uid types.UID, f *flight, written *v1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	current := w.inflight[uid] == f
	if current && written != nil && written.UID == uid {
		if cur := w.last[uid]; cur == nil || newerThan(written, cur) {
			w.last[uid] = written
		}
	}
	if f.n--; f.n <= 0 {
		f.release()
		if current {
			delete(w.inflight, uid)
		}
	}
}

// release closes idle once.
func (f *flight) release() {
	if !f.closed {
		close(f.idle)
		f.closed = true
	}
}

// Finalize marks the pod final (later writes are stale: Begin refuses them), waits until none of its
// writes is in flight or ctx ends, and returns the object of its last
// recorded write (nil if none).
func (w *StatusWrites) Finalize(ctx context.Context, uid types.UID) *v1.Pod {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	w.final[uid] = true
	w.mu.Unlock()
	return w.Settled(ctx, uid)
}

// Settled waits until none of the pod's status writes that are in flight
// now is (or ctx ends), and returns the object of its last recorded write
// (nil if none).
func (w *StatusWrites) Settled(ctx context.Context, uid types.UID) *v1.Pod {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	f := w.inflight[uid]
	w.mu.Unlock()
	if f != nil {
		select {
		case <-f.idle:
		case <-ctx.Done():
		}
	}
	return w.Last(uid)
}

// Last returns the object of the pod's last recorded status write, nil if
// none.
func (w *StatusWrites) Last(uid types.UID) *v1.Pod {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last[uid]
}

// IsFinal reports whether Finalize was called for the pod.
func (w *StatusWrites) IsFinal(uid types.UID) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.final[uid]
}

// Forget drops the pod's entries (its object is gone from the API),
// including the count of its writes in flight: a Finalize waiting for them
// is released, and their End records nothing.
func (w *StatusWrites) Forget(uid types.UID) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.last, uid)
	delete(w.final, uid)
	if f := w.inflight[uid]; f != nil {
		f.release()
		delete(w.inflight, uid)
	}
}

// ForgetDeleted is the pod informer handler that drops a pod's entries
// (Forget) when its object leaves the informer, whoever deleted it.
func ForgetDeleted(writes *StatusWrites) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*v1.Pod); ok {
				writes.Forget(p.UID)
			}
		},
	}
}

// Len is the number of pods recorded.
func (w *StatusWrites) Len() int {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(w.last)
	for uid := range w.final {
		if w.last[uid] == nil {
			n++
		}
	}
	return n
}

// newest returns the newer of two copies of the same object, by
// resourceVersion; a nil one, or versions that are not numbers (opaque to
// clients by contract, integers with etcd), give a the preference.
func newest(a, b *v1.Pod) *v1.Pod {
	switch {
	case a == nil:
		return b
	case b == nil || b.UID != a.UID:
		return a
	case newerThan(b, a):
		return b
	}
	return a
}

// newerThan: a's resourceVersion is a number above b's.
func newerThan(a, b *v1.Pod) bool {
	ra, errA := strconv.ParseUint(a.ResourceVersion, 10, 64)
	rb, errB := strconv.ParseUint(b.ResourceVersion, 10, 64)
	return errA == nil && errB == nil && ra > rb
}
