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

	first := NodeConditions(nil, ready, nil, t0)
	if c := get(first, v1.NodeReady); c.Status != v1.ConditionTrue || c.Reason != "KubeletReady" {
		t.Errorf("ready runtime: Ready %+v", c)
	}
	if len(first) != 4 {
		t.Errorf("%d conditions, want Ready, MemoryPressure, DiskPressure, PIDPressure (NetworkUnavailable is the network provider's)", len(first))
	}

	down := NodeConditions(first, noNet, nil, t1)
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
	if !sameConditionStatus(first, NodeConditions(first, ready, nil, t1)) {
		t.Error("sameConditionStatus: heartbeat-only change counted as a change")
	}
}

type fakePressure struct{ memory, disk, pid bool }

func (f fakePressure) IsUnderMemoryPressure() bool { return f.memory }
func (f fakePressure) IsUnderDiskPressure() bool   { return f.disk }
func (f fakePressure) IsUnderPIDPressure() bool    { return f.pid }

func TestPressureConditions(t *testing.T) {
	ready := cri.Readiness{RuntimeReady: true, NetworkReady: true}
	t0, t1 := time.Unix(1000, 0), time.Unix(2000, 0)
	type want struct {
		status          v1.ConditionStatus
		reason, message string
	}
	for _, tc := range []struct {
		name     string
		pressure PressureSource
		want     map[v1.NodeConditionType]want
	}{
		{"no source", nil, map[v1.NodeConditionType]want{
			v1.NodeMemoryPressure: {v1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"},
			v1.NodeDiskPressure:   {v1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
			v1.NodePIDPressure:    {v1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"},
		}},
		{"all", fakePressure{true, true, true}, map[v1.NodeConditionType]want{
			v1.NodeMemoryPressure: {v1.ConditionTrue, "KubeletHasInsufficientMemory", "kubelet has insufficient memory available"},
			v1.NodeDiskPressure:   {v1.ConditionTrue, "KubeletHasDiskPressure", "kubelet has disk pressure"},
			v1.NodePIDPressure:    {v1.ConditionTrue, "KubeletHasInsufficientPID", "kubelet has insufficient PID available"},
		}},
		{"memory only", fakePressure{memory: true}, map[v1.NodeConditionType]want{
			v1.NodeMemoryPressure: {v1.ConditionTrue, "KubeletHasInsufficientMemory", "kubelet has insufficient memory available"},
			v1.NodeDiskPressure:   {v1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev := NodeConditions(nil, ready, nil, t0)
			got := NodeConditions(prev, ready, tc.pressure, t1)
			for _, c := range got {
				w, ok := tc.want[c.Type]
				if !ok {
					continue
				}
				if c.Status != w.status || c.Reason != w.reason || c.Message != w.message {
					t.Errorf("%s = %s %q %q, want %s %q %q", c.Type, c.Status, c.Reason, c.Message, w.status, w.reason, w.message)
				}
				// The transition time moves only when the status changed.
				wantT := t0
				if w.status == v1.ConditionTrue {
					wantT = t1
				}
				if !c.LastTransitionTime.Time.Equal(wantT) {
					t.Errorf("%s transition at %v, want %v", c.Type, c.LastTransitionTime.Time, wantT)
				}
			}
		})
	}
}
