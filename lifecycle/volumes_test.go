package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeVolumes fails MountPod while err is set and records the calls.
type fakeVolumes struct {
	mu        sync.Mutex
	err       error
	mounts    map[types.UID]int
	unmounts  map[types.UID]int
	orphans   []types.UID // CleanupOrphans candidates
	cleanedUp []types.UID
}

func newFakeVolumes() *fakeVolumes {
	return &fakeVolumes{mounts: map[types.UID]int{}, unmounts: map[types.UID]int{}}
}

func (f *fakeVolumes) MountPod(_ context.Context, pod *v1.Pod) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mounts[pod.UID]++
	return f.err
}

func (f *fakeVolumes) Mounts(*v1.Pod, *v1.Container, map[string]string, map[string]*runtimeapi.ImageSpec) ([]*runtimeapi.Mount, error) {
	return nil, nil
}

func (f *fakeVolumes) UnmountPod(_ context.Context, pod *v1.Pod) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unmounts[pod.UID]++
	return nil
}

func (f *fakeVolumes) CleanupOrphans(_ context.Context, keep func(types.UID) bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, uid := range f.orphans {
		if !keep(uid) {
			f.cleanedUp = append(f.cleanedUp, uid)
		}
	}
	return nil
}

func (f *fakeVolumes) count(m map[types.UID]int, uid types.UID) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return m[uid]
}

func (f *fakeVolumes) setErr(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

// TestEngineWaitsForVolumes: a pod whose volumes cannot be set up stays
// in ContainerCreating with FailedMount events, starts soon after the
// missing object appears, and its volumes go once it is terminated.
func TestEngineWaitsForVolumes(t *testing.T) {
	f := newEngineFixture(t)
	vols := newFakeVolumes()
	rec := record.NewFakeRecorder(100)
	f.e.sync.volumes = vols
	f.e.sync.recorder = rec
	vols.setErr(errors.Join(fmt.Errorf(`MountVolume.SetUp failed for volume "cfg" : configmap "app" not found`)))

	pod := enginePod("uid-1", "web", v1.RestartPolicyAlways)
	f.e.UpdatePod(context.Background(), pod)
	f.eventually(t, "a mount attempt", func() bool { return vols.count(vols.mounts, "uid-1") > 0 })
	f.eventually(t, "uid-1 idle", func() bool { return !f.e.workers.isWorking("uid-1") })
	if n := f.rt.count("uid-1", "SyncPod"); n != 0 {
		t.Fatal("the runtime was asked to start a pod whose volumes are not ready")
	}
	select {
	case ev := <-rec.Events:
		if !strings.HasPrefix(ev, "Warning FailedMount ") || !strings.Contains(ev, `configmap "app" not found`) {
			t.Fatalf("event %q, want a FailedMount naming the ConfigMap", ev)
		}
	default:
		t.Fatal("no FailedMount event")
	}
	// Statuses are delivered by the status manager's own goroutine.
	f.eventually(t, "Pending published", func() bool {
		p := f.lastPublished("uid-1")
		return p != nil && p.Status.Phase == v1.PodPending
	})

	// The object appears: the retry due after a second starts the pod.
	vols.setErr(nil)
	f.step(2 * time.Second)
	f.eventually(t, "uid-1 running", func() bool { return f.lastPhase("uid-1") == v1.PodRunning })

	// Terminated and deleted: the volumes are torn down.
	f.relist()
	f.eventually(t, "uid-1 idle", func() bool { return !f.e.workers.isWorking("uid-1") })
	f.e.Kill(context.Background(), deleted(pod, f.clock.Now(), nil))
	f.eventually(t, "volumes torn down", func() bool { return vols.count(vols.unmounts, "uid-1") > 0 })
}

func TestEngineFailedMountEventsAreThrottled(t *testing.T) {
	var m mountEvents
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		at   time.Duration
		msg  string
		want bool
	}{
		{0, "a", true},
		{time.Second, "a", false},
		{time.Second, "b", true},
		{9 * time.Second, "a", false},
		{10 * time.Second, "a", true},
	}
	for i, s := range steps {
		if got := m.due("uid", s.msg, now.Add(s.at)); got != s.want {
			t.Fatalf("step %d: due = %v, want %v", i, got, s.want)
		}
	}
}

func TestEngineCleansOrphanedPodDirs(t *testing.T) {
	vols := newFakeVolumes()
	vols.orphans = []types.UID{"api-pod", "known", "gone"}
	f := newEngineFixture(t, func(c *Config) {
		c.Volumes = vols
		c.APIPods = func() ([]*v1.Pod, error) { return []*v1.Pod{enginePod("api-pod", "x", v1.RestartPolicyAlways)}, nil }
	})
	f.startRunning(t, enginePod("known", "web", v1.RestartPolicyAlways))
	f.e.Housekeeping(context.Background())
	vols.mu.Lock()
	defer vols.mu.Unlock()
	if len(vols.cleanedUp) == 0 || vols.cleanedUp[len(vols.cleanedUp)-1] != "gone" {
		t.Fatalf("cleaned up %v, want only gone", vols.cleanedUp)
	}
	for _, uid := range vols.cleanedUp {
		if uid != "gone" {
			t.Fatalf("cleaned up %v, want only gone", vols.cleanedUp)
		}
	}
}
