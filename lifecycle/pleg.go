package lifecycle

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// EventType is a pod lifecycle event type, the kubelet's PLEG vocabulary.
type EventType string

// The events relist produces. Sandboxes are treated like containers, as the
// kubelet's generic PLEG does.
const (
	ContainerStarted EventType = "ContainerStarted"
	ContainerDied    EventType = "ContainerDied"
	ContainerRemoved EventType = "ContainerRemoved"
	ContainerChanged EventType = "ContainerChanged"
)

// Event says that container (or sandbox) ID of pod UID changed.
type Event struct {
	UID  types.UID
	Type EventType
	ID   string
}

// generateEvents turns one container's old and new state into events. It is
// pure. A state of "" means the container does not exist.
//
//	old \ new      running   exited   created/unknown   gone
//	(any other)    Started   Died     Changed           Died+Removed
//	exited         Started   -        Changed           Removed
func generateEvents(uid types.UID, id string, oldState, newState cri.State) []Event {
	if oldState == newState {
		return nil
	}
	ev := func(t EventType) Event { return Event{UID: uid, Type: t, ID: id} }
	switch newState {
	case cri.StateRunning, cri.SandboxReady:
		return []Event{ev(ContainerStarted)}
	case cri.StateExited, cri.SandboxNotReady:
		return []Event{ev(ContainerDied)}
	case "":
		if oldState == cri.StateExited || oldState == cri.SandboxNotReady {
			return []Event{ev(ContainerRemoved)}
		}
		return []Event{ev(ContainerDied), ev(ContainerRemoved)}
	default: // created, unknown
		return []Event{ev(ContainerChanged)}
	}
}

// diffSnapshots returns the events between two relists, ordered by pod UID
// then ID so that the result is deterministic.
func diffSnapshots(old, cur *cri.Snapshot) []Event {
	uids := map[types.UID]bool{}
	for uid := range old.Pods {
		uids[uid] = true
	}
	for uid := range cur.Pods {
		uids[uid] = true
	}
	var out []Event
	for uid := range uids {
		ids := map[string]bool{}
		for id := range old.Pods[uid] {
			ids[id] = true
		}
		for id := range cur.Pods[uid] {
			ids[id] = true
		}
		for id := range ids {
			out = append(out, generateEvents(uid, id, old.Pods[uid][id], cur.Pods[uid][id])...)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].UID != out[j].UID {
			return out[i].UID < out[j].UID
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Snapshotter lists the runtime's sandboxes and containers (*cri.Runtime).
type Snapshotter interface {
	Snapshot(ctx context.Context) (*cri.Snapshot, error)
}

// PLEG relists the runtime every period and hands the pods that changed to
// OnChange (the engine kicks their workers). It replaces per-pod polling:
// one pair of list calls per period for the whole node.
//
//	    ┌── every period ──┐
//	    v                  │
//	relist: Snapshot ──> diff(old, new) ──> OnChange(uid) per changed pod
//	    │
//	    └── success time ──> Healthy(): error after threshold without one
type PLEG struct {
	rt        Snapshotter
	clock     clock.WithTicker
	period    time.Duration
	threshold time.Duration
	onChange  func(types.UID)

	last *cri.Snapshot // only accessed from the relist goroutine

	mu          sync.Mutex
	lastSuccess time.Time // guarded by mu
}

// DefaultRelistThreshold is the kubelet's: no relist for this long makes
// the node NotReady.
const DefaultRelistThreshold = 3 * time.Minute

// NewPLEG returns a PLEG that relists rt every period.
func NewPLEG(rt Snapshotter, clk clock.WithTicker, period time.Duration, onChange func(types.UID)) *PLEG {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &PLEG{rt: rt, clock: clk, period: period, threshold: DefaultRelistThreshold, onChange: onChange,
		last: &cri.Snapshot{Pods: map[types.UID]map[string]cri.State{}}, lastSuccess: clk.Now()}
}

// Run relists until ctx ends.
func (p *PLEG) Run(ctx context.Context) {
	t := p.clock.NewTicker(p.period)
	defer t.Stop()
	for {
		p.Relist(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// Relist takes one snapshot and reports the pods that changed since the
// previous one. Exported for tests and for a forced relist.
func (p *PLEG) Relist(ctx context.Context) {
	cur, err := p.rt.Snapshot(ctx)
	if err != nil {
		log.G(ctx).WithError(err).Warn("PLEG relist failed")
		return
	}
	p.mu.Lock()
	p.lastSuccess = p.clock.Now()
	p.mu.Unlock()
	changed := map[types.UID]bool{}
	for _, e := range diffSnapshots(p.last, cur) {
		if !changed[e.UID] {
			changed[e.UID] = true
			p.onChange(e.UID)
		}
	}
	p.last = cur
}

// Healthy returns an error, in the kubelet's words, when no relist has
// succeeded within the threshold.
func (p *PLEG) Healthy() error {
	p.mu.Lock()
	last := p.lastSuccess
	p.mu.Unlock()
	if d := p.clock.Since(last); d > p.threshold {
		return fmt.Errorf("PLEG is not healthy: pleg was last seen active %v ago; threshold is %v", d.Round(time.Second), p.threshold)
	}
	return nil
}
