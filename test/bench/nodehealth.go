package main

import (
	"context"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// nodeHealth samples, every period while a batch is created, the agent's
// Node Ready condition and the age of its Lease (now - renewTime): the
// density goal asks that the node stays Ready and its lease is never late
// while 250 pods start on this machine. A lease older than its duration
// (40 s, the kubelet's nodeLeaseDurationSeconds) has expired: the node
// lifecycle controller would mark the node Unknown.
type nodeHealth struct {
	client kubernetes.Interface
	node   string
	period time.Duration
	now    func() time.Time

	mu       sync.Mutex
	samples  int
	notReady int
	maxAge   time.Duration
}

// run samples until ctx ends.
func (h *nodeHealth) run(ctx context.Context) {
	t := time.NewTicker(h.period)
	defer t.Stop()
	for {
		h.sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (h *nodeHealth) sample(ctx context.Context) {
	n, nerr := h.client.CoreV1().Nodes().Get(ctx, h.node, metav1.GetOptions{ResourceVersion: "0"})
	l, lerr := h.client.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, h.node, metav1.GetOptions{ResourceVersion: "0"})
	if ctx.Err() != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.samples++
	if nerr != nil || !nodeIsReady(n) {
		h.notReady++
	}
	if lerr == nil {
		if age := leaseAge(l, h.now()); age > h.maxAge {
			h.maxAge = age
		}
	}
}

// result is the number of samples, those where the node was not Ready
// (or could not be read) and the oldest lease seen.
func (h *nodeHealth) result() (samples, notReady int, maxAge time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.samples, h.notReady, h.maxAge
}

func nodeIsReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// leaseAge is how long ago the lease was renewed at now (0 if never).
func leaseAge(l *coordinationv1.Lease, now time.Time) time.Duration {
	if l.Spec.RenewTime == nil {
		return 0
	}
	return now.Sub(l.Spec.RenewTime.Time)
}
