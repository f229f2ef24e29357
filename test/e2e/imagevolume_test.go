package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Image volumes (volumes[].image, ImageVolume, on by default in the
// kubelet v1.35): the node makes the image available, the runtime mounts it
// read-only (CRI Mount.image, containerd 2.1 and newer).

// skipWithoutImageVolumes skips a test on a runtime whose CRI cannot mount
// image volumes: containerd older than 2.1 (the CONTAINERD=system lane's
// Debian 1.6) ignores Mount.image and fails the container's creation.
func skipWithoutImageVolumes(t *testing.T) {
	t.Helper()
	v, err := runtime.Version(testContext(t, 10*time.Second), "")
	if err != nil {
		t.Fatalf("runtime version: %v", err)
	}
	if v.GetRuntimeName() == "containerd" && !versionAtLeast(v.GetRuntimeVersion(), 2, 1) {
		t.Skipf("containerd %s cannot mount image volumes (CRI Mount.image needs containerd 2.1 or newer)", v.GetRuntimeVersion())
	}
}

// versionAtLeast reports whether version ("v2.4.2", "1.6.20~ds1") is at
// least major.minor; one it cannot read is not.
func versionAtLeast(version string, major, minor int) bool {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 {
		return false
	}
	maj, err1 := strconv.Atoi(parts[0])
	mnr, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return maj > major || (maj == major && mnr >= minor)
}

// TestImageVolume: a pod with an image volume of the busybox image (on the
// node: IfNotPresent pulls nothing) mounted whole at /vol in one container
// and by subPath "bin" at /vol in another. Each finds the image's busybox
// binary where it should be and cannot write there ("Read-only file
// system": image volumes are always read-only). The image volume's Pulled
// event is on the pod itself (no field path), as the kubelet records it.
func TestImageVolume(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	skipWithoutImageVolumes(t)
	ns := newNamespace(t)
	script := func(file string) string {
		return "if [ -f " + file + " ]; then echo found " + file + "; else echo missing " + file + "; ls -la /vol; fi; " +
			"touch /vol/written 2>&1 || true; mkdir /vol/dir 2>&1 || true"
	}
	pod := busyboxPod("imgvol", v1.RestartPolicyNever, script("/vol/bin/busybox"))
	pod.Spec.Volumes = []v1.Volume{{Name: "img", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{
		Reference: busybox, PullPolicy: v1.PullIfNotPresent}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "img", MountPath: "/vol"}}
	sub := pod.Spec.Containers[0]
	sub.Name = "sub"
	sub.Command = []string{"sh", "-c", script("/vol/busybox")}
	sub.VolumeMounts = []v1.VolumeMount{{Name: "img", MountPath: "/vol", SubPath: "bin"}}
	pod.Spec.Containers = append(pod.Spec.Containers, sub)
	createPod(t, ns, pod)

	p := waitPod(t, ns, pod.Name, 90*time.Second, "a terminal phase", isTerminal)
	if p.Status.Phase != v1.PodSucceeded {
		t.Errorf("phase %s, want Succeeded; container statuses %+v", p.Status.Phase, p.Status.ContainerStatuses)
	}
	for container, file := range map[string]string{"c": "/vol/bin/busybox", "sub": "/vol/busybox"} {
		logs, err := podLogs(testContext(t, 30*time.Second), ns, pod.Name, &v1.PodLogOptions{Container: container})
		if err != nil {
			t.Fatalf("logs of %s: %v", container, err)
		}
		if !strings.Contains(logs, "found "+file) {
			t.Errorf("container %s: no %s from the image in its volume; logs:\n%s", container, file, logs)
		}
		if n := strings.Count(logs, "Read-only file system"); n != 2 {
			t.Errorf("container %s: %d writes refused as read-only, want 2 (touch, mkdir); logs:\n%s", container, n, logs)
		}
	}

	evs, err := podEvents(testContext(t, 10*time.Second), ns, "Pod", pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	onPod := false
	for _, e := range evs {
		if e.Reason == "Pulled" && e.InvolvedObject.FieldPath == "" && strings.HasPrefix(e.Message, `Container image "`+busybox+`" already present on machine`) {
			onPod = true
		}
	}
	if !onPod {
		t.Errorf("no Pulled event of the image volume on the pod; events:\n%s", describe(evs))
	}
}

// TestImageVolumeNeverMissing: an image volume with pullPolicy Never of an
// image the node does not have. The container that mounts it is never
// created and waits with the kubelet's reason and message,
// ErrImageNeverPull "Container image ... is not present with pull policy
// of Never", the pod has the ErrImageNeverPull warning and the Failed
// "Error: ErrImageNeverPull" one.
func TestImageVolumeNeverMissing(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	skipWithoutImageVolumes(t)
	ns := newNamespace(t)
	const missing = "registry.invalid/none:1"
	pod := busyboxPod("imgvol-never", v1.RestartPolicyAlways, "sleep 600")
	pod.Spec.Volumes = []v1.Volume{{Name: "img", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{
		Reference: missing, PullPolicy: v1.PullNever}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "img", MountPath: "/vol"}}
	p := createPod(t, ns, pod)

	msg := `Container image "` + missing + `" is not present with pull policy of Never`
	if got := waitingReason(t, ns, pod.Name, "c", "ErrImageNeverPull"); got != msg {
		t.Errorf("waiting message %q, want %q", got, msg)
	}
	waitEvent(t, ns, pod.Name, v1.EventTypeWarning, "ErrImageNeverPull", msg)
	waitEvent(t, ns, pod.Name, v1.EventTypeWarning, "Failed", "Error: ErrImageNeverPull")
	if _, containers := runtimeObjects(t, p.UID); containers != 0 {
		t.Errorf("%d containers in the runtime for a pod whose image volume is missing", containers)
	}
}
