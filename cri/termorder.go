package cri

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// termOrder is the kubelet's terminationOrdering: when a pod with sidecars
// stops, every container is killed at once (each runs its preStop hook
// right away), but a sidecar's SIGTERM waits until the pod's regular
// containers and every later sidecar have stopped, for at most what is
// left of its grace period after the hook:
//
//	regular containers ──stopped──┐
//	                              v
//	sidecar n (last in spec) ─────┴──stopped──┐
//	                                          v
//	sidecar n-1 ──────────────────────────────┴──stopped── ... sidecar 1
//
// A container that is not among those stopped counts as stopped from the
// start. Safe for concurrent use: one goroutine per container waits in
// waitForTurn and calls stopped.
type termOrder struct {
	clock clock.Clock
	mu    sync.Mutex
	// done holds, per container name, a channel closed once it stopped;
	// an entry is removed when it is closed. Guarded by mu.
	done map[string]chan struct{}
	// prereqs are the channels a container waits for before its SIGTERM.
	// Read-only after newTermOrder.
	prereqs map[string][]chan struct{}
}

// newTermOrder returns the ordering of pod's containers when those named
// in stopping are stopped; nil when the pod has no sidecar (the kubelet
// orders only such pods).
func newTermOrder(clk clock.Clock, pod *v1.Pod, stopping map[string]bool) *termOrder {
	if pod == nil || !hasSidecar(pod) {
		return nil
	}
	o := &termOrder{clock: clk, done: map[string]chan struct{}{}, prereqs: map[string][]chan struct{}{}}
	channel := func(name string) chan struct{} {
		ch := make(chan struct{})
		if stopping[name] {
			o.done[name] = ch
		} else {
			close(ch)
		}
		return ch
	}
	var regular []chan struct{}
	for i := range pod.Spec.Containers {
		regular = append(regular, channel(pod.Spec.Containers[i].Name))
	}
	var later chan struct{} // the next sidecar in the spec, nil for the last
	for i := len(pod.Spec.InitContainers) - 1; i >= 0; i-- {
		c := &pod.Spec.InitContainers[i]
		ch := channel(c.Name)
		if !podutil.IsSidecar(c) {
			continue
		}
		o.prereqs[c.Name] = append(o.prereqs[c.Name], regular...)
		if later != nil {
			o.prereqs[c.Name] = append(o.prereqs[c.Name], later)
		}
		later = ch
	}
	return o
}

func hasSidecar(pod *v1.Pod) bool {
	for i := range pod.Spec.InitContainers {
		if podutil.IsSidecar(&pod.Spec.InitContainers[i]) {
			return true
		}
	}
	return false
}

// waitForTurn waits until the containers name must outlive have stopped,
// for at most grace seconds (not at all when grace <= 0), and returns how
// long it waited. A nil ordering never waits.
func (o *termOrder) waitForTurn(ctx context.Context, name string, grace int64) time.Duration {
	if o == nil || grace <= 0 || len(o.prereqs[name]) == 0 {
		return 0
	}
	start := o.clock.Now()
	t := o.clock.NewTimer(time.Duration(grace) * time.Second)
	defer t.Stop()
	for _, ch := range o.prereqs[name] {
		select {
		case <-ch:
		case <-t.C():
			return o.clock.Since(start)
		case <-ctx.Done():
			return o.clock.Since(start)
		}
	}
	return o.clock.Since(start)
}

// stopped records that the named container has stopped.
func (o *termOrder) stopped(name string) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if ch, ok := o.done[name]; ok {
		close(ch)
		delete(o.done, name)
	}
}

// stopRequest is one container stopContainers stops.
type stopRequest struct {
	c     ContainerStatus
	grace int64
	// message is the Killing event's; empty: "Stopping container <name>".
	message string
	// why names the kill in an error.
	why string
}

// stopContainers is the kubelet's killContainersWithSyncResult: it stops
// every container of reqs at once (each with its Killing event, preStop
// hook and grace period), a pod's sidecars in the termination order
// (termOrder), and returns when all have been stopped, with an error per
// container that could not be. pod may be nil (no hooks, no ordering).
func (r *Runtime) stopContainers(ctx context.Context, pod *v1.Pod, ref PodRef, reqs []stopRequest, podIPs []string) error {
	stopping := map[string]bool{}
	for _, q := range reqs {
		stopping[q.c.Name] = true
	}
	order := newTermOrder(r.clock, pod, stopping)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, q := range reqs {
		wg.Add(1)
		go func(q stopRequest) {
			defer wg.Done()
			spec := containerSpec(pod, q.c.Name, q.c.Type)
			if err := r.stopContainer(ctx, pod, spec, q.c.ID, q.c.State == StateRunning, podIPs, q.grace, q.message, order); err != nil {
				what := ""
				if q.why != "" {
					what = " (" + q.why + ")"
				}
				mu.Lock()
				errs = append(errs, fmt.Errorf("stopping container %q (%s) of pod %s%s: %w", q.c.Name, q.c.ID, ref, what, err))
				mu.Unlock()
			}
		}(q)
	}
	wg.Wait()
	return errors.Join(errs...)
}
