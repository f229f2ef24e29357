package vknode

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestReadinessGateKicks(t *testing.T) {
	gated := func(status v1.ConditionStatus, labels map[string]string) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1", Labels: labels},
			Spec: v1.PodSpec{ReadinessGates: []v1.PodReadinessGate{{ConditionType: "example.com/gate"}}}}
		if status != "" {
			p.Status.Conditions = []v1.PodCondition{{Type: "example.com/gate", Status: status}}
		}
		return p
	}
	for name, tc := range map[string]struct {
		old, cur *v1.Pod
		kick     bool
	}{
		"gate set True":       {old: gated("", nil), cur: gated(v1.ConditionTrue, nil), kick: true},
		"gate flips to False": {old: gated(v1.ConditionTrue, nil), cur: gated(v1.ConditionFalse, nil), kick: true},
		"gate unchanged":      {old: gated(v1.ConditionTrue, nil), cur: gated(v1.ConditionTrue, map[string]string{"a": "b"})},
		"no gates":            {old: &v1.Pod{}, cur: &v1.Pod{Status: v1.PodStatus{Conditions: []v1.PodCondition{{Type: "x", Status: v1.ConditionTrue}}}}},
	} {
		t.Run(name, func(t *testing.T) {
			var kicked []types.UID
			ReadinessGateKicks(func(uid types.UID) { kicked = append(kicked, uid) }).OnUpdate(tc.old, tc.cur)
			if (len(kicked) == 1) != tc.kick {
				t.Errorf("kicked %v, want kick %v", kicked, tc.kick)
			}
		})
	}
}

// TestStatusReconciles: an update that changed a condition's status is
// reconciled as an update; the informer's periodic resync (the same object,
// the same resourceVersion) is reconciled as periodic, whatever the pod
// shows; an update that touched no condition is not handed on.
func TestStatusReconciles(t *testing.T) {
	pod := func(rv string, ready v1.ConditionStatus) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1", ResourceVersion: rv},
			Status: v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: ready}}}}
	}
	resynced := pod("7", v1.ConditionFalse)
	type call struct {
		rv       string
		periodic bool
	}
	for name, tc := range map[string]struct {
		old, cur *v1.Pod
		want     []call
	}{
		"condition changed":    {old: pod("6", v1.ConditionTrue), cur: pod("7", v1.ConditionFalse), want: []call{{"7", false}}},
		"no condition changed": {old: pod("6", v1.ConditionFalse), cur: pod("7", v1.ConditionFalse)},
		"resync":               {old: resynced, cur: resynced, want: []call{{"7", true}}},
		"resync of copies":     {old: pod("7", v1.ConditionFalse), cur: pod("7", v1.ConditionFalse), want: []call{{"7", true}}},
		"not pods":             {old: nil, cur: nil},
	} {
		t.Run(name, func(t *testing.T) {
			var got []call
			var oldObj, curObj any = tc.old, tc.cur
			if tc.old == nil {
				oldObj, curObj = "x", "x"
			}
			StatusReconciles(func(p *v1.Pod, periodic bool) { got = append(got, call{p.ResourceVersion, periodic}) }).OnUpdate(oldObj, curObj)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("reconciled %v, want %v", got, tc.want)
			}
		})
	}
}
