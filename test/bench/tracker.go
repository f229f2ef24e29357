package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/clock"
)

// event is what the tracker records per pod: the first time it was seen in
// that state.
type event int

const (
	evRunning event = iota // phase Running and every container ready
	evExited               // a container reports state terminated
	evGone                 // the object was deleted
)

func (e event) String() string {
	return [...]string{"Running and ready", "container exited", "gone"}[e]
}

// tracker records, from one watch on the benchmark's pods, when each pod was
// first seen Running and ready, with an exited container, and deleted.
// Times are taken when the event arrives (the watch's view, as a user sees it).
type tracker struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	seen  [3]map[string]time.Time
	// changed is closed and replaced at every new record.
	changed chan struct{}
}

func newTracker(c clock.PassiveClock) *tracker {
	t := &tracker{clock: c, changed: make(chan struct{})}
	for i := range t.seen {
		t.seen[i] = map[string]time.Time{}
	}
	return t
}

func podReady(p *v1.Pod) bool {
	if p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) < len(p.Spec.Containers) {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if !cs.Ready || cs.State.Running == nil {
			return false
		}
	}
	return true
}

func podExited(p *v1.Pod) bool {
	if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
		return true
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Terminated != nil {
			return true
		}
	}
	return false
}

// observe records ev, received now.
func (t *tracker) observe(typ watch.EventType, p *v1.Pod) {
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	rec := func(e event) {
		if _, ok := t.seen[e][p.Name]; !ok {
			t.seen[e][p.Name] = now
			close(t.changed)
			t.changed = make(chan struct{})
		}
	}
	switch typ {
	case watch.Added, watch.Modified:
		if podReady(p) {
			rec(evRunning)
		}
		if podExited(p) {
			rec(evExited)
		}
	case watch.Deleted:
		rec(evGone)
	}
}

// forget drops what is known of names (a name is reused by a later workload).
func (t *tracker) forget(names []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range t.seen {
		for _, n := range names {
			delete(m, n)
		}
	}
}

// wait blocks until every name was seen in state e and returns the times,
// or fails when ctx ends, naming the pods still missing.
func (t *tracker) wait(ctx context.Context, e event, names []string) (map[string]time.Time, error) {
	for {
		t.mu.Lock()
		out := make(map[string]time.Time, len(names))
		var missing []string
		for _, n := range names {
			if at, ok := t.seen[e][n]; ok {
				out[n] = at
			} else {
				missing = append(missing, n)
			}
		}
		ch := t.changed
		t.mu.Unlock()
		if len(missing) == 0 {
			return out, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			sort.Strings(missing)
			if len(missing) > 5 {
				missing = append(missing[:5], fmt.Sprintf("and %d more", len(missing)-5))
			}
			return nil, fmt.Errorf("waiting for pods to be %s: %w (missing %s)", e, ctx.Err(), strings.Join(missing, ", "))
		}
	}
}

// run feeds the tracker from a watch of the pods matching selector in ns
// until ctx ends. It returns once the watch is established.
func (t *tracker) run(ctx context.Context, c kubernetes.Interface, ns, selector string) error {
	list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return fmt.Errorf("listing pods in %s: %w", ns, err)
	}
	for i := range list.Items {
		t.observe(watch.Added, &list.Items[i])
	}
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.LabelSelector = selector
		return c.CoreV1().Pods(ns).Watch(ctx, o)
	}}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, lw)
	if err != nil {
		return fmt.Errorf("watching pods in %s: %w", ns, err)
	}
	go func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				if p, ok := ev.Object.(*v1.Pod); ok {
					t.observe(ev.Type, p)
				}
			}
		}
	}()
	return nil
}
