package vknode

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestDeletedPodKills(t *testing.T) {
	zero := int64(0)
	now := metav1.Now()
	graceful := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "a", DeletionTimestamp: &now, DeletionGracePeriodSeconds: &zero}}
	plain := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b", UID: "b"}}
	for _, tc := range []struct {
		name string
		obj  any
		want string
	}{
		{"the final object with its grace period", graceful, "a"},
		{"a tombstone of it", cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: graceful}, "a"},
		{"an object without a deletion grace period", plain, ""},
		{"not a pod", &v1.Node{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			DeletedPodKills(func(p *v1.Pod) { got = string(p.UID) }).OnDelete(tc.obj)
			if got != tc.want {
				t.Errorf("killed %q, want %q", got, tc.want)
			}
		})
	}
}
