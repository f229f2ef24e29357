package nodestatus

import (
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	v1 "k8s.io/api/core/v1"
)

func TestNodeConditions(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	ready := cri.Readiness{RuntimeReady: true, NetworkReady: true}
	noNet := cri.Readiness{RuntimeReady: true, Message: "container runtime not ready: NetworkReady=false reason:NetworkPluginNotReady message:cni config uninitialized"}

	get := func(cs []v1.NodeCondition, typ v1.NodeConditionType) v1.NodeCondition {
		for _, c := range cs {
			if c.Type == typ {
				return c
			}
		}
		t.Fatalf("condition %s missing", typ)
		return v1.NodeCondition{}
	}

	first := NodeConditions(nil, ready, t0)
	if c := get(first, v1.NodeReady); c.Status != v1.ConditionTrue || c.Reason != "KubeletReady" {
		t.Errorf("ready runtime: Ready %+v", c)
	}
	if len(first) != 4 {
		t.Errorf("%d conditions, want Ready, MemoryPressure, DiskPressure, PIDPressure (NetworkUnavailable is the network provider's)", len(first))
	}

	down := NodeConditions(first, noNet, t1)
	c := get(down, v1.NodeReady)
	if c.Status != v1.ConditionFalse || c.Reason != "KubeletNotReady" || c.Message != noNet.Message {
		t.Errorf("network not ready: Ready %+v", c)
	}
	if !c.LastTransitionTime.Time.Equal(t1) {
		t.Errorf("Ready changed status but kept transition time %v", c.LastTransitionTime)
	}
	for _, c := range down {
		if c.Type == v1.NodeNetworkUnavailable {
			t.Errorf("NetworkUnavailable reported: %+v", c)
		}
	}
	if m := get(down, v1.NodeMemoryPressure); !m.LastTransitionTime.Time.Equal(t0) || !m.LastHeartbeatTime.Time.Equal(t1) {
		t.Errorf("unchanged MemoryPressure: transition %v heartbeat %v, want %v and %v", m.LastTransitionTime, m.LastHeartbeatTime, t0, t1)
	}
	if sameConditionStatus(first, down) {
		t.Error("sameConditionStatus: a Ready flip counted as no change")
	}
	if !sameConditionStatus(first, NodeConditions(first, ready, t1)) {
		t.Error("sameConditionStatus: heartbeat-only change counted as a change")
	}
}
