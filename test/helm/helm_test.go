// Package helm is the end-to-end test of crivk's chart beside a real
// kubelet: hack/helm-e2e.sh removes what an earlier run left, makes the
// release (hack/release.sh: the packaged chart and the image tarball), brings
// up the local control plane and the kubelet v1.37.2 as node NODE_NAME on
// the cluster's containerd, imports the image there, then runs it with
// CRIVK_HELM_E2E=1, CRIVK_HELM_CHART (the packaged chart, or charts/crivk
// where the release script does not exist yet) and CRIVK_IMAGE (the
// imported image).
//
// The tests, in order: TestHelmBesideKubelet (install with identity
// bootstrap, /configz showing the chart's configuration file, a 3-minute soak without a restart of crivk's containers and
// with the node's Lease never older than 40 s, upgrade, kill -9 of the
// runtime, uninstall and adoption), TestHelmIdentityRBAC (identity rbac),
// TestHelmReinstallOtherNodeName (a left-over root dir of another node
// name), TestHelmRootDirOfAnotherCluster (a root dir holding another
// cluster's certificate). Each starts by removing what an earlier test or
// run left in the cluster (cleanStart, which logs what it removed), and a
// failed one leaves its evidence in _output/test-logs/helm/<test>/
// (evidence_test.go).
package helm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/test/evidence"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
	watchtools "k8s.io/client-go/tools/watch"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	namespace = "crivk-system"
	release   = "crivk"
	poll      = 500 * time.Millisecond
	// soakWindow is how long a pod must keep its containers after crivk
	// was replaced (keeps).
	soakWindow = 5 * time.Second
	// profilingPort is the chart's profiling.port default, on the host's
	// loopback (the chart's profiling.address).
	profilingPort = "10261"
	// crivkRootDir is the chart's rootDir default, which the test keeps:
	// hack/helm-e2e.sh makes it a shared mount (its Bidirectional mount
	// propagation needs one) after removing an earlier run's.
	crivkRootDir = "/var/lib/crivk"
	// soakTime and maxLeaseAge: the install must run this long without a
	// restart of crivk's containers, its node's Lease never older (issue
	// #32; the node lease duration is 40 s).
	soakTime    = 3 * time.Minute
	maxLeaseAge = 40 * time.Second
)

type env struct {
	cfg                  *rest.Config
	client               kubernetes.Interface
	kubelet, crivk       cri.RuntimeService
	connectCrivk         func()
	machine, crivkNode   string
	helm, chart, version string
	// image is the crivk image imported into the kubelet's containerd,
	// imageRepo its repository; packaged: chart is a packaged chart (a
	// release's), whose default image must be image.
	image, imageRepo string
	packaged         bool
	values           []string
	busybox          string
	// runtimeDir is the chart's runtime.configDir (the containerd's
	// config, pid file and log); runtimeSock its socket.
	runtimeDir, runtimeSock string
	root                    string
	// testNS is the namespace of the test's own pods.
	testNS string

	// Evidence (evidence_test.go): ev writes this test's; collected is
	// set once it has been collected. The kubelet's pod log dir and log
	// file are copied from.
	ev                           *evidence.Collector
	collected                    bool
	kubeletPodLogDir, kubeletLog string
	// earlierPodLogs are the kubelet's pod log dirs of the release that
	// existed when the test started (an earlier test's pods).
	earlierPodLogs map[string]bool
}

func need(t *testing.T, k string) string {
	t.Helper()
	v := os.Getenv(k)
	if v == "" {
		t.Fatalf("%s is not set (run hack/helm-e2e.sh)", k)
	}
	return v
}

func setup(t *testing.T) *env {
	if os.Getenv("CRIVK_HELM_E2E") != "1" {
		t.Skip("run through hack/helm-e2e.sh (make test-helm), which brings up a kubelet node and crivk's runtime")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", need(t, "KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	root, _ := filepath.Abs("../..")
	e := &env{
		cfg:              cfg,
		client:           kubernetes.NewForConfigOrDie(cfg),
		machine:          need(t, "NODE_NAME"),
		helm:             filepath.Join(root, "_output/bin/helm"),
		chart:            need(t, "CRIVK_HELM_CHART"),
		image:            need(t, "CRIVK_IMAGE"),
		version:          need(t, "VERSION"),
		busybox:          need(t, "BUSYBOX_IMAGE"),
		testNS:           "helm-e2e",
		kubeletPodLogDir: os.Getenv("KUBELET_POD_LOG_DIR"),
		kubeletLog:       os.Getenv("HELM_KUBELET_LOG"),
	}
	e.packaged = strings.HasSuffix(e.chart, ".tgz")
	e.imageRepo, _ = splitImage(e.image)
	e.crivkNode = "crivk-" + e.machine
	connect := func(endpoint string) cri.RuntimeService {
		// The pod log dir is not read here.
		rt, err := cri.Connect(context.Background(), cri.Config{Endpoint: endpoint, PodLogDir: os.TempDir()})
		if err != nil {
			t.Fatalf("CRI %s: %v", endpoint, err)
		}
		t.Cleanup(func() { rt.Close() })
		return rt.Services()
	}
	e.root = root
	e.kubelet = connect(need(t, "CRI_ENDPOINT"))
	e.runtimeDir = need(t, "CRIVK_RUNTIME_DIR")
	e.runtimeSock = need(t, "CRIVK_RUNTIME_SOCK")
	// crivk's containerd may be running before it serves its socket (its
	// process is back after a kill -9, and the node still Ready, before
	// the CRI plugin listens): the connection is retried for a minute.
	e.connectCrivk = func() {
		endpoint := "unix://" + e.runtimeSock
		var rt *cri.Runtime
		var last error
		err := wait.PollUntilContextTimeout(context.Background(), time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			rt, last = cri.Connect(ctx, cri.Config{Endpoint: endpoint, PodLogDir: os.TempDir()})
			return last == nil, nil
		})
		if err != nil {
			t.Fatalf("CRI %s: not serving within a minute: %v", endpoint, last)
		}
		t.Cleanup(func() { rt.Close() })
		e.crivk = rt.Services()
	}
	// crivk's runtime is the chart's (runtime.managed): apart from the
	// kubelet's containerd (local-up's) in every path, bridge and subnet,
	// the same binaries (its lane's: CONTAINERD_BIN, CNI_BIN_DIR; the
	// shim and runc beside that containerd); restrictOOMScoreAdj as this
	// machine needs (docs/environment.md).
	runDir := filepath.Dir(e.runtimeSock)
	e.values = []string{
		"--set", "runtime.configDir=" + e.runtimeDir, "--set", "runtime.root=" + e.runtimeDir + "/root",
		"--set", "runtime.state=" + runDir + "/state", "--set", "runtime.runcRoot=" + runDir + "/runc",
		"--set", "runtime.logFile=" + e.runtimeDir + "/containerd.log", "--set", "runtime.cniBinDir=" + need(t, "CNI_BIN_DIR"),
		"--set", "runtime.containerd=" + need(t, "CONTAINERD_BIN"),
		"--set", "runtime.cniBridge=crivk1", "--set", "runtime.podCIDR=10.89.0.0/16",
		"--set", "runtime.restrictOOMScoreAdj=true", "--set", "runtime.sandboxImage=" + need(t, "PAUSE_IMAGE"),
		"--set", "image.pullPolicy=Never",
		"--set", "apiServer=https://" + need(t, "NODE_IP") + ":6443",
		"--set", "criEndpoint=unix://" + e.runtimeSock,
		"--set", "nodeSelector.kubernetes\\.io/hostname=" + e.machine,
		"--set", "logLevel=debug",
		// This machine's cgroups are v1: the chart's default (the
		// kubelet's failCgroupV1 true) would stop crivk at start
		// (checkConfigz checks the file's false reached it).
		"--set", "failCgroupV1=false",
		"--set", "profiling.enabled=true", "--set", "profiling.port=" + profilingPort,
		// A field only the configuration file carries (checkConfigz).
		"--set", "config.maxPods=" + strconv.Itoa(installMaxPods),
		// The host's one disk is shared with the builds: image GC off and
		// absolute disk thresholds, as hack/run-crivk.sh and
		// hack/run-kubelet.sh run both agents.
		"--set", "config.imageGCHighThresholdPercent=100", "--set", "config.imageGCLowThresholdPercent=99",
		"--set", "config.evictionHard.memory\\.available=100Mi", "--set", "config.evictionHard.nodefs\\.available=2Gi",
		"--set", "config.evictionHard.nodefs\\.inodesFree=5%", "--set", "config.evictionHard.imagefs\\.available=2Gi",
	}
	if e.packaged {
		// A release's chart runs the release's image by default: nothing
		// to set, only to check.
		e.checkPackagedImage(t)
	} else {
		repo, tag := splitImage(e.image)
		e.values = append(e.values, "--set", "image.repository="+repo, "--set", "image.tag="+tag)
	}
	// HELM_E2E_SET: more values (helm --set syntax) over the test's, to
	// try a setting or force a failure (a wrong apiServer, say).
	if extra := os.Getenv("HELM_E2E_SET"); extra != "" {
		t.Logf("HELM_E2E_SET: --set %s", extra)
		e.values = append(e.values, "--set", extra)
	}
	e.startEvidence(t)
	return e
}

// install runs helm install of the chart with the test's values and extra.
func (e *env) install(t *testing.T, extra ...string) {
	t.Helper()
	e.run(t, append(append([]string{"install", release, e.chart, "--namespace", namespace, "--create-namespace"}, e.values...), extra...)...)
}

// uninstall runs helm uninstall with args after release and namespace;
// the evidence of a failure is collected first (the uninstall deletes
// crivk's pods, and the kubelet their log files).
func (e *env) uninstall(t *testing.T, args ...string) {
	t.Helper()
	if t.Failed() {
		e.collect(t, "the test had failed before this helm uninstall "+strings.Join(args, " "))
	}
	e.run(t, append([]string{"uninstall", release, "--namespace", namespace}, args...)...)
}

func (e *env) run(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(e.helm, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitNodeReady waits for crivk's node to be Ready; it fails early when
// crivk's pod crash-loops (crashLoop), with the reason.
func (e *env) waitNodeReady(t *testing.T, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var last, crash string
	err := wait.PollUntilContextTimeout(context.Background(), poll, timeout, true, func(ctx context.Context) (bool, error) {
		if crash = e.crashLoop(ctx); crash != "" {
			return false, errors.New(crash)
		}
		n, err := e.client.CoreV1().Nodes().Get(ctx, e.crivkNode, metav1.GetOptions{})
		if err != nil {
			if ctx.Err() == nil { // not the poll's own deadline
				last = err.Error()
			}
			return false, nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				last = string(c.Status) + " " + c.Message
				return c.Status == v1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if crash != "" {
		t.Fatalf("node %s not Ready after %s (last: %s): %s", e.crivkNode, time.Since(start).Round(time.Second), last, crash)
	}
	if err != nil {
		t.Fatalf("node %s never Ready within %s (last: %s)", e.crivkNode, timeout, last)
	}
	return time.Since(start)
}

// crashLoopRestarts is how many restarts of one of crivk's containers
// make waitNodeReady give up.
const crashLoopRestarts = 3

// crashLoop describes the first container of crivk's pod that restarted
// crashLoopRestarts times or more, with its last exit and the last lines of
// its previous instance; "" when none.
func (e *env) crashLoop(ctx context.Context) string {
	pods, err := e.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=crivk"})
	if err != nil {
		return ""
	}
	for _, p := range pods.Items {
		for _, s := range p.Status.ContainerStatuses {
			if s.RestartCount < crashLoopRestarts {
				continue
			}
			return fmt.Sprintf("container %s of crivk's pod %s restarted %d times (%s); the last lines of its previous instance:\n%s",
				s.Name, p.Name, s.RestartCount, lastExit(s), e.logTail(ctx, &p, s.Name, true, 15))
		}
	}
	return ""
}

// lastExit describes a container's last termination.
func lastExit(s v1.ContainerStatus) string {
	term := s.LastTerminationState.Terminated
	if term == nil {
		return "no last termination recorded"
	}
	msg := fmt.Sprintf("last exit code %d, reason %s, at %s", term.ExitCode, term.Reason, term.FinishedAt.UTC().Format(time.RFC3339))
	if term.Message != "" {
		msg += ", message " + strconv.Quote(strings.TrimSpace(term.Message))
	}
	return msg
}

// logTail is the last lines of a container's log (previous: of its
// previous instance), indented, or why there is none: from the kubelet's
// log file of that instance when it is still on disk (the API answers
// "unable to retrieve container logs" once the kubelet has removed a dead
// container), else through the API.
func (e *env) logTail(ctx context.Context, p *v1.Pod, container string, previous bool, lines int64) string {
	if text, ok := e.kubeletLogFile(p, container, previous); ok {
		l := strings.Split(strings.TrimRight(text, "\n"), "\n")
		if int64(len(l)) > lines {
			l = l[int64(len(l))-lines:]
		}
		return "    " + strings.Join(l, "\n    ")
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, err := e.client.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &v1.PodLogOptions{Container: container, Previous: previous, TailLines: &lines}).DoRaw(rctx)
	if err != nil {
		return "    (no log: " + err.Error() + ")"
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(string(b), "\n"), "\n", "\n    ")
}

// kubeletLogFile reads the kubelet's log file of a container instance
// (<podLogsDir>/<ns>_<pod>_<uid>/<container>/<restartCount>.log; the
// previous instance's is the one before), keeping each CRI log line's
// message.
func (e *env) kubeletLogFile(p *v1.Pod, container string, previous bool) (string, bool) {
	if e.kubeletPodLogDir == "" {
		return "", false
	}
	n := int32(-1)
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container {
			n = s.RestartCount
		}
	}
	if previous {
		n--
	}
	if n < 0 {
		return "", false
	}
	b, err := os.ReadFile(filepath.Join(e.kubeletPodLogDir, fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID), container, fmt.Sprintf("%d.log", n)))
	if err != nil {
		return "", false
	}
	var out []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		// "<time> <stream> <P|F> <message>"
		if f := strings.SplitN(l, " ", 4); len(f) == 4 {
			l = f[3]
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n"), true
}

func (e *env) waitPod(t *testing.T, ns, name string, timeout time.Duration, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	var p *v1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), poll, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		if p, err = e.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, nil
		}
		return cond(p), nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s: condition not met within %s; last %+v", ns, name, timeout, p)
	}
	return p
}

func running(p *v1.Pod) bool {
	if p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, s := range p.Status.ContainerStatuses {
		if !s.Ready {
			return false
		}
	}
	return true
}

func (e *env) pod(name, node string, crivkNode bool) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{
			NodeSelector:                 map[string]string{"kubernetes.io/hostname": node},
			AutomountServiceAccountToken: new(bool),
			TerminationGracePeriodSeconds: func() *int64 {
				g := int64(2)
				return &g
			}(),
			Containers: []v1.Container{{
				Name: "c", Image: e.busybox, ImagePullPolicy: v1.PullIfNotPresent,
				Command: []string{"sh", "-c", "echo hello from " + name + "; sleep 3600"},
			}},
		},
	}
	if crivkNode {
		p.Spec.Tolerations = []v1.Toleration{{Key: "node.crivk.io/agent", Operator: v1.TolerationOpEqual, Value: "crivk", Effect: v1.TaintEffectNoSchedule}}
	}
	return p
}

// exec runs a command in a pod through the API server (kubectl exec),
// returning its stdout.
func (e *env) exec(t *testing.T, ns, pod string, cmd ...string) (string, error) {
	t.Helper()
	req := e.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&v1.PodExecOptions{Container: "c", Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(e.cfg, "POST", req.URL())
	if err != nil {
		return "", err
	}
	var out, errOut bytes.Buffer
	err = ex.StreamWithContext(ctxT(t, 30*time.Second), remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
	if err != nil {
		return out.String(), fmt.Errorf("%w (stderr %q)", err, errOut.String())
	}
	return out.String(), nil
}

// sandboxes returns the pod UIDs of the sandboxes a runtime holds.
func sandboxes(t *testing.T, rs cri.RuntimeService) map[string]bool {
	t.Helper()
	list, err := rs.ListPodSandbox(ctxT(t, 10*time.Second), &runtimeapi.PodSandboxFilter{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, s := range list {
		out[s.GetMetadata().GetUid()] = true
	}
	return out
}

func containerIDs(p *v1.Pod) string {
	var ids []string
	for _, s := range p.Status.ContainerStatuses {
		ids = append(ids, fmt.Sprintf("%s@%d", s.ContainerID, s.RestartCount))
	}
	return strings.Join(ids, ",")
}

// checkMetricsAndProfiling: the node API serves crivk's metrics through
// the API server's node proxy (the port the Node advertises), and
// profiling.enabled serves pprof on the host's loopback (crivk's pod has
// the host's network, as this test).
func (e *env) checkMetricsAndProfiling(t *testing.T, ctx context.Context) {
	t.Helper()
	raw, err := e.client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", e.crivkNode, "proxy", "metrics").DoRaw(ctx)
	if err != nil || !strings.Contains(string(raw), "crivk_build_info") {
		t.Errorf("GET /api/v1/nodes/%s/proxy/metrics: %v, %d bytes without crivk_build_info", e.crivkNode, err, len(raw))
	}
	req, err := http.NewRequestWithContext(ctxT(t, 10*time.Second), "GET", "http://127.0.0.1:"+profilingPort+"/debug/pprof/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("profiling.enabled: GET %s: %v", req.URL, err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine") {
		t.Errorf("profiling.enabled: GET %s: %s, %d bytes without the goroutine profile", req.URL, resp.Status, len(body))
	}
}

// cleanStart removes what an earlier test or run left in the cluster
// (local-down keeps etcd's data) and says what it removed: the release
// (without its hooks: a drain needs a running crivk), the pods of the
// release's namespace, crivk's nodes (the chart's agent label, or this
// test's node name), the test's pods, and waits for a terminating test
// namespace to go. hack/helm-e2e.sh removed the host's left-overs (root
// dir, runtime, bridge) before the cluster came up.
func (e *env) cleanStart(t *testing.T, ctx context.Context) {
	t.Helper()
	ns := e.testNS
	if out, err := exec.CommandContext(ctx, e.helm, "status", release, "--namespace", namespace).CombinedOutput(); err == nil {
		status := "status unknown"
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "STATUS:") {
				status = strings.TrimSpace(l)
			}
		}
		if out, err := exec.CommandContext(ctx, e.helm, "uninstall", release, "--namespace", namespace, "--no-hooks", "--wait").CombinedOutput(); err != nil {
			t.Fatalf("removing the left-over release %s/%s: %v\n%s", namespace, release, err, out)
		}
		e.removed(t, "the release %s/%s (%s), without its hooks", namespace, release, status)
	}
	// The pods of an uninstalled release go once the kubelet has stopped
	// them (grace period 30 s).
	if l, err := e.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{}); err == nil && len(l.Items) > 0 {
		var names []string
		for _, p := range l.Items {
			names = append(names, p.Name)
		}
		zero := int64(0)
		_ = e.client.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		err := wait.PollUntilContextTimeout(ctx, poll, 90*time.Second, true, func(ctx context.Context) (bool, error) {
			l, err := e.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
			return err == nil && len(l.Items) == 0, nil
		})
		if err != nil {
			t.Fatalf("pods of an earlier release %v still in %s after 90 s", names, namespace)
		}
		e.removed(t, "the pods %v of namespace %s", names, namespace)
	}
	nodes := map[string]bool{}
	if l, err := e.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "node.kubernetes.io/agent=crivk"}); err == nil {
		for _, n := range l.Items {
			nodes[n.Name] = true
		}
	}
	if _, err := e.client.CoreV1().Nodes().Get(ctx, e.crivkNode, metav1.GetOptions{}); err == nil {
		nodes[e.crivkNode] = true
	}
	for n := range nodes {
		if err := e.client.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{}); err == nil {
			e.removed(t, "the node %s", n)
		}
	}
	if l, err := e.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil && len(l.Items) > 0 {
		zero := int64(0)
		_ = e.client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		err := wait.PollUntilContextTimeout(ctx, poll, time.Minute, true, func(ctx context.Context) (bool, error) {
			l, err := e.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(l.Items) == 0, nil
		})
		if err != nil {
			t.Fatalf("pods of an earlier run still in %s after a minute", ns)
		}
		e.removed(t, "%d pod(s) of namespace %s", len(l.Items), ns)
	}
	// The namespace of an earlier run may still be terminating.
	err := wait.PollUntilContextTimeout(ctx, poll, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := e.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && n.DeletionTimestamp == nil), nil
	})
	if err != nil {
		t.Fatalf("namespace %s of an earlier run still terminating after 2 minutes", ns)
	}
	if _, err := e.client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// removed logs (and notes in the evidence) what cleanStart removed.
func (e *env) removed(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	t.Logf("clean start: removed %s, left by an earlier test or run", msg)
	e.ev.Note("clean start: removed %s", msg)
}

// keeps checks, every poll for soakWindow after the pod runs again, that
// the pod runs with the container IDs and restart counts want: the window
// is what the check is about (a restart shows up within it: crivk resyncs
// an adopted pod 1 s after adoption), and the first difference fails.
func (e *env) keeps(t *testing.T, ns, name, want, what string) {
	t.Helper()
	e.waitPod(t, ns, name, time.Minute, running)
	err := wait.PollUntilContextTimeout(context.Background(), poll, soakWindow, true, func(context.Context) (bool, error) {
		// Not the window's context: a read started just before the window
		// ends would fail on its deadline (the client's rate limiter
		// refuses to wait past it) and read as a failure of the pod.
		gctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p, err := e.client.CoreV1().Pods(ns).Get(gctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if got := containerIDs(p); got != want || !running(p) {
			return false, fmt.Errorf("%s (running %v), was %s", got, running(p), want)
		}
		return false, nil // the window must run out
	})
	if !wait.Interrupted(err) {
		t.Errorf("pod %s/%s %s: %v", ns, name, what, err)
	}
}

// runtimePID is the pid of the chart's containerd (its pid file), 0 when
// no such process runs.
func (e *env) runtimePID(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.runtimeDir, "containerd.pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file: %v", err)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(cmdline), filepath.Join(e.runtimeDir, "config.toml")) {
		return 0
	}
	return pid
}

// waitRuntime waits for the chart's containerd to answer, connects to it
// and imports the test images (no registry here; hack/images.sh).
func (e *env) waitRuntime(t *testing.T) int {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), poll, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return e.runtimePID(t) != 0, nil
	})
	if err != nil {
		t.Fatalf("the chart's runtime never started (pid file %s/containerd.pid)", e.runtimeDir)
	}
	e.connectCrivk()
	out, err := exec.Command(filepath.Join(e.root, "hack/images.sh"), e.runtimeSock).CombinedOutput()
	if err != nil {
		t.Fatalf("importing the test images into crivk's runtime: %v\n%s", err, out)
	}
	return e.runtimePID(t)
}

// checkRuntimeCgroup: the chart's containerd lives in <cgroupRoot>/runtime
// in every hierarchy, not in the DaemonSet pod's cgroup (which the kubelet
// would kill with the pod).
func checkRuntimeCgroup(t *testing.T, pid int) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || parts[1] == "" || strings.HasPrefix(parts[1], "name=") {
			continue
		}
		if parts[2] != "/crivk/runtime" {
			t.Errorf("crivk's containerd (pid %d) is in cgroup %s, want /crivk/runtime", pid, line)
		}
	}
}

// watchDeletion records the pod's states until its object is deleted and
// reports whether every container had terminated in the last state before
// the deletion (a pod object must not go before its containers stopped).
func (e *env) watchDeletion(t *testing.T, ctx context.Context, ns, name string) <-chan string {
	t.Helper()
	p0, err := e.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A retrying watch: a watch the API server closes resumes from the last
	// resource version, so no state is missed.
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.FieldSelector = "metadata.name=" + name
		return e.client.CoreV1().Pods(ns).Watch(ctx, o)
	}}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, p0.ResourceVersion, lw)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() {
		defer w.Stop()
		last := p0
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*v1.Pod)
			if !ok {
				t.Logf("watch of %s/%s: %s %v", ns, name, ev.Type, ev.Object)
				continue
			}
			if ev.Type == watch.Deleted {
				// The deleted object is the pod's last stored state.
				if len(p.Status.ContainerStatuses) == 0 {
					p = last
				}
				for _, c := range p.Status.ContainerStatuses {
					if c.State.Terminated == nil {
						done <- fmt.Sprintf("deleted while container %s was %+v", c.Name, c.State)
						return
					}
				}
				done <- ""
				return
			}
			last = p
		}
		done <- fmt.Sprintf("watch ended before the deletion (last state seen: %s)", last.Status.Phase)
	}()
	return done
}

// TestHelmBesideKubelet installs the chart on a cluster whose machine runs
// a kubelet: the DaemonSet pod starts crivk's own containerd on the host
// (runtime.managed) in <cgroupRoot>/runtime, the node crivk-<machine>
// registers Ready through TLS bootstrap (identity bootstrap) and serves its
// metrics through the node proxy and pprof on profiling.port, its /configz
// (through the node proxy) shows the chart's configuration file, config:'s
// maxPods included, and the node that many pods' capacity, a pod
// scheduled to it runs on crivk's runtime and serves its logs and exec; the
// kubelet's pod keeps running, unrestarted, and neither runtime ever holds
// a sandbox of the other's pods; for soakTime none of crivk's containers
// restarts and the node's Lease is never older than maxLeaseAge; `helm upgrade` to a new image tag and
// another config.maxPods keeps crivk's runtime and pod running (adopted, not
// restarted) and the new crivk runs with the new file; `helm uninstall` drains the node
// (the pod's containers stop before its object goes), deletes the node and
// stops crivk's runtime; with uninstall.drain=false it leaves the pod and
// node, and the next install adopts them.
func TestHelmBesideKubelet(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t, 15*time.Minute)
	ns := e.testNS
	e.cleanStart(t, ctx)
	// The kubelet's own pod, before crivk exists.
	if _, err := e.client.CoreV1().Pods(ns).Create(ctx, e.pod("on-kubelet", e.machine, false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeletPod := e.waitPod(t, ns, "on-kubelet", 2*time.Minute, running)
	before := containerIDs(kubeletPod)
	install := func(extra ...string) {
		t.Helper()
		e.install(t, extra...)
	}

	install()
	took := e.waitNodeReady(t, 3*time.Minute)
	t.Logf("helm install: node %s Ready %s later", e.crivkNode, took.Round(time.Millisecond))
	runtimePID := e.waitRuntime(t)
	checkRuntimeCgroup(t, runtimePID)
	n, err := e.client.CoreV1().Nodes().Get(ctx, e.crivkNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels["node.kubernetes.io/agent"] != "crivk" || n.Labels["crivk.io/release"] != release || len(n.Spec.Taints) == 0 {
		t.Errorf("node %s labels %v taints %v, want the chart's labels and taint", e.crivkNode, n.Labels, n.Spec.Taints)
	}
	e.checkMetricsAndProfiling(t, ctx)
	e.checkConfigz(t, ctx, installMaxPods)

	if _, err := e.client.CoreV1().Pods(ns).Create(ctx, e.pod("on-crivk", e.crivkNode, true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crivkPod := e.waitPod(t, ns, "on-crivk", 2*time.Minute, running)
	logs, err := e.client.CoreV1().Pods(ns).GetLogs("on-crivk", &v1.PodLogOptions{}).DoRaw(ctx)
	if err != nil || !strings.Contains(string(logs), "hello from on-crivk") {
		t.Errorf("logs of the pod on %s: %q, %v", e.crivkNode, logs, err)
	}
	if out, err := e.exec(t, ns, "on-crivk", "sh", "-c", "echo exec-ok; hostname"); err != nil || !strings.HasPrefix(out, "exec-ok\non-crivk") {
		t.Errorf("exec in the pod on %s: %q, %v", e.crivkNode, out, err)
	}
	inKubelet, inCrivk := sandboxes(t, e.kubelet), sandboxes(t, e.crivk)
	if inKubelet[string(crivkPod.UID)] || !inCrivk[string(crivkPod.UID)] {
		t.Errorf("crivk's pod: in the kubelet's runtime %v, in crivk's %v; want only crivk's", inKubelet[string(crivkPod.UID)], inCrivk[string(crivkPod.UID)])
	}
	if inCrivk[string(kubeletPod.UID)] || !inKubelet[string(kubeletPod.UID)] {
		t.Errorf("the kubelet's pod: in crivk's runtime %v, in the kubelet's %v; want only the kubelet's", inCrivk[string(kubeletPod.UID)], inKubelet[string(kubeletPod.UID)])
	}
	crivkBefore := containerIDs(crivkPod)

	// The soak (issue #32): the install as a user leaves it, with a pod
	// running on crivk's node.
	e.soak(t, soakTime)
	e.keeps(t, ns, "on-crivk", crivkBefore, "during the soak; want it untouched")

	// helm upgrade to another image tag and another configuration file:
	// the DaemonSet pod is replaced, crivk's runtime stays (its pod runs)
	// and crivk's pod is adopted, not restarted; the new crivk runs with
	// the new file.
	e.run(t, append(append([]string{"upgrade", release, e.chart, "--namespace", namespace}, e.values...), "--set", "image.repository="+e.imageRepo, "--set", "image.tag=e2e-upgrade",
		"--set", "config.maxPods="+strconv.Itoa(upgradeMaxPods))...)
	err = wait.PollUntilContextTimeout(ctx, poll, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := e.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=crivk"})
		if err != nil || len(pods.Items) != 1 {
			return false, nil
		}
		p := pods.Items[0]
		return strings.HasSuffix(p.Spec.Containers[0].Image, ":e2e-upgrade") && running(&p), nil
	})
	if err != nil {
		t.Fatal("the upgraded crivk never ran")
	}
	e.waitNodeReady(t, 2*time.Minute)
	// The new crivk syncs the adopted pod (its resync is 1 s after
	// adoption): nothing may change meanwhile.
	e.keeps(t, ns, "on-crivk", crivkBefore, "across helm upgrade; want it adopted, not restarted")
	if pid := e.runtimePID(t); pid != runtimePID {
		t.Errorf("crivk's containerd across helm upgrade: pid %d, then %d; want it kept", runtimePID, pid)
	}
	e.checkConfigz(t, ctx, upgradeMaxPods)

	// kill -9 of crivk's containerd: the runtime container notices, exits
	// and is restarted by the kubelet, starting containerd again, which
	// finds the shims; crivk's pod keeps its container.
	if err := syscall.Kill(runtimePID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = wait.PollUntilContextTimeout(ctx, poll, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pid := e.runtimePID(t)
		return pid != 0 && pid != runtimePID, nil
	})
	if err != nil {
		t.Fatalf("crivk's containerd was not started again within 2 minutes of its kill -9")
	}
	runtimePID = e.runtimePID(t)
	checkRuntimeCgroup(t, runtimePID)
	e.waitNodeReady(t, 2*time.Minute)
	t.Logf("kill -9 of crivk's containerd: running again (pid %d) and the node Ready %s later", runtimePID, time.Since(start).Round(time.Millisecond))
	e.connectCrivk()
	e.keeps(t, ns, "on-crivk", crivkBefore, "across a kill -9 of crivk's containerd; want it kept")

	// helm uninstall (uninstall.drain, the default): the pod is deleted
	// through crivk (its container stops before its object goes), then the
	// node goes and crivk's runtime stops, having no pod left.
	deleted := e.watchDeletion(t, ctx, ns, "on-crivk")
	start = time.Now()
	e.uninstall(t, "--wait", "--timeout", "5m")
	t.Logf("helm uninstall (drain): %s", time.Since(start).Round(time.Millisecond))
	select {
	case msg := <-deleted:
		if msg != "" {
			t.Errorf("crivk's pod during helm uninstall: %s", msg)
		}
	case <-time.After(10 * time.Second):
		t.Error("crivk's pod was not deleted by helm uninstall")
	}
	if _, err := e.client.CoreV1().Nodes().Get(ctx, e.crivkNode, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node %s after helm uninstall: %v, want it deleted", e.crivkNode, err)
	}
	// The Lease goes by its owner reference (garbage collection).
	err = wait.PollUntilContextTimeout(ctx, poll, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := e.client.CoordinationV1().Leases("kube-node-lease").Get(ctx, e.crivkNode, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("the Lease of node %s still exists 30 s after helm uninstall", e.crivkNode)
	}
	err = wait.PollUntilContextTimeout(ctx, poll, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return e.runtimePID(t) == 0, nil
	})
	if err != nil {
		t.Errorf("crivk's containerd (pid %d) still runs after helm uninstall with no pod left", e.runtimePID(t))
	}
	if _, err := os.Stat("/sys/class/net/crivk1"); err == nil {
		t.Error("the bridge crivk1 of crivk's pod network is still there after helm uninstall")
	}
	if jobs, err := e.client.BatchV1().Jobs(namespace).List(ctx, metav1.ListOptions{}); err != nil || len(jobs.Items) != 0 {
		t.Errorf("after helm uninstall: jobs %v (%v), want the hooks' jobs gone", jobs, err)
	}

	// uninstall.drain=false: helm uninstall leaves crivk's pods running and
	// their node; the next install adopts them.
	install("--set", "uninstall.drain=false")
	e.waitNodeReady(t, 3*time.Minute)
	runtimePID = e.waitRuntime(t)
	if _, err := e.client.CoreV1().Pods(ns).Create(ctx, e.pod("left", e.crivkNode, true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	left := e.waitPod(t, ns, "left", 2*time.Minute, running)
	leftBefore := containerIDs(left)
	e.uninstall(t, "--wait")
	st, err := e.crivk.ListContainers(ctxT(t, 10*time.Second), &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{cri.LabelPodUID: string(left.UID)},
	})
	if err != nil || len(st) != 1 {
		t.Errorf("after helm uninstall with uninstall.drain=false, the pod has %d running containers (%v), want 1 (left to be adopted)", len(st), err)
	}
	if pid := e.runtimePID(t); pid != runtimePID {
		t.Errorf("crivk's containerd after helm uninstall with a pod left: pid %d, want %d still running", pid, runtimePID)
	}
	install()
	e.waitNodeReady(t, 3*time.Minute)
	e.keeps(t, ns, "left", leftBefore, "across uninstall (uninstall.drain=false) and reinstall")

	if after := containerIDs(e.waitPod(t, ns, "on-kubelet", time.Minute, running)); after != before {
		t.Errorf("the kubelet's pod: %s before crivk, %s after; want it untouched", before, after)
	}
	inKubelet, inCrivk = sandboxes(t, e.kubelet), sandboxes(t, e.crivk)
	if inKubelet[string(left.UID)] || inKubelet[string(crivkPod.UID)] || inCrivk[string(kubeletPod.UID)] {
		t.Errorf("at the end: the kubelet's runtime holds crivk's pods %v/%v, crivk's the kubelet's %v; want neither",
			inKubelet[string(left.UID)], inKubelet[string(crivkPod.UID)], inCrivk[string(kubeletPod.UID)])
	}

	// Clean up: helm uninstall drains the pod left and removes the node.
	e.uninstall(t, "--wait", "--timeout", "5m")
	if _, err := e.client.CoreV1().Pods(ns).Get(ctx, "left", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod left after the last helm uninstall: %v, want it drained", err)
	}
	_ = e.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
}
