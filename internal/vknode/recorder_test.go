package vknode

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

func TestVKRecorderDropsProviderSuccess(t *testing.T) {
	fake := record.NewFakeRecorder(10)
	r := vkRecorder{fake}
	pod := &v1.Pod{}
	r.Event(pod, v1.EventTypeNormal, "ProviderCreateSuccess", "Create pod in provider successfully")
	r.Eventf(pod, v1.EventTypeNormal, "ProviderUpdateSuccess", "Update pod in provider successfully")
	r.AnnotatedEventf(pod, nil, v1.EventTypeNormal, "ProviderDeleteSuccess", "Delete pod in provider successfully")
	r.Eventf(pod, v1.EventTypeWarning, "ProviderCreateFailed", "failed: %s", "boom")
	r.Event(pod, v1.EventTypeNormal, "Pulled", "image present")
	close(fake.Events)
	var got []string
	for e := range fake.Events {
		got = append(got, e)
	}
	want := []string{"Warning ProviderCreateFailed failed: boom", "Normal Pulled image present"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("events %q, want %q", got, want)
	}
}
