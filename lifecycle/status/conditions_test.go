package status

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestWithForeignConditions(t *testing.T) {
	api := []v1.PodCondition{
		{Type: v1.PodScheduled, Status: v1.ConditionTrue},
		{Type: v1.PodReady, Status: v1.ConditionFalse}, // stale: the node owns Ready
		{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "EvictionByEvictionAPI"},
		{Type: "example.com/gate", Status: v1.ConditionTrue},
	}
	ours := []v1.PodCondition{
		{Type: v1.PodReady, Status: v1.ConditionTrue},
		{Type: v1.ContainersReady, Status: v1.ConditionTrue},
		{Type: v1.PodScheduled, Status: v1.ConditionFalse}, // stale copy of a foreign condition
	}
	want := []v1.PodCondition{
		{Type: v1.PodReady, Status: v1.ConditionTrue},
		{Type: v1.ContainersReady, Status: v1.ConditionTrue},
		{Type: v1.PodScheduled, Status: v1.ConditionTrue},
		{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "EvictionByEvictionAPI"},
		{Type: "example.com/gate", Status: v1.ConditionTrue},
	}
	if got := WithForeignConditions(api, ours); !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}
