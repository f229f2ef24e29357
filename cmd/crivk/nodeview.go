package main

import (
	"context"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
)

// nodeView is the node as the API has it (labels, taints, allocatable),
// for admission: refreshed every period from the API server's watch cache
// by run, so that admitting a pod never waits for the API. Until the
// first read, and whenever reading fails, it is the last node seen (at
// first the node crivk registers).
type nodeView struct {
	read   func(ctx context.Context) (*v1.Node, error)
	period time.Duration

	mu   sync.Mutex
	node *v1.Node // guarded by mu
}

func newNodeView(initial *v1.Node, read func(ctx context.Context) (*v1.Node, error), period time.Duration) *nodeView {
	return &nodeView{read: read, period: period, node: initial.DeepCopy()}
}

// Node returns the latest node read.
func (v *nodeView) Node() *v1.Node {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.node
}

// run refreshes the view until ctx ends.
func (v *nodeView) run(ctx context.Context) {
	t := time.NewTicker(v.period)
	defer t.Stop()
	for {
		if n, err := v.read(ctx); err == nil {
			v.mu.Lock()
			v.node = n
			v.mu.Unlock()
		} else {
			log.G(ctx).WithError(err).Debug("reading the node for admission")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
