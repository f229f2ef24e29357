package lifecycle

import (
	"context"
	"reflect"
	"testing"

	"github.com/crivk/crivk/cri"
	v1 "k8s.io/api/core/v1"
)

// TestPodCounts: the working-pods gauge counts a running pod as sync and
// desired, forgets it with the pod, and counts a pod only the runtime had
// as runtime_only while it terminates.
func TestPodCounts(t *testing.T) {
	f := newEngineFixture(t)
	pod := enginePod("uid-1", "web", v1.RestartPolicyAlways)
	f.startRunning(t, pod)
	if got := f.e.PodCounts(); got.Desired != 1 || !reflect.DeepEqual(got.Working, map[[3]string]int{{"sync", "desired", ""}: 1}) {
		t.Errorf("running pod: %+v", got)
	}
	f.e.Kill(context.Background(), pod)
	f.eventually(t, "the worker to finish", func() bool { return f.e.workers.IsPodFinished("uid-1") })
	f.eventually(t, "the pod forgotten", func() bool { f.step(syncInterval); return f.e.PodCounts().Desired == 0 })
	// A runtime-only pod's record lives while it terminates (its kill
	// fails here), then goes at once.
	f.rt.setKillErrs(1 << 20)
	f.e.workers.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, RunningPod: &cri.PodStatus{Ref: cri.PodRef{UID: "uid-3", Namespace: "ns", Name: "orphan"}}})
	f.eventually(t, "uid-3 terminating, runtime only", func() bool {
		return f.e.PodCounts().Working[[3]string{"terminating", "runtime_only", "unknown"}] == 1
	})
	f.rt.setKillErrs(0)
}

// TestPodCountsStatic: a static pod (kubernetes.io/config.source not
// "api") is counted apart from the API's, as the kubelet's static="true"
// series of kubelet_desired_pods and kubelet_working_pods.
func TestPodCountsStatic(t *testing.T) {
	f := newEngineFixture(t)
	api := enginePod("uid-1", "web", v1.RestartPolicyAlways)
	f.startRunning(t, api)
	static := enginePod("uid-2", "etcd-node", v1.RestartPolicyAlways)
	static.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	f.startRunning(t, static)
	got := f.e.PodCounts()
	want := map[[3]string]int{{"sync", "desired", ""}: 1, {"sync", "desired", "true"}: 1}
	if got.Desired != 1 || got.DesiredStatic != 1 || !reflect.DeepEqual(got.Working, want) {
		t.Errorf("an API pod and a static pod: %+v, want Desired 1, DesiredStatic 1, Working %v", got, want)
	}
}
