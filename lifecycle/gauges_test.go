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
	if got := f.e.PodCounts(); got.Desired != 1 || !reflect.DeepEqual(got.Working, map[[2]string]int{{"sync", "desired"}: 1}) {
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
		return f.e.PodCounts().Working[[2]string{"terminating", "runtime_only"}] == 1
	})
	f.rt.setKillErrs(0)
}
