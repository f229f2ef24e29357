package pleg

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	"golang.org/x/time/rate"
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

// PodStatusReader is what the PLEG needs of the runtime (*cri.Runtime).
type PodStatusReader interface {
	// Snapshot lists every sandbox and container with its state.
	Snapshot(ctx context.Context) (*cri.Snapshot, error)
	// GetPodStatus reads one pod; a pod the runtime knows nothing of has
	// an empty status, not an error.
	GetPodStatus(ctx context.Context, ref cri.PodRef) (*cri.PodStatus, error)
}

var _ PodStatusReader = (*cri.Runtime)(nil)

// DefaultRelistThreshold is the kubelet's: no relist for this long makes
// the node NotReady.
const DefaultRelistThreshold = 3 * time.Minute

// DefaultRelistPeriod is the kubelet's relist period.
const DefaultRelistPeriod = time.Second

// Config configures New.
type Config struct {
	// Runtime is listed every Period and read for the pods that changed.
	// Required.
	Runtime PodStatusReader
	// Cache receives every status read and, after each relist, its start
	// time (Cache.UpdateTime). Required.
	Cache *Cache
	// Clock defaults to clock.RealClock{}.
	Clock clock.WithTicker
	// Period between relists; defaults to DefaultRelistPeriod.
	Period time.Duration
	// Threshold is how long without a successful relist makes Healthy
	// fail; defaults to DefaultRelistThreshold.
	Threshold time.Duration
	// Wake, if set, asks for a relist now: the runtime said something
	// changed (containerd's task events; see cmd/crivk). A burst of wakes
	// during a relist makes one more relist; the periodic relist stays the
	// safety net for missed or absent events. Optional.
	Wake <-chan struct{}
	// WakeSpacing is the mean time between the starts of relists that
	// wakes trigger (0: no limit), with bursts of WakeBurst at once: a
	// token bucket. A batch of pods starting sends the runtime's events
	// without a pause, and each relist lists every sandbox and container of
	// the node: back to back, the node's PLEG would load the runtime in
	// proportion to events times pods. The few wakes of one change (a
	// container's exit comes as more than one event, the first often
	// before the CRI shows it) are served at once. Optional.
	WakeSpacing time.Duration
	// OnChange is called once per pod with events in a relist, after the
	// pod's cache entry was written and the cache's global time raised,
	// from the relist goroutine; it must not block (the engine's Kick
	// queues work). Required.
	OnChange func(types.UID)
	// ObserveRelist, if set, is told each relist's duration and the time
	// since the previous relist started (the kubelet's
	// kubelet_pleg_relist_duration_seconds and _interval_seconds).
	ObserveRelist func(duration, interval time.Duration)
	// Feed, if set, makes Run relist from a walk of the runtime shared by
	// the nodes of one process (Shared.Feed) instead of listing Runtime
	// itself: a multi-node crivk (docs/scale.md). Period, Wake and
	// WakeSpacing are then the Shared's; Runtime is still read for the
	// pods that changed, and Relist still lists it. Optional.
	Feed *Feed
	// ObserveRunning, if set, is told after each relist how many pods have
	// a ready sandbox and how many containers are in each state (the
	// kubelet's kubelet_running_pods and kubelet_running_containers).
	ObserveRunning func(pods int, containers map[cri.State]int)
}

// PLEG is the kubelet's generic pod lifecycle event generator: it relists
// the runtime every period, compares the result with the previous relist,
// reads the full status of each pod that changed into the Cache and then
// hands the pod to OnChange (the engine kicks its worker, which reads the
// Cache with GetNewerThan). One pair of list calls per period serves the
// whole node; a pod is read only when it changed.
//
//	         ┌──────────────────── every period ─────────────────────┐
//	         v                                                       │
//	ts := now; Snapshot ──fail──> log; Healthy() errors after Threshold
//	         │ ok: last relist := ts
//	         v
//	diff(old, new) ──> pods with events + pods to reinspect
//	         │ for each, in UID order:
//	         │   in the snapshot, nothing of it died, and the Cache entry a
//	         │     successful read with exactly the listed states (mostly
//	         │     the engine's read after it acted): kept as it is, no read
//	         │   in the snapshot, otherwise: t := now; GetPodStatus ──> Cache.Set(uid, st, err, t)
//	         │        read failed: reinspect next relist, keep its old record
//	         │        (its events come again), no OnChange yet
//	         │   gone from it:    Cache.Set(uid, empty status, nil, ts)
//	         v
//	Cache.UpdateTime(ts): every pod's state as of ts is in the Cache
//	Cache drops entries older than ts of pods not in the snapshot
//	         │
//	         v
//	OnChange(uid) for each pod with events whose entry is current
//
//	The engine also writes the Cache right after it acted on a pod
//	(lifecycle's syncer.refresh: t := now; GetPodStatus ──> Cache.Set(uid, st, nil, t)).
//
// The PLEG assumes, as the kubelet's does, that a container is not
// created, run and removed within one period; such a container is missed,
// and the pod workers' periodic resync is the safety net.
type PLEG struct {
	rt        PodStatusReader
	cache     *Cache
	clock     clock.WithTicker
	period    time.Duration
	threshold time.Duration
	onChange  func(types.UID)
	wake      <-chan struct{}
	// feed, if not nil, is the shared walk Run relists from.
	feed *Feed
	// woken spaces the woken relists (WakeSpacing, wakeBurst); nil: no
	// limit. Run's goroutine only, with the PLEG's clock's times.
	woken *rate.Limiter

	// relistMu serializes Relist (Run's loop and forced relists).
	relistMu sync.Mutex
	// last is the previous relist's snapshot, except that the pods whose
	// read failed keep their record from before. Guarded by relistMu.
	last *cri.Snapshot
	// reinspect holds the pods whose read failed in the previous relist,
	// read again in the next one whether or not they have events (the
	// kubelet's podsToReinspect). Guarded by relistMu.
	reinspect map[types.UID]cri.PodRef
	// prevStart is when the previous relist started (zero before the
	// first); observe receives each relist's duration and interval.
	// Guarded by relistMu.
	prevStart time.Time
	observe   func(duration, interval time.Duration)
	running   func(pods int, containers map[cri.State]int)

	mu sync.Mutex
	// lastRelist is when the last successful relist started; the
	// construction time until then, so that a starting node gets one
	// threshold of grace. Guarded by mu.
	lastRelist time.Time
}

// New checks cfg, fills its defaults and returns a PLEG that has not
// relisted yet: the first relist reports every pod in the runtime.
func New(cfg Config) (*PLEG, error) {
	if cfg.Runtime == nil || cfg.Cache == nil || cfg.OnChange == nil {
		return nil, errors.New("pleg: the PLEG needs a runtime, a cache and an OnChange function")
	}
	if cfg.Period < 0 || cfg.Threshold < 0 {
		return nil, fmt.Errorf("pleg: PLEG period %v and threshold %v must not be negative", cfg.Period, cfg.Threshold)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Period == 0 {
		cfg.Period = DefaultRelistPeriod
	}
	if cfg.Threshold == 0 {
		cfg.Threshold = DefaultRelistThreshold
	}
	return &PLEG{
		rt: cfg.Runtime, cache: cfg.Cache, clock: cfg.Clock, period: cfg.Period, threshold: cfg.Threshold,
		onChange:   cfg.OnChange,
		observe:    cfg.ObserveRelist,
		running:    cfg.ObserveRunning,
		wake:       cfg.Wake,
		feed:       cfg.Feed,
		woken:      wakeLimiter(cfg.WakeSpacing),
		last:       &cri.Snapshot{Pods: map[types.UID]map[string]cri.State{}, Refs: map[types.UID]cri.PodRef{}},
		reinspect:  map[types.UID]cri.PodRef{},
		lastRelist: cfg.Clock.Now(),
	}, nil
}

// wakeBurst is how many woken relists may start at once before
// WakeSpacing applies: the events of one change.
const wakeBurst = 4

// wakeLimiter is the token bucket of the woken relists, nil for none.
func wakeLimiter(spacing time.Duration) *rate.Limiter {
	if spacing <= 0 {
		return nil
	}
	return rate.NewLimiter(rate.Every(spacing), wakeBurst)
}

// Run relists until ctx ends: every period, and at once when Wake fires.
// Wakes that arrive while a relist runs are served by one more relist after
// it (the channel is drained first), so a burst of runtime events costs at
// most two relists, not one per event. Beyond wakeBurst woken relists in a
// row, one starts every WakeSpacing on average, the wakes meanwhile sharing
// it.
//
// With a Feed, Run lists nothing: it relists from each walk the Shared
// hands it (the latest one if it fell behind), until ctx ends.
func (p *PLEG) Run(ctx context.Context) {
	if p.feed != nil {
		p.runFeed(ctx)
		return
	}
	loop(ctx, p.clock, p.period, p.wake, p.woken, p.Relist)
}

// loop calls relist at once, then every period and when wake fires, the
// woken calls spaced by woken (nil: no limit), until ctx ends. It is the
// loop of PLEG.Run and of Shared.Run.
func loop(ctx context.Context, clk clock.WithTicker, period time.Duration, wake <-chan struct{}, woken *rate.Limiter, relist func(context.Context)) {
	t := clk.NewTicker(period)
	defer t.Stop()
	for {
		relist(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-wake: // nil channel without Wake: never ready
			if woken != nil {
				now := clk.Now()
				if wait := woken.ReserveN(now, 1).DelayFrom(now); wait > 0 {
					select {
					case <-ctx.Done():
						return
					case <-clk.After(wait):
					}
				}
			}
			drain(wake)
		}
	}
}

// runFeed relists from the feed's walks until ctx ends.
func (p *PLEG) runFeed(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.feed.ready:
			if w, ok := p.feed.take(); ok {
				p.relistFrom(ctx, w)
			}
		}
	}
}

// relistFrom is one relist from a shared walk: its start is the relist's
// start (every state it lists was current then). A walk that started
// before this PLEG's previous relist (a forced Relist in between) is
// older than what the cache holds and is skipped.
func (p *PLEG) relistFrom(ctx context.Context, w walk) {
	p.relistMu.Lock()
	defer p.relistMu.Unlock()
	if !p.prevStart.IsZero() && w.start.Before(p.prevStart) {
		return
	}
	p.relist(ctx, w.start, func(context.Context) (*cri.Snapshot, error) { return w.snap, w.err })
}

// drain empties ch without blocking.
func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// Relist lists the runtime once, writes the status of every pod that
// changed since the previous relist (or whose read failed then) into the
// cache, raises the cache's global time to the relist's start and calls
// OnChange for the pods with events. Run calls it every period; it is
// exported for tests and forced relists, and concurrent calls take turns.
//
// A relist whose list fails changes nothing. If ctx ends during the reads
// the relist stops without raising the cache's time or calling OnChange,
// and the next relist starts from the same previous snapshot.
func (p *PLEG) Relist(ctx context.Context) {
	p.relistMu.Lock()
	defer p.relistMu.Unlock()
	p.relist(ctx, p.clock.Now(), p.rt.Snapshot)
}

// relist is Relist with the relist's start ts and the list that follows
// it (the runtime's own, or a shared walk's result). relistMu must be
// held.
func (p *PLEG) relist(ctx context.Context, ts time.Time, list func(context.Context) (*cri.Snapshot, error)) {
	var interval time.Duration // 0: the first relist
	if !p.prevStart.IsZero() {
		interval = ts.Sub(p.prevStart)
	}
	p.prevStart = ts
	if p.observe != nil {
		defer func() { p.observe(p.clock.Since(ts), interval) }()
	}
	cur, err := list(ctx)
	if err != nil {
		log.G(ctx).WithError(err).Warn("PLEG relist failed")
		return
	}
	p.mu.Lock()
	p.lastRelist = ts
	p.mu.Unlock()
	if p.running != nil {
		p.running(countRunning(cur))
	}

	uids, changed, died := p.podsToRead(cur)

	next := &cri.Snapshot{Pods: make(map[types.UID]map[string]cri.State, len(cur.Pods)), Refs: make(map[types.UID]cri.PodRef, len(cur.Refs))}
	for uid, m := range cur.Pods {
		next.Pods[uid] = m
	}
	for uid, ref := range cur.Refs {
		next.Refs[uid] = ref
	}
	reinspect := map[types.UID]cri.PodRef{}
	var notify []types.UID
	for _, uid := range uids {
		ref := p.refOf(uid, cur)
		if _, ok := cur.Pods[uid]; !ok {
			// Nothing of the pod is left in the runtime: no need to ask.
			p.cache.Set(uid, &cri.PodStatus{Ref: ref}, nil, ts)
		} else if !died[uid] && p.cacheShows(uid, cur.Pods[uid]) {
			// An earlier successful read (usually the engine's, right
			// after it acted) shows the very objects and states this
			// relist lists: states only move forward and IDs are never
			// reused, so nothing of the pod changed between that read and
			// the list, and the read holds as of ts. No need to ask again.
		} else {
			t := p.clock.Now()
			st, err := p.rt.GetPodStatus(ctx, ref)
			if err != nil && ctx.Err() != nil {
				return
			}
			p.cache.Set(uid, st, err, t)
			if err != nil {
				log.G(ctx).WithError(err).WithField("pod", ref.String()).Warn("PLEG could not read a pod that changed; retrying at the next relist")
				reinspect[uid] = ref
				// Keep the pod's old record so that its events come again.
				if old, ok := p.last.Pods[uid]; ok {
					next.Pods[uid] = old
				} else {
					delete(next.Pods, uid)
				}
				if old, ok := p.last.Refs[uid]; ok {
					next.Refs[uid] = old
				}
				continue
			}
		}
		if changed[uid] {
			notify = append(notify, uid)
		}
	}
	p.cache.UpdateTime(ts)
	p.cache.deleteStale(func(uid types.UID) bool { _, ok := cur.Pods[uid]; return ok }, ts)
	p.last, p.reinspect = next, reinspect
	for _, uid := range notify {
		p.onChange(uid)
	}
}

// refOf returns the best identity known of uid: from the current
// snapshot, else the previous one, else the failed read that queued it
// for reinspection. relistMu must be held.
func (p *PLEG) refOf(uid types.UID, cur *cri.Snapshot) cri.PodRef {
	for _, refs := range []map[types.UID]cri.PodRef{cur.Refs, p.last.Refs, p.reinspect} {
		if ref, ok := refs[uid]; ok && ref.Name != "" {
			return ref
		}
	}
	return cri.PodRef{UID: uid}
}

// Healthy returns an error, in the kubelet's words, when no relist has
// succeeded within the threshold.
func (p *PLEG) Healthy() error {
	p.mu.Lock()
	last := p.lastRelist
	p.mu.Unlock()
	if d := p.clock.Since(last); d > p.threshold {
		return fmt.Errorf("PLEG is not healthy: pleg was last seen active %v ago; threshold is %v", d.Round(time.Second), p.threshold)
	}
	return nil
}

// countRunning counts the pods of snap with a ready sandbox and its
// containers by state.
func countRunning(snap *cri.Snapshot) (int, map[cri.State]int) {
	pods := 0
	containers := map[cri.State]int{}
	for _, states := range snap.Pods {
		ready := false
		for _, st := range states {
			switch st {
			case cri.SandboxReady:
				ready = true
			case cri.SandboxNotReady:
			default:
				containers[st]++
			}
		}
		if ready {
			pods++
		}
	}
	return pods, containers
}

// podsToRead returns, in UID order, the pods a relist with snapshot cur
// must look at: those with events since the previous relist (changed) and
// those whose read failed then. died holds the pods with a container or
// sandbox that stopped or vanished: they are always read, since an exit's
// details (an OOM kill's reason, the termination message) may settle after
// its state, so an earlier read that shows the same states is not kept for
// them. p.relistMu must be held.
func (p *PLEG) podsToRead(cur *cri.Snapshot) (uids []types.UID, changed, died map[types.UID]bool) {
	changed, died = map[types.UID]bool{}, map[types.UID]bool{}
	for _, e := range diffSnapshots(p.last, cur) {
		changed[e.UID] = true
		if e.Type == ContainerDied {
			died[e.UID] = true
		}
	}
	uids = make([]types.UID, 0, len(changed)+len(p.reinspect))
	for uid := range changed {
		uids = append(uids, uid)
	}
	for uid := range p.reinspect {
		if !changed[uid] {
			uids = append(uids, uid)
		}
	}
	sort.Slice(uids, func(i, j int) bool { return uids[i] < uids[j] })
	return uids, changed, died
}

// cacheShows reports whether uid's cache entry is a successful read (the
// engine's or an earlier relist's) whose sandboxes and containers have
// exactly the states a relist listed.
func (p *PLEG) cacheShows(uid types.UID, states map[string]cri.State) bool {
	st, err := p.cache.Get(uid)
	if err != nil {
		return false
	}
	return maps.Equal(st.States(), states)
}
