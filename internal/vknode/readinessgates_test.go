package vknode

import (
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
