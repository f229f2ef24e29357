package main

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	testingclock "k8s.io/utils/clock/testing"
)

func podIn(name string, phase v1.PodPhase, ready bool, state v1.ContainerState) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c"}}},
		Status:     v1.PodStatus{Phase: phase, ContainerStatuses: []v1.ContainerStatus{{Name: "c", Ready: ready, State: state}}},
	}
}

var (
	running    = v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	terminated = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{}}
	waiting    = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}
)

func TestTrackerRecordsFirstSighting(t *testing.T) {
	c := testingclock.NewFakePassiveClock(time.Unix(1000, 0))
	tr := newTracker(c)
	tr.observe(watch.Added, podIn("p", v1.PodPending, false, waiting))
	c.SetTime(time.Unix(1001, 0))
	// Running but not ready yet does not count.
	tr.observe(watch.Modified, podIn("p", v1.PodRunning, false, running))
	c.SetTime(time.Unix(1002, 0))
	tr.observe(watch.Modified, podIn("p", v1.PodRunning, true, running))
	c.SetTime(time.Unix(1003, 0))
	// A later update does not move the first sighting.
	tr.observe(watch.Modified, podIn("p", v1.PodRunning, true, running))
	c.SetTime(time.Unix(1004, 0))
	tr.observe(watch.Modified, podIn("p", v1.PodSucceeded, false, terminated))
	c.SetTime(time.Unix(1005, 0))
	tr.observe(watch.Deleted, podIn("p", v1.PodSucceeded, false, terminated))

	ctx := context.Background()
	for _, tc := range []struct {
		e    event
		want int64
	}{{evRunning, 1002}, {evExited, 1004}, {evGone, 1005}} {
		got, err := tr.wait(ctx, tc.e, []string{"p"})
		if err != nil {
			t.Fatalf("%s: %v", tc.e, err)
		}
		if got["p"].Unix() != tc.want {
			t.Errorf("%s seen at %d, want %d", tc.e, got["p"].Unix(), tc.want)
		}
	}

	tr.forget([]string{"p"})
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := tr.wait(short, evRunning, []string{"p"}); err == nil || !strings.Contains(err.Error(), "missing p") {
		t.Errorf("wait after forget: %v, want a timeout naming p", err)
	}
}

func TestTrackerWaitWakesUp(t *testing.T) {
	tr := newTracker(testingclock.NewFakePassiveClock(time.Unix(0, 0)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := tr.wait(ctx, evRunning, []string{"a", "b"})
		done <- err
	}()
	tr.observe(watch.Added, podIn("a", v1.PodRunning, true, running))
	tr.observe(watch.Added, podIn("b", v1.PodRunning, true, running))
	if err := <-done; err != nil {
		t.Fatalf("wait: %v", err)
	}
}
