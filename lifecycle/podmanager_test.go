package lifecycle

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestPodManager: the desired-pod store keeps copies, knows rejected pods
// apart, finds the newest pod of a name among both, hands out the first
// sighting once, and forgets.
func TestPodManager(t *testing.T) {
	m := newPodManager()
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	pod := func(uid types.UID, created time.Time) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid, Namespace: "ns", Name: "web", CreationTimestamp: metav1.NewTime(created)}}
	}
	old, cur := pod("old", t0), pod("cur", t0.Add(time.Minute))

	m.add(old, t0)
	old.Labels = map[string]string{"changed": "after add"}
	if got := m.pod("old"); got == nil || got.Labels != nil {
		t.Fatalf("stored %+v, want a copy made at add", got)
	}
	if m.replace(cur) {
		t.Error("replace stored a pod the manager did not have")
	}
	m.reject(cur)
	if desired, rejected := m.known("cur"); desired || !rejected {
		t.Errorf("known(cur) = %v, %v; want rejected only", desired, rejected)
	}
	if got := m.byName("ns", "web"); got == nil || got.UID != "cur" {
		t.Errorf("byName = %v, want the newer (rejected) pod", got)
	}
	m.add(old, t0.Add(time.Hour)) // an update keeps the first sighting
	if seen, ok := m.takeFirstSeen("old"); !ok || !seen.Equal(t0) {
		t.Errorf("first seen %v %v, want %v", seen, ok, t0)
	}
	if _, ok := m.takeFirstSeen("old"); ok {
		t.Error("first sighting handed out twice")
	}
	if !m.replace(old) || len(m.list()) != 1 {
		t.Errorf("replace of a desired pod failed or list %v", m.list())
	}
	m.forget("old")
	m.forgetRejected("cur")
	if m.pod("old") != nil || m.rejectedPod("cur") != nil || m.byName("ns", "web") != nil {
		t.Error("forgotten pods still found")
	}
}
