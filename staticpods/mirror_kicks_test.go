package staticpods

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestMirrorSeenKicks: a mirror pod added to the informer's view kicks its
// static pod (the UID in its mirror annotation); other pods kick nothing.
func TestMirrorSeenKicks(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  any
		want []types.UID
	}{
		{name: "mirror pod", obj: &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid-m", Annotations: map[string]string{AnnotationMirror: "uid-s"}}},
			want: []types.UID{"uid-s"}},
		{name: "API pod", obj: &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid-a"}}},
		{name: "not a pod", obj: "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []types.UID
			MirrorSeenKicks(func(uid types.UID) { got = append(got, uid) }).OnAdd(tc.obj, true)
			if len(got) != len(tc.want) || (len(got) == 1 && got[0] != tc.want[0]) {
				t.Errorf("kicked %v, want %v", got, tc.want)
			}
		})
	}
}
