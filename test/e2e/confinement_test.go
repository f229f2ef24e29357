package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crivk/crivk/lifecycle/admission"
	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// A pod that asks for confinement never runs without it
// (docs/security.md): each field is honoured or the pod is refused the
// way the kubelet v1.35 refuses it on this machine (ENVIRONMENT.md).

// TestConfinementAppArmor: on a host without AppArmor, a pod asking for a
// profile (field or deprecated annotation) is rejected at admission:
// Failed, reason AppArmor, the kubelet's message and Warning event, and
// nothing of it reaches the runtime.
func TestConfinementAppArmor(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	if admission.AppArmorEnabled() {
		t.Skip("AppArmor is enabled on this host: the pod would run confined")
	}
	const msg = "Cannot enforce AppArmor: AppArmor is not enabled on the host"
	for name, mutate := range map[string]func(*v1.Pod){
		"field": func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{
				Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr.To("k8s-apparmor-example-deny-write")}}
		},
		"annotation": func(p *v1.Pod) {
			p.Annotations = map[string]string{v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "c": "runtime/default"}
		},
	} {
		t.Run(name, func(t *testing.T) {
			ns := newNamespace(t)
			pod := busyboxPod("apparmor", v1.RestartPolicyAlways, "sleep 3600")
			mutate(pod)
			created := createPod(t, ns, pod)
			p := waitPod(t, ns, pod.Name, time.Minute, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
			if p.Status.Reason != "AppArmor" || p.Status.Message != "Pod was rejected: "+msg {
				t.Errorf("status reason %q message %q", p.Status.Reason, p.Status.Message)
			}
			waitEvent(t, ns, pod.Name, v1.EventTypeWarning, "AppArmor", msg)
			if sb, cs := runtimeObjects(t, created.UID); sb+cs != 0 {
				t.Errorf("the rejected pod has %d sandboxes and %d containers", sb, cs)
			}
		})
	}
}

// TestConfinementHostUsers: hostUsers: false. On a runtime whose default
// handler has user namespaces (CONTAINERD=built, containerd 2) the pod runs
// in a user namespace of its own with the ID mappings crivk wrote to its
// pod directory, as the kubelet's userns file: container ID 0 is a host ID
// of a 65536-wide slot, never host 0 (uid_map and gid_map "0 H 65536", not
// the host's "0 0 4294967295"), and its emptyDir is mounted idmapped (what
// the container's root writes is the host's root's on disk). On a runtime
// without them (CONTAINERD=system, containerd 1.6) it never runs: the
// sandbox is refused with the kubelet's FailedCreatePodSandBox event and
// the pod stays Pending.
func TestConfinementHostUsers(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	if !runtimeSupportsUserNamespaces(t) {
		pod := busyboxPod("userns", v1.RestartPolicyAlways, "sleep 3600")
		pod.Spec.HostUsers = ptr.To(false)
		created := createPod(t, ns, pod)
		waitEvent(t, ns, pod.Name, v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: can't set `spec.hostUsers: false`")
		stillPending(t, ns, pod.Name, created.UID)
		return
	}
	pod := busyboxPod("userns", v1.RestartPolicyAlways,
		"cat /proc/self/uid_map /proc/self/gid_map; echo x >/data/f && stat -c 'owner %u' /data/f; sleep 3600")
	pod.Spec.HostUsers = ptr.To(false)
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	created := createPod(t, ns, pod)
	logs := waitLogs(t, ns, pod.Name, 90*time.Second, "the ID maps and the file's owner", func(l string) bool {
		return strings.Contains(l, "owner ")
	})
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	if len(lines) != 3 {
		t.Fatalf("logs %q: want uid_map, gid_map and the owner line", logs)
	}
	uidMap, gidMap := strings.Fields(lines[0]), strings.Fields(lines[1])
	if len(uidMap) != 3 || uidMap[0] != "0" || uidMap[1] == "0" || uidMap[2] != "65536" {
		t.Errorf("uid_map %q: want \"0 <host ID> 65536\" with a host ID not 0 (the host's own map is \"0 0 4294967295\")", lines[0])
	}
	if strings.Join(gidMap, " ") != strings.Join(uidMap, " ") {
		t.Errorf("gid_map %q, want the uid_map %q", lines[1], lines[0])
	}
	if lines[2] != "owner 0" {
		t.Errorf("inside the pod the file is %q, want root's (owner 0)", lines[2])
	}
	// The mappings are those of the pod's userns file (the kubelet's format).
	podDir := filepath.Join(mustEnv("LOCAL_DIR"), "crivk", "pods", string(created.UID))
	raw, err := os.ReadFile(filepath.Join(podDir, "userns"))
	if err != nil {
		t.Fatalf("the pod's userns file: %v", err)
	}
	var file struct {
		UIDMappings []struct{ HostID, ContainerID, Length uint32 } `json:"uidMappings"`
	}
	if err := json.Unmarshal(raw, &file); err != nil || len(file.UIDMappings) != 1 {
		t.Fatalf("userns file %s: %v", raw, err)
	}
	if m := file.UIDMappings[0]; len(uidMap) == 3 && (fmt.Sprint(m.HostID) != uidMap[1] || m.ContainerID != 0 || m.Length != 65536) {
		t.Errorf("userns file %s, the container's uid_map %q", raw, lines[0])
	}
	// Idmapped: on the host the file is root's, not the slot's host ID.
	st, err := os.Stat(filepath.Join(podDir, "volumes", "kubernetes.io~empty-dir", "data", "f"))
	if err != nil {
		t.Fatalf("the emptyDir's file on the host: %v", err)
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; uid != 0 {
		t.Errorf("on the host the file the pod's root wrote belongs to %d, want 0 (an idmapped mount)", uid)
	}
}

// TestConfinementRuntimeClass: a RuntimeClass whose handler the runtime
// does not have fails the sandbox with FailedCreatePodSandBox naming the
// handler; the pod stays Pending and never runs on the default handler.
func TestConfinementRuntimeClass(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ctx := testContext(t, time.Minute)
	handler := "crivk-e2e-no-such-handler-" + rand.String(5)
	rc, err := client.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: handler}, Handler: handler}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating RuntimeClass: %v", err)
	}
	t.Cleanup(func() {
		if err := client.NodeV1().RuntimeClasses().Delete(context.Background(), rc.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("clean-up: deleting RuntimeClass %s: %v", rc.Name, err)
		}
	})
	ns := newNamespace(t)
	pod := busyboxPod("rtclass", v1.RestartPolicyAlways, "sleep 3600")
	pod.Spec.RuntimeClassName = ptr.To(rc.Name)
	created := createPod(t, ns, pod)
	// The runtime's gRPC error as it is, as the kubelet quotes it.
	ev := waitEvent(t, ns, pod.Name, v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: rpc error: ")
	if !strings.Contains(ev.Message, handler) {
		t.Errorf("event %q does not name the handler %q", ev.Message, handler)
	}
	stillPending(t, ns, pod.Name, created.UID)
}

// TestConfinementSeccompLocalhostMissing: a Localhost seccomp profile is
// looked for under <root-dir>/seccomp; one that does not exist fails the
// container (CreateContainerError, the runtime's message naming the
// resolved path), not the sandbox, and the container never runs.
func TestConfinementSeccompLocalhostMissing(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	profile := "crivk-e2e-missing-" + rand.String(5) + ".json"
	pod := busyboxPod("seccomp", v1.RestartPolicyAlways, "sleep 3600")
	pod.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{
		Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To(profile)}}
	createPod(t, ns, pod)
	p := waitPod(t, ns, pod.Name, time.Minute, "CreateContainerError", func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
			p.Status.ContainerStatuses[0].State.Waiting.Reason == "CreateContainerError"
	})
	if msg := p.Status.ContainerStatuses[0].State.Waiting.Message; !strings.Contains(msg, "/seccomp/"+profile) || strings.HasPrefix(msg, "CreateContainer") {
		t.Errorf("waiting message %q does not name <root-dir>/seccomp/%s in the runtime's words", msg, profile)
	}
	if p.Status.Phase != v1.PodPending {
		t.Errorf("phase %s", p.Status.Phase)
	}
}

// stillPending checks that the pod is Pending with no container running
// and that the runtime holds no container of it.
func stillPending(t *testing.T, ns, name string, uid types.UID) {
	t.Helper()
	p, err := client.CoreV1().Pods(ns).Get(testContext(t, 10*time.Second), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != v1.PodPending {
		t.Errorf("phase %s, want Pending", p.Status.Phase)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil {
			t.Errorf("container %s runs", cs.Name)
		}
	}
	if _, cs := runtimeObjects(t, uid); cs != 0 {
		t.Errorf("the runtime holds %d containers of the refused pod", cs)
	}
}

// TestImageChange: patching a running container's image to another image
// present on the node kills the container (the kubelet's Killing event,
// "definition changed") and starts the new image: restartCount 1, a new
// container ID, the new image in the status.
func TestImageChange(t *testing.T) {
	const other = "docker.io/library/busybox:latest" // same content, second name (hack/images.sh)
	if busybox == other {
		t.Fatalf("BUSYBOX_IMAGE is %s already", other)
	}
	ns := newNamespace(t)
	pod := busyboxPod("image", v1.RestartPolicyAlways, "trap 'exit 0' TERM; while true; do sleep 1; done")
	createPod(t, ns, pod)
	p := waitPod(t, ns, pod.Name, time.Minute, "running", isRunningReady)
	oldID := p.Status.ContainerStatuses[0].ContainerID
	patch := fmt.Sprintf(`{"spec":{"containers":[{"name":"c","image":%q}]}}`, other)
	if _, err := client.CoreV1().Pods(ns).Patch(testContext(t, 10*time.Second), pod.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching the image: %v", err)
	}
	p = waitPod(t, ns, pod.Name, time.Minute, "the new image running", func(p *v1.Pod) bool {
		if len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		cs := p.Status.ContainerStatuses[0]
		return cs.RestartCount == 1 && cs.State.Running != nil && cs.ContainerID != oldID
	})
	if img := p.Status.ContainerStatuses[0].Image; img != other {
		t.Errorf("status image %q, want %q", img, other)
	}
	waitEvent(t, ns, pod.Name, v1.EventTypeNormal, "Killing", "Container c definition changed, will be restarted")
	// It stays: the new container is not taken for changed.
	err := wait.PollUntilContextTimeout(testContext(t, time.Minute), poll, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && p.Status.ContainerStatuses[0].RestartCount > 1, nil
	})
	if err == nil {
		t.Errorf("the container was restarted again")
	}
}
