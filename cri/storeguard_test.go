package cri

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestSandboxStatsRace(t *testing.T) {
	for _, tc := range []struct {
		name, runtime, version string
		want                   bool
	}{
		{"Debian 12's containerd", "containerd", "1.6.20~ds1", true},
		{"upstream 1.6.20", "containerd", "v1.6.20", true},
		{"first 1.6 with ListPodSandboxStats", "containerd", "v1.6.0", true},
		{"last 1.6 without the fix", "containerd", "v1.6.21", true},
		{"1.6 with containerd#8819", "containerd", "v1.6.22", false},
		{"later 1.6", "containerd", "1.6.38", false},
		{"Ubuntu style", "containerd", "1.6.12-0ubuntu1", true},
		{"1.7 beta without containerd#8130", "containerd", "v1.7.0-beta.4", true},
		{"1.7 rc with the fix", "containerd", "v1.7.0-rc.0", false},
		{"1.7", "containerd", "v1.7.27", false},
		{"2.x", "containerd", "v2.1.4", false},
		{"1.5 (no sandbox stats)", "containerd", "v1.5.18", false},
		{"CRI-O", "cri-o", "1.6.20", false},
		{"unparseable", "containerd", "devel", false},
		{"test server's", "containerd", "v1.7", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sandboxStatsRace(tc.runtime, tc.version); got != tc.want {
				t.Errorf("sandboxStatsRace(%q, %q) = %v, want %v", tc.runtime, tc.version, got, tc.want)
			}
			if got := newStoreGuard(tc.runtime, tc.version) != nil; got != tc.want {
				t.Errorf("newStoreGuard(%q, %q) guards = %v, want %v", tc.runtime, tc.version, got, tc.want)
			}
		})
	}
}

// TestStoreGuardOrdersCalls: with held in flight, whether next waits.
func TestStoreGuardOrdersCalls(t *testing.T) {
	const affected, fixed = "1.6.20~ds1", "v1.6.22"
	for _, tc := range []struct {
		name, version, held, next string
		wantWait                  bool
	}{
		{"list waits for sandbox stats", affected, "ListPodSandboxStats", "ListPodSandbox", true},
		{"sandbox stats waits for list", affected, "ListPodSandbox", "ListPodSandboxStats", true},
		{"sandbox stats wait for each other", affected, "ListPodSandboxStats", "ListPodSandboxStats", true},
		{"sandbox status waits for sandbox stats", affected, "ListPodSandboxStats", "PodSandboxStatus", true},
		{"container list waits for sandbox stats", affected, "ListPodSandboxStats", "ListContainers", true},
		{"container stats wait for sandbox stats", affected, "ListPodSandboxStats", "ListContainerStats", true},
		{"PodSandboxStats and list", affected, "PodSandboxStats", "ListPodSandbox", true},
		{"readers share", affected, "ListPodSandbox", "ListContainers", false},
		{"readers share with container stats", affected, "ListContainerStats", "PodSandboxStatus", false},
		{"unguarded call passes sandbox stats", affected, "ListPodSandboxStats", "StartContainer", false},
		{"sandbox stats pass a long call", affected, "StopPodSandbox", "ListPodSandboxStats", false},
		{"fixed: list passes sandbox stats", fixed, "ListPodSandboxStats", "ListPodSandbox", false},
		{"fixed: sandbox stats pass each other", fixed, "ListPodSandboxStats", "ListPodSandboxStats", false},
		{"1.7: list passes sandbox stats", "v1.7.27", "ListPodSandboxStats", "ListPodSandbox", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newStoreGuard("containerd", tc.version)
			release, err := g.enter(context.Background(), tc.held)
			if err != nil {
				t.Fatal(err)
			}
			next, ok := g.tryEnter(tc.next)
			if ok {
				next()
			}
			if ok == tc.wantWait {
				t.Errorf("%s with %s in flight on containerd %s: waits = %v, want %v", tc.next, tc.held, tc.version, !ok, tc.wantWait)
			}
			release()
			// Once held is done, next always goes.
			next, ok = g.tryEnter(tc.next)
			if !ok {
				t.Fatalf("%s waits with nothing in flight", tc.next)
			}
			next()
		})
	}
}

// tryEnter is enter without waiting: ok is false if call would wait.
func (g *storeGuard) tryEnter(call string) (release func(), ok bool) {
	n := g.weight(call)
	if n == 0 {
		return func() {}, true
	}
	if !g.sem.TryAcquire(n) {
		return nil, false
	}
	return func() { g.sem.Release(n) }, true
}

// TestStoreGuardWaitEndsWithContext: a call waiting for the guard returns
// its context's error when the context ends, and holds nothing; a sandbox
// stats call waiting behind a listing keeps later listings waiting (they
// are served in order) until it gives up.
func TestStoreGuardWaitEndsWithContext(t *testing.T) {
	g := newStoreGuard("containerd", "1.6.20~ds1")
	releaseList, err := g.enter(context.Background(), "ListPodSandbox")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() {
		release, err := g.enter(ctx, "ListPodSandboxStats")
		if err == nil {
			release()
		}
		waited <- err
	}()
	// The stats call waits, and a later listing waits behind it.
	waitUntil(t, "the sandbox stats call waits", func() bool {
		release, ok := g.tryEnter("PodSandboxStatus")
		if ok {
			release()
		}
		return !ok
	})
	cancel()
	select {
	case err := <-waited:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("a cancelled wait returned %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a wait whose context ended did not return")
	}
	// The listings pass again, and once they are done the stats go.
	release, ok := g.tryEnter("PodSandboxStatus")
	if !ok {
		t.Fatal("a status call waits after the stats call gave up")
	}
	release()
	releaseList()
	release, ok = g.tryEnter("ListPodSandboxStats")
	if !ok {
		t.Fatal("the guard is held with nothing in flight: the cancelled wait kept its share")
	}
	release()
}

// waitUntil polls cond until it holds or a deadline passes.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		runtime.Gosched()
	}
}

// storeServer plays containerd 1.6.20's CRI plugin with its sandbox store
// bug: ListPodSandboxStats writes the store's map under the read lock
// (sandbox.Store.UpdateContainerStats before containerd#8819) while
// ListPodSandbox iterates it (sandbox.Store.List) under the same read lock.
// Without crivk's guard, concurrent calls are a data race (go test -race
// reports it; the Go runtime may abort with "concurrent map iteration and
// map write", as containerd did).
type storeServer struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	version string

	lock      sync.RWMutex
	sandboxes map[string]int // sandbox ID -> its last stats sample

	// statsEntered, if set, is sent to when ListPodSandboxStats starts;
	// statsHold, if set, holds it until closed (a hung runtime).
	statsEntered chan struct{}
	statsHold    chan struct{}
	lists        atomic.Int32 // ListPodSandbox calls answered
}

func (s *storeServer) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "containerd", RuntimeVersion: s.version, RuntimeApiVersion: "v1"}, nil
}

func (s *storeServer) list() []string {
	s.lock.RLock()
	defer s.lock.RUnlock()
	var ids []string
	for id := range s.sandboxes {
		ids = append(ids, id)
	}
	return ids
}

func (s *storeServer) ListPodSandbox(context.Context, *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	s.lists.Add(1)
	resp := &runtimeapi.ListPodSandboxResponse{}
	for _, id := range s.list() {
		resp.Items = append(resp.Items, &runtimeapi.PodSandbox{Id: id})
	}
	return resp, nil
}

func (s *storeServer) ListPodSandboxStats(context.Context, *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	if s.statsEntered != nil {
		s.statsEntered <- struct{}{}
	}
	if s.statsHold != nil {
		<-s.statsHold
	}
	resp := &runtimeapi.ListPodSandboxStatsResponse{}
	for _, id := range s.list() {
		s.lock.RLock() // the bug: a write under the read lock
		s.sandboxes[id]++
		s.lock.RUnlock()
		resp.Stats = append(resp.Stats, &runtimeapi.PodSandboxStats{Attributes: &runtimeapi.PodSandboxAttributes{Id: id}})
	}
	return resp, nil
}

func startStoreServer(t *testing.T, s *storeServer) string {
	return serveCRI(t, func(srv *grpc.Server) { runtimeapi.RegisterRuntimeServiceServer(srv, s) })
}

// TestStoreGuardOnAffectedContainerd runs crivk's client against the
// store bug above: on an affected version the client is guarded and
// concurrent ListPodSandbox and ListPodSandboxStats calls never meet in the
// server (run with -race: the race detector stays quiet only because of
// the guard); on a fixed version the client is not guarded.
func TestStoreGuardOnAffectedContainerd(t *testing.T) {
	for _, tc := range []struct {
		version     string
		wantGuarded bool
	}{
		{"1.6.20~ds1", true},
		{"v1.6.22", false},
		{"v1.7.27", false},
	} {
		t.Run(tc.version, func(t *testing.T) {
			s := &storeServer{version: tc.version, sandboxes: map[string]int{}}
			for i := range 110 {
				s.sandboxes[fmt.Sprintf("sb%03d", i)] = 0
			}
			c, err := dialRemote(context.Background(), "unix://"+startStoreServer(t, s), 5*time.Second, time.Minute, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			if got := c.guard != nil; got != tc.wantGuarded {
				t.Fatalf("containerd %s: guarded = %v, want %v", tc.version, got, tc.wantGuarded)
			}
			if !tc.wantGuarded {
				return // the unguarded client would race against this fake, as against a fixed containerd it does not
			}
			ctx := context.Background()
			var wg sync.WaitGroup
			errs := make(chan error, 40)
			for i := range 40 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var err error
					if i%2 == 0 {
						_, err = c.ListPodSandboxStats(ctx, nil)
					} else {
						_, err = c.ListPodSandbox(ctx, nil)
					}
					if err != nil {
						errs <- err
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if got := s.sandboxes["sb000"]; got != 20 {
				t.Errorf("sb000 has %d stats samples, want 20", got)
			}
		})
	}
}

// TestStoreGuardHungStats: while a sandbox stats call hangs in an affected
// containerd, a listing waiting for the guard returns when its own context
// ends (here its deadline), without reaching the runtime, instead of
// waiting out the stats call's request timeout.
func TestStoreGuardHungStats(t *testing.T) {
	s := &storeServer{version: "1.6.20~ds1", sandboxes: map[string]int{"sb0": 0},
		statsEntered: make(chan struct{}, 1), statsHold: make(chan struct{})}
	c, err := dialRemote(context.Background(), "unix://"+startStoreServer(t, s), 5*time.Second, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	statsDone := make(chan error, 1)
	go func() {
		_, err := c.ListPodSandboxStats(context.Background(), nil)
		statsDone <- err
	}()
	t.Cleanup(func() {
		close(s.statsHold)
		if err := <-statsDone; err != nil {
			t.Errorf("the held stats call: %v", err)
		}
	})
	<-s.statsEntered

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	listed := make(chan error, 1)
	go func() {
		_, err := c.ListPodSandbox(ctx, nil)
		listed <- err
	}()
	select {
	case err := <-listed:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("ListPodSandbox behind a hung stats call returned %v, want its context's DeadlineExceeded", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ListPodSandbox waited past its own deadline for a hung stats call")
	}
	if n := s.lists.Load(); n != 0 {
		t.Errorf("the runtime answered %d listings while the stats call held the guard, want 0", n)
	}
}
