package vknode

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodResourcesUpdates: a change of spec.resources (a pod-level
// resize) is handed on, with the new pod; nothing else is, nor a pod
// being deleted or another pod of the same name.
func TestPodResourcesUpdates(t *testing.T) {
	pod := func(uid, cpu string) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1", Name: "web", Namespace: "ns", Generation: 1}}
		if uid != "" {
			p.UID = "u2"
		}
		if cpu != "" {
			p.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}
		}
		return p
	}
	deleting := pod("", "2")
	deleting.DeletionTimestamp = &metav1.Time{}
	relabelled := pod("", "1")
	relabelled.Labels = map[string]string{"a": "b"}
	for name, tc := range map[string]struct {
		old, cur *v1.Pod
		want     bool
	}{
		"pod-level CPU limit changed": {old: pod("", "1"), cur: pod("", "2"), want: true},
		"pod-level resources added":   {old: pod("", ""), cur: pod("", "2"), want: true},
		"the same value, other units": {old: pod("", "1"), cur: pod("", "1000m")},
		"another field changed":       {old: pod("", "1"), cur: relabelled},
		"being deleted":               {old: pod("", "1"), cur: deleting},
		"another pod of the name":     {old: pod("", "1"), cur: pod("u2", "2")},
	} {
		t.Run(name, func(t *testing.T) {
			var got []*v1.Pod
			PodResourcesUpdates(func(p *v1.Pod) { got = append(got, p) }).OnUpdate(tc.old, tc.cur)
			if (len(got) == 1) != tc.want || (tc.want && got[0] != tc.cur) {
				t.Errorf("handed %v, want the new pod: %v", got, tc.want)
			}
		})
	}
}
