package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
