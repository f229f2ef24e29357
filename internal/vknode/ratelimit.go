package vknode

import (
	"time"

	"k8s.io/client-go/util/workqueue"
)

// retryBackoff is the rate limiter of virtual-kubelet's pod controller
// queues in crivk. virtual-kubelet's default (client-go's controller
// default) adds, to every new item, the larger of a per-item exponential
// delay and a token bucket of 10 items/s with a burst of 100 shared by all
// pods: a node given 250 pods at once waited 15 s for the bucket before
// the last one was even handed to the provider, and as long again for its
// status to be written. The kubelet has no such queue; its API traffic is
// bounded by its client's QPS and burst alone (--kube-api-qps/burst), as
// crivk's is. So the first attempt at an item is immediate, and only
// failed attempts back off exponentially (5 ms doubling up to max) until
// the item succeeds and is forgotten.
type retryBackoff struct {
	inner workqueue.TypedRateLimiter[any]
}

func newRetryBackoff(maxDelay time.Duration) retryBackoff {
	return retryBackoff{inner: workqueue.NewTypedItemExponentialFailureRateLimiter[any](5*time.Millisecond, maxDelay)}
}

func (r retryBackoff) When(item any) time.Duration {
	first := r.inner.NumRequeues(item) == 0
	d := r.inner.When(item)
	if first {
		return 0
	}
	return d
}

func (r retryBackoff) Forget(item any)          { r.inner.Forget(item) }
func (r retryBackoff) NumRequeues(item any) int { return r.inner.NumRequeues(item) }
