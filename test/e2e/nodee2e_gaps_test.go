package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The gaps the node e2e suite (test/e2e_node) found in crivk (issue #31,
// docs/conformance.md), shown here on the project's own cluster.

// TestContainerLogLinks: every container crivk starts has the kubelet's
// link <pod>_<namespace>_<container>-<id>.log in --container-logs-dir
// (the kubelet's /var/log/containers) to its log under --pod-log-dir, and
// no link outlives its container: a crash-looping container's dead
// instances pruned to one (--maximum-dead-containers-per-container=1)
// take their links with them, and the pods' deletion leaves the directory
// empty. The node e2e suite's ContainerLogPath spec reads the log through
// that link.
func TestContainerLogLinks(t *testing.T) {
	waitCrivkServing(t)
	t.Cleanup(func() { waitCrivkServing(t) })
	dir := t.TempDir()
	withCrivkFlags(t, nil, nil, "--container-logs-dir="+dir, "--maximum-dead-containers-per-container=1", "--max-container-restart-period=1s")
	waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	ns := newNamespace(t)

	logger := createPod(t, ns, busyboxPod("logger", v1.RestartPolicyAlways, "echo hello-from-logger; sleep 3600"))
	p := waitPod(t, ns, logger.Name, 60*time.Second, "running", isRunningReady)
	id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
	link := filepath.Join(dir, fmt.Sprintf("%s_%s_c-%s.log", p.Name, ns, id))
	want := filepath.Join(mustEnv("LOCAL_DIR"), "pods", fmt.Sprintf("%s_%s_%s", ns, p.Name, p.UID), "c", "0.log")
	if got, err := os.Readlink(link); err != nil || got != want {
		t.Fatalf("link %s -> %q (%v), want -> %s; directory holds %v", link, got, err, want, linkNames(t, dir))
	}
	var content []byte
	err := wait.PollUntilContextCancel(testContext(t, 30*time.Second), poll, true, func(context.Context) (bool, error) {
		content, _ = os.ReadFile(link)
		return strings.Contains(string(content), "hello-from-logger"), nil
	})
	if err != nil {
		t.Fatalf("the log read through %s never showed the container's output: %q", link, content)
	}

	crasher := createPod(t, ns, busyboxPod("crasher", v1.RestartPolicyAlways, "echo crash; exit 1"))
	c := waitPod(t, ns, crasher.Name, 120*time.Second, "4 restarts", func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 4
	})
	// The crasher's links are exactly its instances the runtime still
	// holds (the running or newest one and one dead), none dangling.
	var links, instances []string
	err = wait.PollUntilContextCancel(testContext(t, 30*time.Second), poll, true, func(ctx context.Context) (bool, error) {
		cs, err := runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{cri.LabelPodUID: string(c.UID)}})
		if err != nil {
			return false, nil
		}
		instances = nil
		for _, ctr := range cs {
			instances = append(instances, fmt.Sprintf("%s_%s_c-%s.log", c.Name, ns, ctr.Id))
		}
		sort.Strings(instances)
		links = nil
		for _, n := range linkNames(t, dir) {
			if strings.HasPrefix(n, c.Name+"_") {
				links = append(links, n)
			}
		}
		return strings.Join(links, ",") == strings.Join(instances, ","), nil
	})
	if err != nil {
		t.Fatalf("after %d restarts the crasher has links %v, want one per instance the runtime holds %v", c.Status.ContainerStatuses[0].RestartCount, links, instances)
	}
	for _, n := range links {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Errorf("link %s dangles: %v", n, err)
		}
	}
	t.Logf("crasher after %d restarts: links %v", c.Status.ContainerStatuses[0].RestartCount, links)

	for _, name := range []string{logger.Name, crasher.Name} {
		if err := client.CoreV1().Pods(ns).Delete(testContext(t, 10*time.Second), name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{logger.Name, crasher.Name} {
		waitGone(t, ns, name, 60*time.Second)
	}
	var left []string
	err = wait.PollUntilContextCancel(testContext(t, 30*time.Second), poll, true, func(context.Context) (bool, error) {
		left = linkNames(t, dir)
		return len(left) == 0, nil
	})
	if err != nil {
		t.Fatalf("links left after the pods were deleted: %v", left)
	}
}

func linkNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("reading %s: %v", dir, err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// TestReadOnlyPort: with --read-only-port (the KubeletConfiguration's
// readOnlyPort) crivk serves the kubelet's read-only endpoints over plain
// HTTP without credentials, as the node e2e suite reads them on 10255
// (/pods, /stats/summary, /metrics, /healthz), answers the debugging
// endpoints 405 as the kubelet's read-only server does, and still asks
// for credentials on the node API's port.
func TestReadOnlyPort(t *testing.T) {
	const port = 10255
	waitCrivkServing(t)
	t.Cleanup(func() { waitCrivkServing(t) })
	withCrivkFlags(t, nil, nil, fmt.Sprintf("--read-only-port=%d", port))
	waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	ns := newNamespace(t)
	pod := createPod(t, ns, busyboxPod("sleeper", v1.RestartPolicyAlways, "sleep 3600"))
	waitPod(t, ns, pod.Name, 60*time.Second, "running", isRunningReady)

	base := fmt.Sprintf("http://%s:%d", nodeIP, port)
	get := func(c *http.Client, url string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(testContext(t, 30*time.Second), http.MethodGet, url, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	plain := &http.Client{}

	code, body := get(plain, base+"/pods")
	var list v1.PodList
	if code != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil {
		t.Fatalf("GET /pods without credentials: %d %.200q", code, body)
	}
	found := false
	for _, p := range list.Items {
		found = found || (p.Namespace == ns && p.Name == pod.Name)
	}
	if list.Kind != "PodList" || !found {
		t.Errorf("/pods: kind %q, %d pods, %s/%s among them %v", list.Kind, len(list.Items), ns, pod.Name, found)
	}
	for _, tc := range []struct {
		path     string
		wantCode int
		contains string
	}{
		{"/healthz", http.StatusOK, "ok"},
		{"/stats/summary", http.StatusOK, `"nodeName":"` + nodeName + `"`},
		{"/metrics", http.StatusOK, "# TYPE"},
		{"/metrics/resource", http.StatusOK, "container_cpu_usage_seconds_total"},
		{"/containerLogs/" + ns + "/" + pod.Name + "/c", http.StatusMethodNotAllowed, "Debug endpoints are disabled."},
		{"/runningpods/", http.StatusMethodNotAllowed, "Debug endpoints are disabled."},
		{"/configz", http.StatusNotFound, ""},
	} {
		code, body := get(plain, base+tc.path)
		if code != tc.wantCode || !strings.Contains(body, tc.contains) {
			t.Errorf("GET %s on the read-only port: %d %.300q, want %d containing %q", tc.path, code, body, tc.wantCode, tc.contains)
		}
	}
	// The node API's own port still authenticates.
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if code, body := get(insecure, fmt.Sprintf("https://%s:10250/pods", nodeIP)); code != http.StatusUnauthorized {
		t.Errorf("GET /pods on 10250 without credentials: %d %.200q, want 401", code, body)
	}
}

// TestStaticPodUpdateKeepsMirrorDuringGrace: the manifest of a running
// static pod changes; the old static pod uses its grace period (its TERM
// trap takes 12 s), and during it the mirror pod stays the old one,
// Running with its UID, and no second pod of the name has a sandbox (the
// new one waits for the name, as the kubelet's pod workers make it wait);
// then the mirror pod is replaced by the new version's, Running. The node
// e2e suite's MirrorPodWithGracePeriod "mirror pod termination should
// satisfy grace period when static pod is updated" checks the same for
// 19 s of a 20 s grace.
func TestStaticPodUpdateKeepsMirrorDuringGrace(t *testing.T) {
	ns, name, mirror, write := runningStaticPod(t)
	oldHash := mirror.Annotations["kubernetes.io/config.hash"]

	write("v2")
	changed := time.Now()
	// For 8 s of the old pod's 12 s termination: the same mirror pod,
	// Running, and at most one pod of the name with a ready sandbox.
	sandboxUIDs := func(ctx context.Context) map[types.UID]bool {
		sbs, err := runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{cri.LabelPodName: name, cri.LabelPodNamespace: ns},
			State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
		if err != nil && ctx.Err() != nil {
			return nil
		}
		if err != nil {
			t.Fatalf("listing sandboxes: %v", err)
		}
		uids := map[types.UID]bool{}
		for _, sb := range sbs {
			uids[types.UID(sb.GetMetadata().GetUid())] = true
		}
		return uids
	}
	checks := 0
	err := wait.PollUntilContextTimeout(context.Background(), poll, 8*time.Second, true, func(ctx context.Context) (bool, error) {
		checks++
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if dl, _ := ctx.Deadline(); ctx.Err() != nil || (err != nil && time.Until(dl) < time.Second) {
			// The 8 s ended during the request, or were about to: client-go's
			// rate limiter refuses a wait that would pass the deadline
			// before the deadline ("would exceed context deadline").
			return false, nil
		}
		if err != nil || p.UID != mirror.UID || p.Status.Phase != v1.PodRunning {
			return false, fmt.Errorf("%s after the manifest changed (check %d): mirror %s (err %v), want the old one (uid %s) Running for the old pod's grace period",
				time.Since(changed).Round(100*time.Millisecond), checks, podSummary(p), err, mirror.UID)
		}
		if uids := sandboxUIDs(ctx); ctx.Err() == nil && len(uids) > 1 {
			return false, fmt.Errorf("two pods of the name %s/%s have ready sandboxes at once: %v", ns, name, uids)
		}
		return false, nil // held until the 8 s are over
	})
	if !wait.Interrupted(err) {
		t.Fatal(err)
	}
	t.Logf("the old mirror pod held for %d checks over 8 s", checks)
	again := waitPod(t, ns, name, 90*time.Second, "the new version's mirror pod, Running", func(p *v1.Pod) bool {
		return p.UID != mirror.UID && p.Annotations["kubernetes.io/config.mirror"] != oldHash && isRunningReady(p)
	})
	t.Logf("mirror pod replaced %s after the manifest changed", time.Since(changed).Round(time.Second))
	if sb, cs := runtimeObjects(t, types.UID(oldHash)); sb != 0 || cs != 0 {
		t.Errorf("the old static pod (uid %s) still has %d sandboxes and %d containers after its mirror was replaced", oldHash, sb, cs)
	}
	if again.Annotations["kubernetes.io/config.mirror"] != again.Annotations["kubernetes.io/config.hash"] {
		t.Errorf("new mirror annotations %v", again.Annotations)
	}
}

// staticManifest returns how to write (and write again) the manifest of
// the static pod "graceful" in ns: a busybox whose TERM trap takes 12 s of
// its 20 s grace period, printing version. The file goes at the test's end.
func staticManifest(t *testing.T, ns string) (write func(version string)) {
	t.Helper()
	manifests := os.Getenv("CRIVK_POD_MANIFEST_PATH")
	if manifests == "" {
		manifests = filepath.Join(mustEnv("LOCAL_DIR"), "manifests")
	}
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(manifests, ns+".json")
	t.Cleanup(func() {
		if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("clean-up: %v", err)
		}
	})
	return func(version string) {
		t.Helper()
		if version == "" {
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
			return
		}
		pod := busyboxPod("graceful", v1.RestartPolicyAlways, "trap 'echo TERM; sleep 12; exit 0' TERM; echo "+version+"; while true; do sleep 1; done")
		pod.APIVersion, pod.Kind = "v1", "Pod"
		pod.Namespace = ns
		pod.Spec.NodeSelector = nil
		grace := int64(20)
		pod.Spec.TerminationGracePeriodSeconds = &grace
		data, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(manifests, "."+ns+".json.tmp")
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
}

// runningStaticPod writes the manifest of staticManifest's pod (v1) in a
// namespace of its own and waits for its mirror pod, Running and Ready.
func runningStaticPod(t *testing.T) (ns, name string, mirror *v1.Pod, write func(version string)) {
	t.Helper()
	waitNodeReady(t, v1.ConditionTrue, 90*time.Second)
	ns = newNamespace(t)
	write = staticManifest(t, ns)
	write("v1")
	name = "graceful-" + strings.ToLower(nodeName)
	mirror = waitPod(t, ns, name, 90*time.Second, "the mirror pod Running and Ready", isRunningReady)
	return ns, name, mirror, write
}

// TestStaticPodRemovedWhileDownKeepsMirrorUntilStopped: crivk is killed
// (kill -9) with a static pod running, its manifest removed while crivk
// is down, and crivk started again. Nothing in the new process knows the
// old pod terminates; its containers are an orphan that the sweep stops
// (the TERM trap takes 12 s). The mirror pod must not go before them: at
// no sample is the mirror gone while a container of the old pod runs or
// its sandbox is ready, and it does go once they stopped.
func TestStaticPodRemovedWhileDownKeepsMirrorUntilStopped(t *testing.T) {
	ns, name, mirror, write := runningStaticPod(t)
	uid := types.UID(mirror.Annotations["kubernetes.io/config.hash"])

	killCrivkFor(t)
	write("") // the manifest removed while crivk is down
	if err := startCrivkFor(t); err != nil {
		t.Fatalf("starting crivk again: %v", err)
	}
	started := time.Now()
	running := func(ctx context.Context) (int, error) {
		sel := map[string]string{cri.LabelPodUID: string(uid)}
		sbs, err := runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel,
			State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
		if err != nil {
			return 0, err
		}
		cs, err := runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel,
			State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
		if err != nil {
			return 0, err
		}
		return len(sbs) + len(cs), nil
	}
	var heldWhileRunning int
	err := wait.PollUntilContextTimeout(context.Background(), poll, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		// The runtime first, then the API: a mirror seen gone after
		// the runtime showed the pod running was deleted too early,
		// or the containers stopped in between (the next sample says).
		n, err := running(ctx)
		if err != nil {
			t.Logf("listing the runtime: %v", err)
			return false, nil
		}
		_, err = client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err != nil && !apierrors.IsNotFound(err):
			t.Logf("reading the mirror pod: %v", err)
			return false, nil
		case err == nil && n > 0:
			heldWhileRunning++
			return false, nil
		case err == nil:
			return false, nil
		}
		// The mirror is gone: the old pod's containers must be too.
		if n, err := running(ctx); err == nil && n > 0 {
			return false, fmt.Errorf("%s after crivk's start the mirror pod is gone while the runtime still runs %d sandboxes and containers of its static pod (uid %s)",
				time.Since(started).Round(100*time.Millisecond), n, uid)
		}
		return true, nil
	})
	if err != nil {
		sb, cs := runtimeObjects(t, uid)
		t.Fatalf("%v (runtime now: %d sandboxes, %d containers of uid %s)", err, sb, cs, uid)
	}
	t.Logf("the mirror pod was kept for %d samples while the old pod's containers ran, and deleted %s after crivk's start, once they stopped",
		heldWhileRunning, time.Since(started).Round(100*time.Millisecond))
	if heldWhileRunning == 0 {
		t.Errorf("the old pod's containers were never seen running after the restart: the test did not exercise the window (its TERM trap takes 12 s)")
	}
}

func podSummary(p *v1.Pod) string {
	if p == nil {
		return "<none>"
	}
	return fmt.Sprintf("uid %s phase %s deleting %v", p.UID, p.Status.Phase, p.DeletionTimestamp != nil)
}
