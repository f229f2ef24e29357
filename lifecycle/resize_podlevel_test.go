package lifecycle

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/crivk/crivk/internal/testutil"
	"github.com/crivk/crivk/lifecycle/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
)

// events collects a FakeRecorder's events as they come.
type events struct {
	mu  sync.Mutex
	all []string // guarded by mu
}

func collect(t *testing.T, rec *record.FakeRecorder) *events {
	ev := &events{}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case e := <-rec.Events:
				ev.mu.Lock()
				ev.all = append(ev.all, e)
				ev.mu.Unlock()
			case <-done:
				return
			}
		}
	}()
	t.Cleanup(func() { close(done) })
	return ev
}

// reasons are the events' type and reason, in order, those of the resize.
func (ev *events) reasons() []string {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var out []string
	for _, e := range ev.all {
		if f := strings.Fields(e); len(f) >= 2 && strings.HasPrefix(f[1], "Resize") {
			out = append(out, f[0]+" "+f[1])
		}
	}
	return out
}

func (ev *events) find(reason string) string {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	for _, e := range ev.all {
		if f := strings.Fields(e); len(f) >= 2 && f[1] == reason {
			return e
		}
	}
	return ""
}

// TestEnginePodLevelResize walks a pod with pod-level resources through
// the e2e spec "PLR Pod InPlace Resize"'s steps against fakes: created
// (status.allocatedResources the pod-level requests, no resize event), a
// pod-level resize allocated and actuated in one sync (ResizeStarted,
// the pod cgroup resized, ResizeCompleted, no resize condition left), one
// admission refuses (Deferred with the kubelet's message, the allocation
// kept), one the runtime fails (PodResizeInProgress Error, ResizeError),
// which completes once the runtime takes it.
func TestEnginePodLevelResize(t *testing.T) {
	node := resizeNode("2", "4Gi")
	rec := record.NewFakeRecorder(100)
	f := newEngineFixture(t, func(c *Config) {
		c.Node = func() *v1.Node { return node }
		c.Recorder = rec
	})
	ev := collect(t, rec)
	pod := enginePod("uid-p", "web", v1.RestartPolicyAlways)
	pod.Generation = 1
	pod.Spec.Resources = &v1.ResourceRequirements{Requests: testutil.Resources("100m", "128Mi"), Limits: testutil.Resources("100m", "128Mi")}
	f.startRunning(t, pod)
	allocated := func() v1.ResourceList { return f.lastPublished("uid-p").Status.AllocatedResources }
	cond := func(typ v1.PodConditionType) *v1.PodCondition {
		p := f.lastPublished("uid-p")
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == typ {
				return &p.Status.Conditions[i]
			}
		}
		return nil
	}
	if a := allocated(); a.Cpu().MilliValue() != 100 || a.Memory().Value() != 128<<20 {
		t.Fatalf("created: status.allocatedResources %v, want the pod-level requests", a)
	}
	if r := f.lastPublished("uid-p").Status.Resources; r == nil || r.Limits.Cpu().MilliValue() != 100 {
		t.Errorf("created: status.resources %v, want the pod-level ones", r)
	}
	if got := ev.reasons(); len(got) != 0 {
		t.Errorf("created: resize events %v, want none", got)
	}
	resize := func(gen int64, cpu string) {
		p := pod.DeepCopy()
		p.Generation = gen
		p.Spec.Resources = &v1.ResourceRequirements{Requests: testutil.Resources(cpu, "128Mi"), Limits: testutil.Resources(cpu, "128Mi")}
		f.e.UpdatePod(context.Background(), p)
	}

	resize(2, "200m")
	f.eventually(t, "the pod-level resize done", func() bool {
		a := allocated()
		return a.Cpu().MilliValue() == 200 && cond(v1.PodResizeInProgress) == nil && cond(v1.PodResizePending) == nil &&
			len(ev.reasons()) == 2
	})
	if got := ev.reasons(); got[0] != "Normal ResizeStarted" || got[1] != "Normal ResizeCompleted" {
		t.Errorf("events %v, want ResizeStarted then ResizeCompleted", got)
	}
	if n := f.rt.count("uid-p", "ResizePodCgroup"); n != 1 {
		t.Errorf("pod cgroup resized %d times, want once", n)
	}
	if g := f.lastPublished("uid-p").Status.ObservedGeneration; g != 2 {
		t.Errorf("observedGeneration %d, want 2", g)
	}

	resize(3, "3")
	f.eventually(t, "PodResizePending Deferred", func() bool {
		c := cond(v1.PodResizePending)
		return c != nil && c.Reason == v1.PodReasonDeferred
	})
	if c := cond(v1.PodResizePending); c.Message != "Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000" || c.ObservedGeneration != 3 {
		t.Errorf("PodResizePending %q generation %d", c.Message, c.ObservedGeneration)
	}
	if a := allocated(); a.Cpu().MilliValue() != 200 {
		t.Errorf("deferred: allocatedResources %v, want the allocation (200m)", a)
	}
	if e := ev.find("ResizeDeferred"); !strings.HasPrefix(e, "Warning ResizeDeferred Pod resize Deferred: ") {
		t.Errorf("ResizeDeferred event %q", e)
	}

	f.rt.mu.Lock()
	f.rt.resizeErr = errors.New("cannot decrease memory limits: attempting to set pod memory limit (10240) below current usage (1048576)")
	f.rt.mu.Unlock()
	resize(4, "300m")
	f.eventually(t, "PodResizeInProgress Error", func() bool {
		c := cond(v1.PodResizeInProgress)
		return c != nil && c.Reason == v1.PodReasonError && cond(v1.PodResizePending) == nil
	})
	if c := cond(v1.PodResizeInProgress); !strings.Contains(c.Message, "pod memory limit (10240) below current usage") || c.ObservedGeneration != 4 {
		t.Errorf("PodResizeInProgress %q generation %d", c.Message, c.ObservedGeneration)
	}
	if e := ev.find("ResizeError"); !strings.HasPrefix(e, "Warning ResizeError Pod resize error: ") {
		t.Errorf("ResizeError event %q", e)
	}
	f.rt.mu.Lock()
	f.rt.resizeErr = nil
	f.rt.mu.Unlock()
	f.step(syncInterval)
	f.eventually(t, "the failed resize done at a later sync", func() bool {
		a := allocated()
		return cond(v1.PodResizeInProgress) == nil && a.Cpu().MilliValue() == 300
	})
}

// TestEnginePodLevelStatusFromCgroup: once the API shows the pod Running,
// its status.resources are the pod cgroup's values (read through
// PodCgroups.PodCgroupConfig), before that its allocation's, as the
// kubelet's convertToAPIPodLevelResourcesStatus.
func TestEnginePodLevelStatusFromCgroup(t *testing.T) {
	var (
		cg       *fakeCgroups
		mu       sync.Mutex
		apiPhase = v1.PodPending
	)
	pod := enginePod("uid-s", "web", v1.RestartPolicyAlways)
	pod.Spec.Resources = &v1.ResourceRequirements{Requests: testutil.Resources("100m", "128Mi"), Limits: testutil.Resources("200m", "128Mi")}
	f := newEngineFixture(t, func(c *Config) {
		// The cgroup as the kernel has it mid-resize: 150m quota, 96Mi.
		cg = &fakeCgroups{have: map[types.UID]bool{}, config: map[types.UID]status.PodCgroup{
			"uid-s": {CPUShares: 102, CPUQuota: 15000, CPUPeriod: 100000, MemoryLimit: 96 << 20}}}
		c.PodCgroups = cg
		c.APIPod = func(_, _ string) *v1.Pod {
			mu.Lock()
			defer mu.Unlock()
			p := pod.DeepCopy()
			p.Status.Phase = apiPhase
			return p
		}
	})
	cg.rt = f.rt
	f.startRunning(t, pod)
	if r := f.lastPublished("uid-s").Status.Resources; r == nil || r.Limits.Cpu().MilliValue() != 200 || r.Limits.Memory().Value() != 128<<20 {
		t.Errorf("API pod Pending: status.resources %v, want the allocation's", r)
	}
	mu.Lock()
	apiPhase = v1.PodRunning
	mu.Unlock()
	f.step(syncInterval)
	f.eventually(t, "status.resources from the cgroup", func() bool {
		r := f.lastPublished("uid-s").Status.Resources
		return r != nil && r.Limits.Cpu().MilliValue() == 150 && r.Limits.Memory().Value() == 96<<20 &&
			r.Requests.Cpu().MilliValue() == 100 && r.Requests.Memory().Value() == 128<<20
	})
}
