package lifecycle

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestEngineStaticPodReAdded: a static pod killed because its manifest was
// removed and handed again with the same UID (the manifest written again
// with the same content) is restarted once its termination completed, as
// the kubelet's pod workers (restartRequested) and HandlePodCleanups do:
// its containers are kept, so the new one counts restartCount 1, nothing
// of it is removed and OnTerminated is never called (its mirror pod
// stays); its phase never becomes terminal (the kubelet's TODO(#116484)).
// The node e2e spec "MirrorPod ... should successfully recreate when file
// is removed and recreated" asserts exactly the restartCount 1.
func TestEngineStaticPodReAdded(t *testing.T) {
	f := newEngineFixture(t)
	ctx := context.Background()
	pod := enginePod("uid-static", "web-node", v1.RestartPolicyAlways)
	pod.Annotations = map[string]string{"kubernetes.io/config.source": "file", "kubernetes.io/config.hash": "uid-static"}
	f.startRunning(t, pod)

	// The re-add must reach the engine while the pod terminates, as the
	// manifest written again within the grace period: the fake runtime's
	// KillPod would otherwise finish the termination first (then the
	// runtime pod is removed and the new one starts from restartCount 0).
	readded := make(chan struct{})
	f.rt.mu.Lock()
	f.rt.beforeKill = func() { <-readded }
	f.rt.mu.Unlock()
	if !f.e.Kill(ctx, deleted(pod, f.clock.Now(), nil)) {
		t.Fatal("Kill of a known pod returned false")
	}
	f.e.UpdatePod(ctx, pod.DeepCopy())
	close(readded)

	f.eventually(t, "the old containers to be stopped", func() bool { return f.rt.count("uid-static", "KillPod") >= 1 })
	f.eventually(t, "the pod to run again with restartCount 1", func() bool {
		// Housekeeping drops the finished worker of the re-added UID and
		// starts it again.
		f.e.Housekeeping(ctx)
		p := f.lastPublished("uid-static")
		return p != nil && p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) == 1 &&
			p.Status.ContainerStatuses[0].RestartCount == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	})
	if n := f.rt.count("uid-static", "RemovePod"); n != 0 {
		t.Errorf("RemovePod called %d times for a pod that is desired again", n)
	}
	if n := f.rt.count("uid-static", "OnTerminated"); n != 0 {
		t.Errorf("OnTerminated called %d times for a pod that is desired again", n)
	}
	for _, e := range f.rt.ops("uid-static", "notify") {
		if e.phase == v1.PodFailed || e.phase == v1.PodSucceeded {
			t.Errorf("a terminal phase %s was published for the static pod", e.phase)
		}
	}
	if p := f.e.Pod("uid-static"); p == nil || p.DeletionTimestamp != nil {
		t.Errorf("the engine's pod is %v, want the re-added pod without a deletion timestamp", p)
	}
}
