package vknode

import (
	"testing"
	"time"
)

func TestRetryBackoffFirstAttemptImmediateRetriesBackOff(t *testing.T) {
	r := newRetryBackoff(40 * time.Millisecond)
	// Many distinct items at once: no shared bucket delays any of them.
	for i := range 500 {
		if d := r.When(i); d != 0 {
			t.Fatalf("first attempt of item %d delayed %v", i, d)
		}
	}
	// Retries of one item back off exponentially up to the maximum.
	want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond}
	if d := r.When("a"); d != 0 {
		t.Fatalf("first attempt delayed %v", d)
	}
	for i, w := range want {
		if d := r.When("a"); d != w {
			t.Fatalf("retry %d delayed %v, want %v", i+1, d, w)
		}
	}
	if n := r.NumRequeues("a"); n != len(want)+1 {
		t.Fatalf("NumRequeues %d, want %d", n, len(want)+1)
	}
	// Success forgets the item: its next first attempt is immediate again.
	r.Forget("a")
	if d := r.When("a"); d != 0 {
		t.Fatalf("first attempt after Forget delayed %v", d)
	}
}
