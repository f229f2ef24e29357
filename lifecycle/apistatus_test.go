package lifecycle

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
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

// TestEngineRestartKeepsStaticPodStartedAndReady is the node e2e
// "MirrorPod when kubelet restarts should not change container status":
// crivk restarts with a static pod's container running for an hour, a
// startup and a readiness probe, its mirror pod Running and Ready. Until
// the API's pods synced the static pod's status is held (nothing blind is
// published); once the mirror is known the pod is published from it,
// started and ready, before any probe settled a result. Past
// staticStatusHold the status is published without the mirror.
func TestEngineRestartKeepsStaticPodStartedAndReady(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mirrorSeen bool // the informer syncs and delivers the mirror pod
		wantReady  bool
	}{
		{name: "mirror seen: started and ready as the API says", mirrorSeen: true, wantReady: true},
		{name: "no mirror within the hold: published blind after it", mirrorSeen: false, wantReady: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var synced atomic.Bool
			var mirror atomic.Pointer[v1.Pod]
			pr := &fakeProbeRuntime{code: 1} // no probe succeeds: what is published is the API's word
			f := newEngineFixture(t, func(c *Config) {
				c.ProbeRuntime, c.Recorder = pr, record.NewFakeRecorder(1000)
				c.APIPodsSynced = synced.Load
				c.APIPod = func(namespace, name string) *v1.Pod {
					if m := mirror.Load(); m != nil && m.Namespace == namespace && m.Name == name {
						return m
					}
					return nil
				}
			})
			pod := enginePod("uid-s", "static-node", v1.RestartPolicyAlways)
			pod.Annotations = map[string]string{"kubernetes.io/config.source": "file", "kubernetes.io/config.hash": "uid-s"}
			probe := &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"/bin/true"}}},
				InitialDelaySeconds: 1, PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
			pod.Spec.Containers[0].StartupProbe, pod.Spec.Containers[0].ReadinessProbe = probe, probe.DeepCopy()
			startedAt := f.clock.Now().Add(-time.Hour)
			f.rt.mu.Lock()
			f.rt.pods["uid-s"] = &cri.PodStatus{Ref: cri.RefOf(pod),
				Sandboxes:  []cri.SandboxStatus{{ID: "sb", Ready: true, IPs: []string{"10.0.0.9"}}},
				Containers: []cri.ContainerStatus{{ID: "c", Name: "a", Type: cri.ContainerTypeRegular, State: cri.StateRunning, StartedAt: startedAt}}}
			f.rt.mu.Unlock()
			f.relist()
			f.e.UpdatePod(context.Background(), pod)
			f.eventually(t, "the static pod synced", func() bool { return f.e.workers.IsKnown("uid-s") && !f.e.workers.isWorking("uid-s") })
			if p := f.lastPublished("uid-s"); p != nil {
				t.Fatalf("a status was published before the mirror pod was known: %+v", p.Status.ContainerStatuses)
			}
			// Nor does the mirror writer's fallback read one (it would
			// write the manifest's Pending).
			if p := f.e.PublishedPod("uid-s"); p != nil {
				t.Fatalf("PublishedPod during the hold: %+v", p.Status)
			}
			if tc.mirrorSeen {
				yes := true
				m := pod.DeepCopy()
				m.UID = "uid-mirror"
				m.Annotations = map[string]string{v1.MirrorPodAnnotationKey: "uid-s"}
				m.Status = v1.PodStatus{Phase: v1.PodRunning,
					Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}, {Type: v1.ContainersReady, Status: v1.ConditionTrue}},
					ContainerStatuses: []v1.ContainerStatus{{Name: "a", ContainerID: "containerd://c", Ready: true, Started: &yes,
						State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(startedAt)}}}}}
				mirror.Store(m)
				synced.Store(true)
			} else {
				f.clock.Step(staticStatusHold)
			}
			f.e.Kick("uid-s") // staticpods.MirrorSeenKicks, or any later sync
			f.eventually(t, "the static pod published", func() bool { return f.lastPublished("uid-s") != nil })
			if p := f.e.PublishedPod("uid-s"); p == nil || p.Status.Phase != v1.PodRunning {
				t.Errorf("PublishedPod after the hold: %v", p)
			}
			cs := f.lastPublished("uid-s").Status.ContainerStatuses[0]
			if tc.wantReady && (cs.Started == nil || !*cs.Started || !cs.Ready) {
				t.Errorf("published started %v ready %v, want both true (the mirror's)", cs.Started, cs.Ready)
			}
			if !tc.wantReady && cs.Ready {
				t.Error("published ready without the API's word or a probe")
			}
			if n := f.rt.count("uid-s", "KillContainer"); n != 0 {
				t.Errorf("the running container was killed %d times", n)
			}
		})
	}
}
