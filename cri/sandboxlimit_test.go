package cri

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// gatedSandboxes holds every RunPodSandbox until released and records how
// many ran at once.
type gatedSandboxes struct {
	*fakeRuntimeService
	release chan struct{}

	mu            sync.Mutex
	inFlight, max int
}

func (g *gatedSandboxes) RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	g.mu.Lock()
	g.inFlight++
	if g.inFlight > g.max {
		g.max = g.inFlight
	}
	g.mu.Unlock()
	<-g.release
	g.mu.Lock()
	g.inFlight--
	g.mu.Unlock()
	return g.fakeRuntimeService.RunPodSandbox(ctx, cfg, handler)
}

func (g *gatedSandboxes) running() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight
}

func TestMaxParallelSandboxes(t *testing.T) {
	for _, tc := range []struct{ limit, pods, want int }{{0, 6, 6}, {2, 6, 2}} {
		g := &gatedSandboxes{fakeRuntimeService: newFakeRuntimeService(clock.RealClock{}), release: make(chan struct{})}
		rt, err := New(Config{PodLogDir: t.TempDir(), MaxParallelSandboxes: tc.limit}, g, newFakeImageService())
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := 0; i < tc.pods; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: string(rune('a' + i))}}
				if _, err := rt.runPodSandbox(context.Background(), cfg, ""); err != nil {
					t.Error(err)
				}
			}()
		}
		// Let every caller reach the runtime or the limit, then release them.
		waitFor(t, "callers in RunPodSandbox", func() bool { return g.running() >= tc.want })
		// Not a wait for a result: it only gives a caller that slipped past
		// a broken limit the time to show up; a working limit passes either way.
		time.Sleep(50 * time.Millisecond)
		close(g.release)
		wg.Wait()
		if g.max != tc.want {
			t.Errorf("limit %d: %d RunPodSandbox calls at once, want %d", tc.limit, g.max, tc.want)
		}
	}

	// A caller waiting for its turn gives up with its context.
	g := &gatedSandboxes{fakeRuntimeService: newFakeRuntimeService(clock.RealClock{}), release: make(chan struct{})}
	rt, err := New(Config{PodLogDir: t.TempDir(), MaxParallelSandboxes: 1}, g, newFakeImageService())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = rt.runPodSandbox(context.Background(), &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Uid: "first"}}, "")
	}()
	waitFor(t, "the first caller in RunPodSandbox", func() bool { return g.running() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := rt.runPodSandbox(ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Uid: "second"}}, ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting caller: %v, want its context's deadline", err)
	}
	close(g.release)
	<-done
}
