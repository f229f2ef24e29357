package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestGCDeadContainers: a container that crashes again and again, on a
// crivk with --maximum-dead-containers-per-container=2 and the crash-loop
// back-off capped at 1 s (--max-container-restart-period, the
// KubeletConfiguration's crashLoopBackOff.maxContainerRestartPeriod): after
// 8 restarts (9 instances have run), exactly two dead ones, the newest,
// remain in the runtime, and the pod keeps one sandbox. (Under the default
// cap, 10 s doubling to 5 minutes, 8 restarts would take over 20 minutes,
// the first four alone 150 s.)
func TestGCDeadContainers(t *testing.T) {
	const restarts = 8
	// crivk may have just been started (this test may run first): a
	// SIGTERM before its signal handler is set would kill it uncleanly.
	waitCrivkServing(t)
	t.Cleanup(func() { waitCrivkServing(t) })
	withCrivkFlags(t, nil, nil, "--maximum-dead-containers-per-container=2", "--max-container-restart-period=1s")
	waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	ns := newNamespace(t)
	pod := createPod(t, ns, busyboxPod("crasher", v1.RestartPolicyAlways, "exit 1"))
	start := time.Now()
	p := waitPod(t, ns, pod.Name, 300*time.Second, fmt.Sprintf("%d restarts", restarts), func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= restarts
	})
	took := time.Since(start)
	// The back-off is honoured: 1 s at most between an exit and the next
	// start, so 8 restarts take well under what the default back-off
	// would wait (10 s, 20 s, 40 s, 80 s: 150 s for the first four alone),
	// and under what a cap of 10 s would (80 s); about 3.5 s a restart here.
	if took > 60*time.Second {
		t.Errorf("%d restarts took %s: the 1 s back-off cap is not honoured", restarts, took.Round(time.Second))
	}
	t.Logf("figures: %d restarts after %s", p.Status.ContainerStatuses[0].RestartCount, took.Round(time.Second))
	dead := func() (ids []string) {
		cs, err := runtime.ListContainers(testContext(t, 10*time.Second), &runtimeapi.ContainerFilter{
			LabelSelector: map[string]string{cri.LabelPodUID: string(p.UID), cri.LabelContainerName: "c"}})
		if err != nil {
			t.Fatalf("listing containers: %v", err)
		}
		for _, c := range cs {
			if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				ids = append(ids, fmt.Sprintf("%s(attempt %d)", c.Id[:12], c.GetMetadata().GetAttempt()))
			}
		}
		return ids
	}
	// Each death is followed by a sync that prunes to two; between the
	// two a third one may show for an instant.
	var last []string
	err := wait.PollUntilContextCancel(testContext(t, 30*time.Second), poll, true, func(context.Context) (bool, error) {
		last = dead()
		return len(last) == 2, nil
	})
	if err != nil {
		t.Fatalf("after %d restarts the runtime holds %d dead instances (%v), want 2", p.Status.ContainerStatuses[0].RestartCount, len(last), last)
	}
	t.Logf("dead instances after %d restarts: %v", p.Status.ContainerStatuses[0].RestartCount, last)
	if sb, _ := runtimeObjects(t, p.UID); sb != 1 {
		t.Errorf("the pod has %d sandboxes, want 1", sb)
	}
}

// TestGCImages: an image nobody uses is removed by the image collector,
// the image a running pod uses and the sandbox image are not. crivk runs
// with thresholds that force a collection at its start (high 0, low 0,
// minimum age 0): every unused image goes, and as the shared disk cannot
// be brought to 0% the kubelet's FreeDiskSpaceFailed event is recorded.
// Every image the collection may remove besides the throw-away one is
// exported first and imported back afterwards, for the tests that follow.
func TestGCImages(t *testing.T) {
	ctrBin, err := exec.LookPath("ctr")
	if err != nil {
		t.Skip("ctr is not installed")
	}
	sock := strings.TrimPrefix(mustEnv("CRI_ENDPOINT"), "unix://")
	rt, err := cri.Connect(testContext(t, 10*time.Second), cri.Config{Endpoint: mustEnv("CRI_ENDPOINT"), PodLogDir: filepath.Join(mustEnv("LOCAL_DIR"), "pods")})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctr := func(args ...string) {
		t.Helper()
		out, err := exec.Command(ctrBin, append([]string{"-n", "k8s.io", "-a", sock}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ctr %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	dir := t.TempDir()

	// The throw-away image: one layer of 1 MiB of random bytes, so its
	// ID is new at every run.
	name := fmt.Sprintf("crivk.test/gc-throwaway:%d", time.Now().Unix())
	tarPath := filepath.Join(dir, "throwaway.tar")
	if err := writeOCIImage(tarPath, name, 1<<20); err != nil {
		t.Fatal(err)
	}
	ctr("images", "import", tarPath)
	var throwaway string
	err = wait.PollUntilContextCancel(testContext(t, 10*time.Second), poll, true, func(context.Context) (bool, error) {
		throwaway = imageID(t, rt, name)
		return throwaway != "", nil
	})
	if err != nil {
		t.Fatalf("%s not in the runtime's CRI after the import", name)
	}

	// The image in use: busybox, by a running pod.
	ns := newNamespace(t)
	pod := createPod(t, ns, busyboxPod("user", v1.RestartPolicyAlways, "exec sleep 3600"))
	waitPod(t, ns, pod.Name, 60*time.Second, "Running", isRunningReady)
	inUse := imageID(t, rt, busybox)
	pause, err := rt.SandboxImage(testContext(t, 10*time.Second))
	if err != nil || pause == "" {
		t.Fatalf("the runtime names no sandbox image (%q, %v)", pause, err)
	}

	// Everything else the collection may remove is kept aside.
	imgs, err := rt.ListImages(testContext(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var aside []string
	for _, img := range imgs {
		if img.Id == throwaway || img.Id == inUse || hasTagPrefix(img, "crivk.test/gc-throwaway:") {
			continue // throw-away images of earlier runs go for good
		}
		// By tag: a repo digest is not always a name containerd stores.
		if len(img.RepoTags) == 0 {
			t.Logf("image %s has no tag: not kept aside", img.Id)
		}
		aside = append(aside, img.RepoTags...)
	}
	backup := filepath.Join(dir, "aside.tar")
	if len(aside) > 0 {
		ctr(append([]string{"images", "export", "--platform", "linux/" + goruntime.GOARCH, backup}, aside...)...)
	}
	restore := func() {
		if len(aside) > 0 {
			if out, err := exec.Command(ctrBin, "-n", "k8s.io", "-a", sock, "images", "import", backup).CombinedOutput(); err != nil {
				t.Errorf("importing the images kept aside back: %v: %s", err, out)
			}
		}
	}
	t.Logf("images kept aside: %v", aside)

	start := time.Now()
	t.Cleanup(func() { waitCrivkServing(t) })
	withCrivkFlags(t, nil, restore, "--image-gc-high-threshold=0", "--image-gc-low-threshold=0", "--image-minimum-gc-age=0s")
	err = wait.PollUntilContextCancel(testContext(t, 90*time.Second), poll, true, func(context.Context) (bool, error) {
		return imageID(t, rt, name) == "", nil
	})
	if err != nil {
		t.Fatalf("the unused image %s is still there 90 s after crivk started with forcing thresholds", name)
	}
	t.Logf("unused image removed %s after crivk's start", time.Since(start).Round(100*time.Millisecond))
	if imageID(t, rt, busybox) != inUse {
		t.Errorf("the image in use (%s) was removed", busybox)
	}
	if imageID(t, rt, pause) == "" {
		t.Errorf("the sandbox image %s was removed", pause)
	}
	waitPod(t, ns, pod.Name, 10*time.Second, "still Running", isRunningReady)

	// The kubelet's event: the disk could not be freed to 0%.
	err = wait.PollUntilContextCancel(testContext(t, 30*time.Second), time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + nodeName + ",reason=FreeDiskSpaceFailed"})
		if err != nil {
			return false, nil
		}
		for _, e := range l.Items {
			if e.LastTimestamp.After(start.Add(-time.Second)) && strings.HasPrefix(e.Message, "Insufficient free disk space on the node's image filesystem") {
				t.Logf("event FreeDiskSpaceFailed: %s", e.Message)
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("no FreeDiskSpaceFailed event on the node")
	}

	// The metric, through the API server's node proxy.
	raw, err := client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", nodeName, "proxy", "metrics").DoRaw(testContext(t, 10*time.Second))
	if err != nil {
		t.Fatalf("reading the node's /metrics: %v", err)
	}
	if !strings.Contains(string(raw), `kubelet_image_garbage_collected_total{reason="space"}`) {
		t.Errorf("kubelet_image_garbage_collected_total{reason=\"space\"} not in /metrics")
	}

	// status.images: the image in use is reported (the list is read every
	// 30 s, the status compared every 10 s).
	err = wait.PollUntilContextCancel(testContext(t, 60*time.Second), time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, img := range n.Status.Images {
			for _, nm := range img.Names {
				if nm == busybox || strings.HasPrefix(nm, name) {
					return nm == busybox, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("the node's status.images does not list %s (or still lists the removed image)", busybox)
	}
}

// waitCrivkServing waits until the running crivk is past its start: it
// serves its profiling address (its signal handler is set) and renews the
// node's Lease after the call (its TLS bootstrap is done). A crivk stopped
// before that exits uncleanly, failing withCrivkFlags's or TestMain's stop.
func waitCrivkServing(t *testing.T) {
	t.Helper()
	since := time.Now()
	err := wait.PollUntilContextCancel(testContext(t, 60*time.Second), poll, true, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+crivkProfilingAddr+"/debug/pprof/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, nil
		}
		l, err := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, nodeName, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(since), nil
	})
	if err != nil {
		t.Errorf("crivk does not serve %s or renew its Lease", crivkProfilingAddr)
	}
}

func hasTagPrefix(img *runtimeapi.Image, prefix string) bool {
	for _, tag := range img.RepoTags {
		if strings.HasPrefix(tag, prefix) {
			return true
		}
	}
	return false
}

// imageID is the ID of the image named name in the runtime, "" if absent.
func imageID(t *testing.T, rt *cri.Runtime, name string) string {
	t.Helper()
	id, ok, err := rt.ImagePresent(testContext(t, 10*time.Second), name)
	if err != nil {
		t.Fatalf("image status of %s: %v", name, err)
	}
	if !ok {
		return ""
	}
	return id
}

// writeOCIImage writes an OCI image layout tarball of one image named name
// (containerd's io.containerd.image.name annotation) whose only layer, not
// compressed, is a file of size random bytes.
func writeOCIImage(path, name string, size int) error {
	blob := func(b []byte) (string, []byte) {
		sum := sha256.Sum256(b)
		return "sha256:" + hex.EncodeToString(sum[:]), b
	}
	var layer bytes.Buffer
	data := make([]byte, size)
	if _, err := rand.Read(data); err != nil {
		return err
	}
	lw := tar.NewWriter(&layer)
	if err := lw.WriteHeader(&tar.Header{Name: "gc-throwaway", Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := lw.Write(data); err != nil {
		return err
	}
	if err := lw.Close(); err != nil {
		return err
	}
	layerDigest, layerBytes := blob(layer.Bytes())
	config, _ := json.Marshal(map[string]any{
		"architecture": goruntime.GOARCH, "os": "linux",
		"config": map[string]any{"Cmd": []string{"/gc-throwaway"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	})
	configDigest, configBytes := blob(config)
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": configDigest, "size": len(configBytes)},
		"layers": []map[string]any{{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layerDigest, "size": len(layerBytes)}},
	})
	manifestDigest, manifestBytes := blob(manifest)
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"manifests": []map[string]any{{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifestDigest, "size": len(manifestBytes),
			"annotations": map[string]string{"io.containerd.image.name": name}}},
	})
	var out bytes.Buffer
	w := tar.NewWriter(&out)
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{"blobs/sha256/" + strings.TrimPrefix(layerDigest, "sha256:"), layerBytes},
		{"blobs/sha256/" + strings.TrimPrefix(configDigest, "sha256:"), configBytes},
		{"blobs/sha256/" + strings.TrimPrefix(manifestDigest, "sha256:"), manifestBytes},
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := w.WriteHeader(&tar.Header{Name: d, Mode: 0o755, Typeflag: tar.TypeDir}); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := w.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := w.Write(f.data); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}
