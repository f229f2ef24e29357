package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"
)

// boundPod is busyboxPod bound to this node by nodeName (no scheduler, as
// a kubelet gets a static or directly bound pod), stopping at once on
// SIGTERM.
func boundPod(name, memRequest string) *v1.Pod {
	p := busyboxPod(name, v1.RestartPolicyAlways, "trap 'exit 0' TERM; sleep 3600 & wait")
	p.Spec.NodeSelector = nil
	p.Spec.NodeName = nodeName
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
	if memRequest != "" {
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse(memRequest)}
	}
	return p
}

// freeMemory is the node's allocatable memory minus the requests of the
// pods on it that have not finished, as admission counts them
// (component-helpers' PodRequests, overhead included).
func freeMemory(t *testing.T) int64 {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	n, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alloc := n.Status.Allocatable[v1.ResourceMemory]
	free := alloc.Value()
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeName})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		q := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})[v1.ResourceMemory]
		free -= q.Value()
	}
	return free
}

// TestPreemptionCriticalPod: the node's memory is taken by a low-priority
// pod; a system-node-critical pod bound to the node that does not fit is
// admitted after the kubelet's choice of victim is evicted: the filler
// (burstable, the one pod whose request frees enough), not the best-effort
// bystander, with the kubelet's status and Warning Preempting event; then
// the critical pod runs, and kubelet_preemptions{preemption_signal=memory}
// counts one more.
func TestPreemptionCriticalPod(t *testing.T) {
	ns := newNamespace(t)
	before := preemptionsMetric(t, "memory")
	bystander := createPod(t, ns, boundPod("bystander", ""))
	waitPod(t, ns, bystander.Name, 2*time.Minute, "Running", isRunningReady)

	// The filler leaves 10Mi; the critical pod asks for half of what was
	// free, more than any other pod on the node requests, so that the
	// filler is the one pod whose eviction is enough (the other candidates
	// would free less: the kubelet takes the pod nearest to the need).
	free := freeMemory(t)
	if free < 1<<30 {
		t.Fatalf("the node has only %d bytes of memory free for requests", free)
	}
	criticalRequest := free / 2
	filler := boundPod("filler", strconv.FormatInt(free-10<<20, 10))
	filler = createPod(t, ns, filler)
	waitPod(t, ns, filler.Name, 2*time.Minute, "Running", isRunningReady)

	crit := boundPod("critical", strconv.FormatInt(criticalRequest, 10))
	crit.Spec.PriorityClassName = "system-node-critical"
	crit = createPod(t, ns, crit)
	if crit.Spec.Priority == nil || *crit.Spec.Priority < 2000000000 {
		t.Fatalf("the API server gave the critical pod priority %v", crit.Spec.Priority)
	}

	// The filler exits 0 on SIGTERM, as the pause victims of the node e2e
	// spec CriticalPod "should be able to create and delete a critical
	// pod": the kubelet then publishes it Succeeded, without the kill's
	// reason and message (Failed, Preempting, "Preempted in order to admit
	// critical pod" only when a container fails or is killed: its
	// SyncTerminatingPod and generateAPIPodStatus), with DisruptionTarget.
	victim := waitPod(t, ns, filler.Name, 90*time.Second, "the filler preempted", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
	})
	if victim.Status.Phase != v1.PodSucceeded || victim.Status.Reason != "" || victim.Status.Message != "" {
		t.Errorf("victim status %s %q %q, want Succeeded without reason and message", victim.Status.Phase, victim.Status.Reason, victim.Status.Message)
	}
	dt := disruptionTarget(victim)
	if dt == nil || dt.Status != v1.ConditionTrue || dt.Reason != "TerminationByKubelet" ||
		dt.Message != "Pod was preempted by Kubelet to accommodate a critical pod." {
		t.Errorf("victim DisruptionTarget %+v, want True TerminationByKubelet %q", dt, "Pod was preempted by Kubelet to accommodate a critical pod.")
	}
	for _, c := range victim.Status.ContainerStatuses {
		if c.State.Terminated == nil || c.State.Terminated.ExitCode != 0 {
			t.Errorf("victim container %s not terminated with exit code 0: %+v", c.Name, c.State)
		}
	}
	ev := waitEvent(t, ns, filler.Name, v1.EventTypeWarning, "Preempting", "Preempted in order to admit critical pod")
	if ev.Message != "Preempted in order to admit critical pod" {
		t.Errorf("Preempting event message %q", ev.Message)
	}
	waitPod(t, ns, crit.Name, 2*time.Minute, "the critical pod Running", isRunningReady)

	if p := waitPod(t, ns, bystander.Name, 10*time.Second, "the bystander", func(*v1.Pod) bool { return true }); !isRunningReady(p) {
		t.Errorf("the best-effort bystander was disturbed: %s %q", p.Status.Phase, p.Status.Reason)
	}
	if after := preemptionsMetric(t, "memory"); after != before+1 {
		t.Errorf("kubelet_preemptions{preemption_signal=memory} %v, want %v", after, before+1)
	}
}

// preemptionsMetric reads kubelet_preemptions{preemption_signal=signal}
// from the node's /metrics.
func preemptionsMetric(t *testing.T, signal string) float64 {
	t.Helper()
	raw, err := client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", nodeName, "proxy/metrics").DoRaw(testContext(t, 10*time.Second))
	if err != nil {
		t.Fatalf("reading /metrics: %v", err)
	}
	m := regexp.MustCompile(`(?m)^kubelet_preemptions\{preemption_signal="` + regexp.QuoteMeta(signal) + `"\} (\S+)$`).FindSubmatch(raw)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// TestLogRotationCompressed: with --container-log-max-size=1Ki and
// --container-log-max-files=3, a container writing 2 KiB a second has its
// log rotated every pass (10 s) as the kubelet's container log manager
// does: at most 3 files, the older rotated one gzipped (<rotated>.gz,
// holding the container's lines), the newest rotated one plain, no .tmp
// left; `kubectl logs` still reads the current file.
func TestLogRotationCompressed(t *testing.T) {
	withCrivkFlags(t, nil, nil, "--container-log-max-size=1Ki", "--container-log-max-files=3")
	waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	ns := newNamespace(t)
	line := strings.Repeat("x", 100)
	p := busyboxPod("chatty", v1.RestartPolicyAlways,
		"i=0; while true; do i=$((i+1)); echo \"line $i "+line+"\"; sleep 0.05; done")
	p = createPod(t, ns, p)
	p = waitPod(t, ns, p.Name, 2*time.Minute, "Running", isRunningReady)
	dir := filepath.Join(mustEnv("LOCAL_DIR"), "pods", ns+"_"+p.Name+"_"+string(p.UID), "c")
	var files []string
	err := wait.PollUntilContextTimeout(testContext(t, 2*time.Minute), poll, 90*time.Second, true, func(context.Context) (bool, error) {
		files, _ = filepath.Glob(filepath.Join(dir, "0.log.*"))
		for _, f := range files {
			if strings.HasSuffix(f, ".gz") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no compressed rotated log in %s after 90 s; files %v", dir, files)
	}
	sort.Strings(files)
	all, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(all) > 3 {
		t.Errorf("%d log files, want at most 3 (--container-log-max-files): %v", len(all), all)
	}
	var gz, plain []string
	for _, f := range files {
		switch {
		case strings.HasSuffix(f, ".tmp"):
			t.Errorf("a temporary file is left: %s", f)
		case strings.HasSuffix(f, ".gz"):
			gz = append(gz, f)
		default:
			plain = append(plain, f)
		}
	}
	if len(plain) > 1 {
		t.Errorf("rotated files not compressed but the newest: %v", plain)
	}
	if len(plain) == 1 && len(gz) > 0 && plain[0] < gz[len(gz)-1] {
		t.Errorf("the plain rotated file %s is older than the compressed %s", plain[0], gz[len(gz)-1])
	}
	b, err := os.ReadFile(gz[0])
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s is not gzip: %v", gz[0], err)
	}
	text, err := io.ReadAll(zr)
	if err != nil || !strings.Contains(string(text), " stdout F line ") || !strings.Contains(string(text), line) {
		t.Errorf("%s holds %d bytes (%v), want the container's CRI log lines", gz[0], len(text), err)
	}
	// The current file is read (as the kubelet's ReadLogs does): right after
	// a rotation it may hold nothing yet; the container writes every 50 ms.
	var logs []byte
	err = wait.PollUntilContextTimeout(testContext(t, 30*time.Second), poll, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		logs, err = client.CoreV1().Pods(ns).GetLogs(p.Name, &v1.PodLogOptions{}).DoRaw(ctx)
		return err == nil && strings.Contains(string(logs), "line "), nil
	})
	if err != nil {
		t.Errorf("kubectl logs after the rotations: %d bytes within 15 s (%v)", len(logs), err)
	}
}
