package taskevents

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	eventsapi "github.com/containerd/containerd/api/services/events/v1"
	"github.com/containerd/containerd/api/types"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeEvents is containerd's events service: each subscriber gets the
// envelopes sent on send.
type fakeEvents struct {
	eventsapi.UnimplementedEventsServer
	send    chan *types.Envelope
	mu      sync.Mutex
	filters []string
}

func (f *fakeEvents) Subscribe(req *eventsapi.SubscribeRequest, s eventsapi.Events_SubscribeServer) error {
	f.mu.Lock()
	f.filters = req.Filters
	f.mu.Unlock()
	for {
		select {
		case <-s.Context().Done():
			return nil
		case env := <-f.send:
			if err := s.Send(env); err != nil {
				return err
			}
		}
	}
}

func serveEvents(t *testing.T, svc eventsapi.EventsServer) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "containerd.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	if svc != nil {
		eventsapi.RegisterEventsServer(srv, svc)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return "unix://" + sock
}

func waitWake(t *testing.T, wake <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatalf("no wake %s", what)
	}
}

func TestTaskEventsWake(t *testing.T) {
	svc := &fakeEvents{send: make(chan *types.Envelope)}
	endpoint := serveEvents(t, svc)
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	wake := make(chan struct{}, 1)
	e := &Waker{Endpoint: endpoint, Namespace: "k8s.io", Wake: wake, Settle: []time.Duration{10 * time.Millisecond, 30 * time.Millisecond}, Retry: time.Second, Clock: clk}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Run(ctx)
	}()

	svc.send <- &types.Envelope{Namespace: "k8s.io", Topic: "/tasks/exit"}
	waitWake(t, wake, "at the event")
	svc.mu.Lock()
	filters := svc.filters
	svc.mu.Unlock()
	if len(filters) != 1 || filters[0] != `namespace=="k8s.io",topic~="^/tasks/"` {
		t.Errorf("subscribed with filters %q, want the k8s.io namespace's task events", filters)
	}
	// The settle wakes come as the clock passes each offset after the event.
	armed := func(what string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return clk.HasWaiters(), nil
		})
		if err != nil {
			t.Fatalf("the settle timer was never armed %s", what)
		}
		select {
		case <-wake:
			t.Fatalf("wake before the settle step %s", what)
		default:
		}
	}
	armed("for 10 ms")
	clk.Step(9 * time.Millisecond)
	select {
	case <-wake:
		t.Fatal("wake 9 ms after the event, want 10 ms")
	default:
	}
	clk.Step(time.Millisecond)
	waitWake(t, wake, "10 ms after the event")
	armed("for 30 ms")
	clk.Step(20 * time.Millisecond)
	waitWake(t, wake, "30 ms after the event")
	// The schedule is over: no timer is left.
	err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return !clk.HasWaiters(), nil
	})
	if err != nil {
		t.Fatal("a settle timer is still armed after the last step")
	}

	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
}

// A runtime without containerd's events API: run gives up at once.
func TestTaskEventsUnimplemented(t *testing.T) {
	endpoint := serveEvents(t, nil)
	e := &Waker{Endpoint: endpoint, Namespace: "k8s.io", Wake: make(chan struct{}, 1), Settle: []time.Duration{time.Millisecond}, Retry: time.Hour, Clock: clock.RealClock{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Run(context.Background())
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("run kept retrying against a runtime without the events API")
	}
}
