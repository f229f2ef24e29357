package lifecycle

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// WorkQueue holds the pods to sync again and when: the pod workers enqueue
// a pod after every sync (at once after a phase transition, after a resync
// interval on success, after a back-off on error) and the engine's sync loop
// takes the pods whose time has come. A pod is in the queue at most once;
// enqueuing it again replaces its time.
type WorkQueue struct {
	clock clock.Clock

	mu    sync.Mutex
	queue map[types.UID]time.Time // guarded by mu
}

// NewWorkQueue returns an empty queue read with clk.
func NewWorkQueue(clk clock.Clock) *WorkQueue {
	return &WorkQueue{clock: clk, queue: map[types.UID]time.Time{}}
}

// Enqueue makes uid due after delay (0: due now).
func (q *WorkQueue) Enqueue(uid types.UID, delay time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.queue[uid] = q.clock.Now().Add(delay)
}

// GetWork removes and returns the pods that are due.
func (q *WorkQueue) GetWork() []types.UID {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	var due []types.UID
	for uid, at := range q.queue {
		if !at.After(now) {
			due = append(due, uid)
			delete(q.queue, uid)
		}
	}
	return due
}

// Len returns the number of queued pods, due or not.
func (q *WorkQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}
