package lifecycle

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/virtual-kubelet/virtual-kubelet/trace"
	"github.com/virtual-kubelet/virtual-kubelet/trace/opencensus"
	octrace "go.opencensus.io/trace"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
)

// spanRecorder is an OpenCensus exporter keeping the spans of one test.
type spanRecorder struct {
	mu    sync.Mutex
	spans []*octrace.SpanData
}

func (r *spanRecorder) ExportSpan(sd *octrace.SpanData) {
	r.mu.Lock()
	r.spans = append(r.spans, sd)
	r.mu.Unlock()
}

// named returns the spans called name, in the order they ended.
func (r *spanRecorder) named(name string) []*octrace.SpanData {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*octrace.SpanData
	for _, s := range r.spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// TestPodWorkerSpanParent: a sync's span is the child of the span of the
// call that asked for the update (virtual-kubelet's createOrUpdatePod),
// though that call ended before the sync started; the CRI calls are the
// sync's children; a coalesced update without a span keeps the pending
// one's; an update of the engine's own starts a trace of its own.
func TestPodWorkerSpanParent(t *testing.T) {
	rec := &spanRecorder{}
	octrace.RegisterExporter(rec)
	defer octrace.UnregisterExporter(rec)
	octrace.ApplyConfig(octrace.Config{DefaultSampler: octrace.AlwaysSample()})
	defer octrace.ApplyConfig(octrace.Config{DefaultSampler: octrace.ProbabilitySampler(1e-4)})
	// The tracer comes with the context, not trace.T: no global to race on.
	ctx, cancel := context.WithCancel(trace.WithTracer(context.Background(), opencensus.Adapter{}))
	defer cancel()

	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	syncer := &fakeSyncer{}
	release := make(chan struct{})
	var syncs int
	var mu sync.Mutex
	syncer.syncPod = func(ctx context.Context, pod *v1.Pod) (bool, error) {
		_, s := cri.StartSpan(ctx, "cri.run_podsandbox")
		s.End()
		mu.Lock()
		syncs++
		first := syncs == 1
		mu.Unlock()
		if first {
			<-release
		}
		return false, nil
	}
	w, err := NewPodWorkers(ctx, PodWorkersConfig{Syncer: syncer, Cache: &readyCache{running: map[types.UID]bool{}}, Queue: NewWorkQueue(clk), Clock: clk,
		ResyncInterval: time.Minute, BackOffPeriod: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pod := wpod("u1", "p")
	asked := func(name string) (octrace.SpanContext, cri.SpanRef) {
		actx, s := trace.StartSpan(ctx, name)
		defer s.End()
		return octrace.FromContext(actx).SpanContext(), cri.SpanRefFrom(actx)
	}

	create, createRef := asked("createOrUpdatePod")
	w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: pod, Parent: createRef})
	waitFor(t, "the create's sync started", func() bool { mu.Lock(); defer mu.Unlock(); return syncs == 1 })
	// While it runs: an update asked by virtual-kubelet, then one of the
	// engine's own (a PLEG event), coalesced into one pending update.
	update, updateRef := asked("createOrUpdatePod")
	w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodUpdate, Pod: pod, Parent: updateRef})
	w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodSync, Pod: pod})
	close(release)
	waitFor(t, "two syncs", func() bool { mu.Lock(); defer mu.Unlock(); return syncs == 2 })
	waitFor(t, "idle", func() bool { return !w.isWorking(pod.UID) })
	// An update of the engine's own alone.
	w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodSync, Pod: pod})
	waitFor(t, "three syncs", func() bool { mu.Lock(); defer mu.Unlock(); return syncs == 3 })
	waitFor(t, "idle", func() bool { return !w.isWorking(pod.UID) })
	waitFor(t, "the spans ended", func() bool { return len(rec.named("cri.run_podsandbox")) == 3 && len(rec.named("podWorker.sync")) == 2 })

	creates := rec.named("podWorker.create")
	if len(creates) != 1 {
		t.Fatalf("%d podWorker.create spans, want 1", len(creates))
	}
	c := creates[0]
	if c.TraceID != create.TraceID || c.ParentSpanID != create.SpanID {
		t.Errorf("podWorker.create: trace %s parent %s, want trace %s parent %s (createOrUpdatePod)", c.TraceID, c.ParentSpanID, create.TraceID, create.SpanID)
	}
	syncSpans := rec.named("podWorker.sync")
	coalesced, own := syncSpans[0], syncSpans[1]
	if coalesced.TraceID != update.TraceID || coalesced.ParentSpanID != update.SpanID {
		t.Errorf("coalesced podWorker.sync: trace %s parent %s, want trace %s parent %s (the update's createOrUpdatePod)",
			coalesced.TraceID, coalesced.ParentSpanID, update.TraceID, update.SpanID)
	}
	if own.ParentSpanID != (octrace.SpanID{}) || own.TraceID == create.TraceID || own.TraceID == update.TraceID {
		t.Errorf("the engine's own podWorker.sync: trace %s parent %s, want a trace of its own", own.TraceID, own.ParentSpanID)
	}
	// A kill asked by virtual-kubelet's deletePod; while it runs, an
	// update of the engine's own (a PLEG event) arrives: the terminated
	// work that follows is still in deletePod's trace.
	killing := make(chan struct{})
	syncer.terminating = func(ctx context.Context, pod *v1.Pod, grace int64, fn PodStatusFunc) error {
		<-killing
		return nil
	}
	del, delRef := asked("deletePod")
	w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: pod, Parent: delRef})
	waitFor(t, "the kill started", func() bool { return len(syncer.methods(pod.UID)) == 4 })
	w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodSync, Pod: pod})
	close(killing)
	waitFor(t, "terminated", func() bool {
		return len(rec.named("podWorker.terminated")) == 1 && len(rec.named("podWorker.kill")) == 1
	})
	for _, name := range []string{"podWorker.kill", "podWorker.terminated"} {
		if s := rec.named(name)[0]; s.TraceID != del.TraceID || s.ParentSpanID != del.SpanID {
			t.Errorf("%s: trace %s parent %s, want trace %s parent %s (deletePod)", name, s.TraceID, s.ParentSpanID, del.TraceID, del.SpanID)
		}
	}

	// Each CRI span is the child of its sync's.
	parents := map[octrace.SpanID]bool{c.SpanID: true, coalesced.SpanID: true, own.SpanID: true}
	for _, s := range rec.named("cri.run_podsandbox") {
		if !parents[s.ParentSpanID] {
			t.Errorf("cri.run_podsandbox with parent %s, not one of the syncs' spans", s.ParentSpanID)
		}
		delete(parents, s.ParentSpanID)
	}
}
