package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestUpgradeFromPreviousRelease: the node runs the previous release
// (hack/previous-release, built by hack/build-previous.sh into
// CRIVK_PREVIOUS_BIN: the single-node agent of before Structure III, whose
// sandboxes carry no node label), with pods that have a probe and
// emptyDir and ConfigMap volumes. It stops (SIGTERM, as an upgrade stops
// it) and the crivk under test starts on the same root dir: every pod is
// adopted, not restarted (the same container, restartCount 0, one
// sandbox, Ready), and the new crivk owns them: a ConfigMap change reaches
// the mounted file, and a deleted pod's containers stop before its object goes
// and are removed just after.
func TestUpgradeFromPreviousRelease(t *testing.T) {
	prev := os.Getenv("CRIVK_PREVIOUS_BIN")
	if prev == "" {
		t.Skip("no previous release built: CRIVK_PREVIOUS_BIN is empty (hack/build-previous.sh builds it from git history)")
	}
	if _, err := os.Stat(prev); err != nil {
		t.Fatalf("the previous release: %v", err)
	}
	waitNodeReady(t, v1.ConditionTrue, 90*time.Second)
	ns := newNamespace(t)

	// The previous release runs the node.
	if err := stopCrivkFor(t); err != nil {
		t.Fatalf("crivk did not stop cleanly: %v", err)
	}
	stopPrev, err := startCrivkBinary(prev)
	if err != nil {
		t.Fatalf("starting the previous release: %v", err)
	}
	prevStopped := false
	t.Cleanup(func() {
		if !prevStopped {
			if err := stopPrev(); err != nil {
				t.Errorf("the previous release did not stop cleanly: %v", err)
			}
		}
		if stopCrivk == nil {
			if err := startCrivkFor(t); err != nil {
				t.Errorf("starting crivk again: %v", err)
			}
		}
	})
	prevStarted := time.Now()
	waitFleetRenewed(t, []string{nodeName}, prevStarted, 2*time.Minute)

	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"greeting": "before"}}
	if _, err := client.CoreV1().ConfigMaps(ns).Create(testContext(t, 30*time.Second), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	probed := busyboxPod("probed", v1.RestartPolicyAlways, "touch /tmp/ready; exec sleep 3600")
	probed.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/ready"}}},
		PeriodSeconds: 2}
	short := int64(2) // sleep as PID 1 ignores SIGTERM: the deletion below waits this long
	probed.Spec.TerminationGracePeriodSeconds = &short
	volumes := busyboxPod("volumes", v1.RestartPolicyAlways, "exec sleep 3600")
	volumes.Spec.Volumes = []v1.Volume{
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "settings", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "settings"}}}},
	}
	volumes.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}, {Name: "settings", MountPath: "/settings"}}
	before := map[string]*v1.Pod{}
	for _, p := range []*v1.Pod{probed, volumes} {
		createPod(t, ns, p)
	}
	for _, p := range []*v1.Pod{probed, volumes} {
		before[p.Name] = waitPod(t, ns, p.Name, 90*time.Second, "Running and Ready on the previous release", isRunningReady)
	}

	// The upgrade.
	prevStopped = true
	if err := stopPrev(); err != nil {
		t.Errorf("the previous release did not stop cleanly on SIGTERM: %v", err)
	}
	started := time.Now()
	if err := startCrivkFor(t); err != nil {
		t.Fatalf("starting crivk over the previous release: %v", err)
	}
	waitFleetRenewed(t, []string{nodeName}, started, 2*time.Minute)

	// Adopted, not restarted: for a minute after the start, each pod keeps
	// its container, Ready, with no restart and one sandbox.
	for name, b := range before {
		want := b.Status.ContainerStatuses[0].ContainerID
		p := waitPod(t, ns, name, 60*time.Second, "Running and Ready after the upgrade", isRunningReady)
		cs := p.Status.ContainerStatuses[0]
		if cs.ContainerID != want || cs.RestartCount != 0 {
			t.Errorf("pod %s after the upgrade: container %s (restarts %d), want the same %s with 0 restarts", name, cs.ContainerID, cs.RestartCount, want)
		}
		if sb, c := runtimeObjects(t, p.UID); sb != 1 || c != 1 {
			t.Errorf("pod %s after the upgrade: %d sandboxes and %d containers, want 1 and 1", name, sb, c)
		}
	}
	held := 0
	err = wait.PollUntilContextTimeout(context.Background(), 2*time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		for name, b := range before {
			p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			if !isRunningReady(p) || p.Status.ContainerStatuses[0].ContainerID != b.Status.ContainerStatuses[0].ContainerID || p.Status.ContainerStatuses[0].RestartCount != 0 {
				t.Errorf("%s after the upgrade: pod %s no longer the adopted Ready container: %s", time.Since(started).Round(time.Second), name, podSummary(p))
				return true, nil
			}
		}
		held++
		return false, nil
	})
	if !wait.Interrupted(err) && err != nil {
		t.Fatal(err)
	}
	t.Logf("the adopted pods stayed Ready with their containers for %d samples over a minute", held)

	// The new crivk owns them: the ConfigMap's change reaches the file.
	cm.Data["greeting"] = "after"
	if _, err := client.CoreV1().ConfigMaps(ns).Update(testContext(t, 30*time.Second), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last string
	err = wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		out, _, err := execIn(ctx, ns, "volumes", "c", "cat", "/settings/greeting")
		last = strings.TrimSpace(out)
		if err != nil {
			last = err.Error()
		}
		return last == "after", nil
	})
	if err != nil {
		t.Errorf("the adopted pod's ConfigMap volume after the update: %q, want \"after\"", last)
	}
	// And its deletion: containers first, then the object.
	uid := before["probed"].UID
	if err := client.CoreV1().Pods(ns).Delete(testContext(t, 30*time.Second), "probed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ns, "probed", 90*time.Second)
	// When the object goes nothing of the pod runs any more; the stopped
	// container and sandbox are removed just after (as the kubelet, whose
	// status manager deletes the object before the runtime's removal).
	if sb, c := runtimeLive(t, uid); sb != 0 || c != 0 {
		t.Errorf("the adopted pod's object is gone while the runtime holds %d ready sandboxes and %d running containers of it", sb, c)
	}
	err = wait.PollUntilContextTimeout(context.Background(), poll, 30*time.Second, true, func(context.Context) (bool, error) {
		sb, c := runtimeObjects(t, uid)
		return sb+c == 0, nil
	})
	if err != nil {
		sb, c := runtimeObjects(t, uid)
		t.Errorf("30s after the adopted pod's object went the runtime still holds %d sandboxes and %d containers of it", sb, c)
	}
}
