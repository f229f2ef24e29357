package lifecycle

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestWithAPIStatus: the status the engine takes as the API's is the pod
// object's of the same UID, or a static pod's mirror pod's; after a crivk
// restart it is what keeps containers started and ready until their
// probes run (status.probedState).
func TestWithAPIStatus(t *testing.T) {
	ready := v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}}
	pod := func(uid string, annotations map[string]string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-node", UID: types.UID("uid-" + uid), Annotations: annotations}}
	}
	static := map[string]string{"kubernetes.io/config.source": "file", "kubernetes.io/config.hash": "uid-s"}
	withStatus := func(p *v1.Pod) *v1.Pod { p.Status = ready; return p }
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		api  *v1.Pod // the API's object of the pod's name; nil: none
		want bool    // the API's status is taken
	}{
		{name: "same UID", pod: pod("a", nil), api: withStatus(pod("a", nil)), want: true},
		{name: "another UID (recreated)", pod: pod("a", nil), api: withStatus(pod("b", nil))},
		{name: "no API object", pod: pod("a", nil)},
		{name: "static pod: its mirror", pod: pod("s", static),
			api: withStatus(pod("m", map[string]string{v1.MirrorPodAnnotationKey: "uid-s"})), want: true},
		{name: "static pod: the mirror of another version", pod: pod("s", static),
			api: withStatus(pod("m", map[string]string{v1.MirrorPodAnnotationKey: "uid-old"}))},
		{name: "API pod: a mirror annotation naming it does not count", pod: pod("s", nil),
			api: withStatus(pod("m", map[string]string{v1.MirrorPodAnnotationKey: "uid-s"}))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &syncer{apiPod: func(ns, name string) *v1.Pod {
				if tc.api == nil || ns != tc.pod.Namespace || name != tc.pod.Name {
					return nil
				}
				return tc.api
			}}
			got := s.withAPIStatus(tc.pod)
			if taken := got.Status.Phase == v1.PodRunning; taken != tc.want {
				t.Fatalf("API status taken %v, want %v", taken, tc.want)
			}
			if tc.pod.Status.Phase != "" {
				t.Error("the pod given was modified")
			}
			if got.UID != tc.pod.UID {
				t.Errorf("UID %q, want the pod's %q", got.UID, tc.pod.UID)
			}
		})
	}
	if p := pod("a", nil); (&syncer{}).withAPIStatus(p) != p {
		t.Error("without an API lookup the pod is not returned as is")
	}
}
