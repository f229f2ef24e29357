package cri

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

func TestPullCoalescingAndLimit(t *testing.T) {
	tests := map[string]struct {
		limit       int
		images      []string
		wantPulls   int
		wantMaxPull int
	}{
		"same image three times: one pull":            {limit: 0, images: []string{"a:1", "a:1", "a:1"}, wantPulls: 1, wantMaxPull: 1},
		"different images, limit 1: one at a time":    {limit: 1, images: []string{"a:1", "b:1", "c:1"}, wantPulls: 3, wantMaxPull: 1},
		"different images, limit 2: at most two":      {limit: 2, images: []string{"a:1", "b:1", "c:1", "d:1"}, wantPulls: 4, wantMaxPull: 2},
		"different images, no limit: all in parallel": {limit: 0, images: []string{"a:1", "b:1", "c:1"}, wantPulls: 3, wantMaxPull: 3},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			is := newFakeImageService()
			is.gate = make(chan struct{})
			rt, err := New(Config{PodLogDir: t.TempDir(), MaxParallelImagePulls: tc.limit}, newFakeRuntimeService(nil), is)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			refs := make([]string, len(tc.images))
			errs := make([]error, len(tc.images))
			for i, img := range tc.images {
				wg.Add(1)
				go func() {
					defer wg.Done()
					refs[i], _, errs[i] = rt.pull(context.Background(), img, nil, nil)
				}()
			}
			// Let the pulls that can run start and the callers of one
			// image join, then release them.
			want := min(tc.wantMaxPull, len(tc.images))
			joiners := len(tc.images) - tc.wantPulls
			waitFor(t, fmt.Sprintf("%d pulls in progress and %d callers joined", want, joiners), func() bool {
				is.mu.Lock()
				n := is.pulling
				is.mu.Unlock()
				joined := 0
				rt.puller.mu.Lock()
				for _, c := range rt.puller.inflight {
					joined += c.waiters
				}
				rt.puller.mu.Unlock()
				return n >= want && joined >= joiners
			})
			close(is.gate)
			wg.Wait()
			for i := range refs {
				if errs[i] != nil || refs[i] != "sha256:"+tc.images[i] {
					t.Errorf("pull %d: %q, %v", i, refs[i], errs[i])
				}
			}
			if n := is.count("PullImage"); n != tc.wantPulls {
				t.Errorf("%d CRI pulls, want %d", n, tc.wantPulls)
			}
			if is.maxPulling != tc.wantMaxPull {
				t.Errorf("%d pulls at once, want %d", is.maxPulling, tc.wantMaxPull)
			}
		})
	}
}

func TestPullWaiterCancelled(t *testing.T) {
	is := newFakeImageService()
	is.gate = make(chan struct{})
	defer close(is.gate)
	rt, err := New(Config{PodLogDir: t.TempDir()}, newFakeRuntimeService(nil), is)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _, _ = rt.pull(context.Background(), "a:1", nil, nil) }()
	waitFor(t, "the first pull to start", func() bool {
		rt.puller.mu.Lock()
		defer rt.puller.mu.Unlock()
		return len(rt.puller.inflight) == 1
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := rt.pull(ctx, "a:1", nil, nil); err != context.Canceled {
		t.Errorf("a waiter whose context ends gets %v, want context.Canceled", err)
	}
}
