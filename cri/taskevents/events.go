package taskevents

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	eventsapi "github.com/containerd/containerd/api/services/events/v1"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"
)

// Waker turns containerd's task events into PLEG wakes, so that a
// container's exit (or start) is relisted within milliseconds instead of at
// the next periodic relist (the kubelet's generic PLEG waits up to its 1 s
// period; containerd 1.6 does not implement the CRI's GetContainerEvents,
// which the kubelet's evented PLEG needs). containerd serves its own events
// API on the CRI socket; another runtime answers Unimplemented and crivk
// keeps relisting every period only.
//
// containerd's CRI plugin updates its own view of a container from the same
// events, concurrently with us (on an exit it first deletes the task, which
// takes some milliseconds), so a wake at the event can relist just before
// the CRI shows the change: more wakes follow the last event of a burst at
// the offsets in Settle (e.g. 10, 30 and 100 ms), so the change is seen
// within a few milliseconds of the CRI showing it, at the cost of a few
// relists per burst.
//
// All the exported fields are required; they must not change once Run
// started.
type Waker struct {
	// Endpoint is the CRI socket (unix://...), where containerd also
	// serves its events API.
	Endpoint string
	// Namespace is containerd's namespace of the CRI's containers (k8s.io).
	Namespace string
	// Wake receives a wake per event, dropped when one is already
	// pending: give it a buffer of one.
	Wake   chan<- struct{}
	Settle []time.Duration // increasing offsets after the last event
	// Retry is the wait before subscribing again after the stream broke.
	Retry time.Duration
	Clock clock.WithDelayedExecution

	mu     sync.Mutex
	timers []clock.Timer // one per settle offset, re-armed by every event; guarded by mu
}

// signal sends a wake unless one is already pending.
func (e *Waker) signal() {
	select {
	case e.Wake <- struct{}{}:
	default:
	}
}

// Run subscribes until ctx ends, re-subscribing after retry when the stream
// breaks (containerd restarted). It returns when the runtime has no events
// API.
func (e *Waker) Run(ctx context.Context) {
	conn, err := grpc.NewClient(e.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.G(ctx).WithError(err).Warn("runtime events: cannot dial the CRI endpoint; relisting every period only")
		return
	}
	defer conn.Close()
	client := eventsapi.NewEventsClient(conn)
	for {
		err := e.subscribe(ctx, client)
		if ctx.Err() != nil {
			return
		}
		if status.Code(err) == codes.Unimplemented {
			log.G(ctx).Info("runtime events: the runtime has no containerd events API; relisting every period only")
			return
		}
		log.G(ctx).WithError(err).Warnf("runtime events: subscription to %s lost; retrying in %s", e.Endpoint, e.Retry)
		select {
		case <-ctx.Done():
			return
		case <-e.Clock.After(e.Retry):
		}
	}
}

// subscribe reads task events until the stream fails.
func (e *Waker) subscribe(ctx context.Context, client eventsapi.EventsClient) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.Subscribe(ctx, &eventsapi.SubscribeRequest{
		Filters: []string{fmt.Sprintf(`namespace==%q,topic~="^/tasks/"`, e.Namespace)},
	})
	if err != nil {
		return err
	}
	defer e.stopTimer()
	for {
		env, err := stream.Recv()
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
		log.G(ctx).WithField("topic", env.GetTopic()).Debug("runtime event")
		e.signal()
		e.mu.Lock()
		e.stopTimersLocked()
		for _, d := range e.Settle {
			e.timers = append(e.timers, e.Clock.AfterFunc(d, e.signal))
		}
		e.mu.Unlock()
	}
}

func (e *Waker) stopTimersLocked() {
	for _, t := range e.timers {
		t.Stop()
	}
	e.timers = e.timers[:0]
}

func (e *Waker) stopTimer() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopTimersLocked()
}
