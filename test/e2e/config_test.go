package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestConfigFile: a KubeletConfiguration file given with --config sets
// crivk's settings, and /configz serves them; a field crivk does not
// support stops crivk at start, by name, with exit code 2.
func TestConfigFile(t *testing.T) {
	// crivk up first: a crivk stopped while it starts dies of the signal.
	waitNodeReady(t, v1.ConditionTrue, 90*time.Second)
	dir := t.TempDir()
	file := filepath.Join(dir, "kubelet.yaml")
	cfg := "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 57\ncontainerLogMaxFiles: 4\n"
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	dropins := filepath.Join(dir, "kubelet.conf.d")
	if err := os.MkdirAll(dropins, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dropins, "10-logs.conf"), []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncontainerLogMaxFiles: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	withCrivkFlags(t, nil, nil, "--config="+file, "--config-dir="+dropins)
	waitNodeReady(t, v1.ConditionTrue, 60*time.Second)

	ctx := testContext(t, time.Minute)
	var kc map[string]any
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		var err error
		kc, err = testutil.Configz(ctx, client, nodeName)
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("/configz never answered: %v", err)
	}
	// The file's maxPods, the drop-in's containerLogMaxFiles, and a flag of
	// hack/run-crivk.sh's command line.
	for field, want := range map[string]any{"maxPods": float64(57), "containerLogMaxFiles": float64(3), "cgroupRoot": "/crivk", "cgroupDriver": "cgroupfs"} {
		if kc[field] != want {
			t.Errorf("/configz %s = %v, want %v", field, kc[field], want)
		}
	}
	if p, _ := kc["staticPodPath"].(string); !strings.HasSuffix(p, "/manifests") {
		t.Errorf("/configz staticPodPath = %v, want hack/run-crivk.sh's manifest directory", kc["staticPodPath"])
	}

	// Refused by name, before anything starts.
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuManagerPolicy: static\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(root, "_output", "bin", "crivk"), "--kubeconfig=/dev/null", "--config="+bad).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "KubeletConfiguration field cpuManagerPolicy is not supported by crivk") {
		t.Errorf("crivk with an unsupported field: %v, %q; want exit 2 naming cpuManagerPolicy", err, out)
	}
}

// TestStaticPod: a manifest dropped into the node's manifest directory
// runs, with a mirror pod in the API carrying the kubelet's annotations,
// an owner reference to the Node and the pod's status; the mirror pod,
// deleted through the API, comes back; removing the manifest stops the
// containers and deletes the mirror pod.
func TestStaticPod(t *testing.T) {
	waitNodeReady(t, v1.ConditionTrue, 90*time.Second)
	ns := newNamespace(t)
	manifests := os.Getenv("CRIVK_POD_MANIFEST_PATH")
	if manifests == "" {
		manifests = filepath.Join(mustEnv("LOCAL_DIR"), "manifests")
	}
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	pod := busyboxPod("static-web", v1.RestartPolicyAlways, "sleep 3600")
	pod.APIVersion, pod.Kind = "v1", "Pod"
	pod.Namespace = ns
	pod.Spec.NodeSelector = nil
	pod.Spec.TerminationGracePeriodSeconds = new(int64) // the test's containers stop at once
	data, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(manifests, ns+".json")
	// Written elsewhere and renamed: crivk never reads half a file.
	tmp := filepath.Join(manifests, "."+ns+".json.tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	// Removed before the namespace goes (cleanups run last first).
	t.Cleanup(func() {
		if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("clean-up: %v", err)
		}
	})
	name := "static-web-" + strings.ToLower(nodeName)

	mirror := waitPod(t, ns, name, 90*time.Second, "the mirror pod Running and Ready", isRunningReady)
	hash := mirror.Annotations["kubernetes.io/config.hash"]
	if mirror.Annotations["kubernetes.io/config.mirror"] != hash || hash == "" ||
		mirror.Annotations["kubernetes.io/config.source"] != "file" || mirror.Annotations["kubernetes.io/config.seen"] == "" {
		t.Errorf("mirror annotations %v: want config.mirror = config.hash, config.source file, config.seen", mirror.Annotations)
	}
	if or := mirror.OwnerReferences; len(or) != 1 || or[0].Kind != "Node" || or[0].Name != nodeName {
		t.Errorf("mirror owner references %v: want the Node", or)
	}
	if mirror.Spec.NodeName != nodeName {
		t.Errorf("mirror spec.nodeName %q", mirror.Spec.NodeName)
	}
	if sb, _ := runtimeObjects(t, mirror.UID); sb != 0 {
		t.Error("the mirror pod must never run: its UID has sandboxes")
	}
	if sb, cs := runtimeObjects(t, types.UID(hash)); sb == 0 || cs == 0 {
		t.Errorf("the static pod (uid %s) has %d sandboxes and %d containers, want it running", hash, sb, cs)
	}

	// Deleted through the API: a new mirror pod comes back, the static pod
	// keeps running.
	ctx := testContext(t, 2*time.Minute)
	if err := client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	again := waitPod(t, ns, name, 60*time.Second, "a new mirror pod, Running", func(p *v1.Pod) bool {
		return p.UID != mirror.UID && p.DeletionTimestamp == nil && isRunningReady(p)
	})
	if again.Annotations["kubernetes.io/config.mirror"] != hash {
		t.Errorf("recreated mirror annotations %v", again.Annotations)
	}
	if _, cs := runtimeObjects(t, types.UID(hash)); cs == 0 {
		t.Error("deleting the mirror pod stopped the static pod")
	}

	// The manifest removed: the containers stop, the mirror goes.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ns, name, 90*time.Second)
	err = wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		sb, cs := runtimeObjects(t, types.UID(hash))
		return sb == 0 && cs == 0, nil
	})
	if err != nil {
		sb, cs := runtimeObjects(t, types.UID(hash))
		t.Errorf("the static pod's runtime objects remain after its manifest was removed: %d sandboxes, %d containers", sb, cs)
	}
	if _, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the mirror pod came back after the manifest was removed: %v", err)
	}
}
