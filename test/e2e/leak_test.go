package e2e

// The suite's leak check. About 25 tests restart crivk, so a leak would
// never build up in one process: the check runs after each test that
// restarts crivk (restartsCrivk's cleanup) and at the suite's end
// (TestMain), once the namespaces are deleted and gone.
//
//   - The runtime and the host: no crivk-owned sandbox or container, pod
//     cgroup or volume mount of a pod the API no longer has (runtimeLeaks).
//     crivk removes them just after the object goes, as the kubelet; the
//     check waits up to leakSettle for that.
//   - The process: goroutines, open files and RSS against the baseline
//     taken when the process was clean (procBaseline, processLeaksSettled), checked
//     before every graceful stop of a process with a baseline and at the
//     suite's end.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// The process bounds, against the baseline of the same process (taken
// with no test pod on the node). A loaded 2-core machine must not make
// them flake; a leak per pod must still show within one suite.
const (
	// leakGoroutineSlack: what comes and goes with no pod: the API
	// server's keep-alive connections to the node API (a few goroutines
	// each, HTTP/2 or TLS), metrics-server's scrapes, timers of
	// back-offs and retries in flight. 50 is about twice the swing seen
	// between two idle samples; a leak of one goroutine per pod shows
	// after 50 pods, and the suite creates hundreds.
	leakGoroutineSlack = 50
	// leakGoroutinesPerPod: allowed per pod running now beyond those of
	// the baseline: its pod worker, a probe worker per probe, a status or
	// log stream in flight. Few pods run at a check; a leak is per pod
	// created, so it grows past this.
	leakGoroutinesPerPod = 10
	// leakFDSlack: keep-alive sockets (API server, node API clients,
	// containerd's gRPC), the log file reopened on rotation. A leaked fd
	// per pod or per exec session shows after 50.
	leakFDSlack = 50
	// leakFDsPerPod: an exec/attach/log stream's pipes and sockets.
	leakFDsPerPod = 4
	// leakRSSFactor, leakRSSSlack: RSS may double (GOGC=100 lets the
	// heap grow to twice the live data, and the scavenger returns memory
	// to the OS lazily) plus 128 MiB of caches (informers, images'
	// list, events). RSS only catches a gross leak; goroutines and fds
	// are the precise signals.
	leakRSSFactor = 2
	leakRSSSlack  = 128 << 20
	// leakSettle: how long crivk gets to collect the runtime objects,
	// cgroups and mounts of deleted pods (its housekeeping, like the
	// kubelet's, runs every few seconds; its container GC every minute).
	leakSettle = 90 * time.Second
	// namespaceGone: how long a deleted namespace may take to go (its
	// pods stop within their grace period, 30 s in busyboxPod).
	namespaceGone = 3 * time.Minute
)

// procBaseline is a clean crivk process's resources: taken with no test
// pod on the node, after the counts stopped moving.
type procBaseline struct {
	pid        int
	takenAfter string // the test (or "the suite's start") after which it was taken
	goroutines int
	stacks     map[string]int // goroutine stack (function names) -> count
	fds        map[string]int // fd kind or path -> count
	rss        int64
	livePods   int // pods bound to the node then, of any namespace
}

// baseline is the running crivk's (nil: none taken since its start, as
// for a process with test flags). Written only by the sequential part of
// the suite (restarts never run beside parallel tests).
var baseline *procBaseline

// takeBaseline records the running crivk's resources once they settle:
// sampled every second until goroutines and fds move by at most 3 between
// samples, for at most 30 s (then the last sample, noted).
func takeBaseline(ctx context.Context, after string) (*procBaseline, error) {
	pid, err := lookupCrivkPID()
	if err != nil {
		return nil, err
	}
	var b, prev *procBaseline
	var lastErr error
	settled := wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cur, err := sampleProcess(ctx, pid)
		if err != nil {
			lastErr = err // pprof not serving yet, an API hiccup: the next sample
			return false, nil
		}
		b, prev = cur, b
		return prev != nil && abs(cur.goroutines-prev.goroutines) <= 3 && abs(sum(cur.fds)-sum(prev.fds)) <= 3, nil
	})
	if b == nil {
		return nil, fmt.Errorf("crivk (pid %d): no sample for the baseline in 30s: %v", pid, lastErr)
	}
	b.takenAfter = after
	note := ""
	if settled != nil {
		note = " (still moving after 30s: the last sample)"
	}
	fmt.Printf("e2e: crivk's baseline (pid %d, after %s): %d goroutines, %d open files, RSS %.1f MiB, %d pods on the node%s\n",
		pid, after, b.goroutines, sum(b.fds), mib(b.rss), b.livePods, note)
	return b, nil
}

// sampleProcess reads pid's goroutines (pprof), fds and RSS, and the
// node's pod count.
func sampleProcess(ctx context.Context, pid int) (*procBaseline, error) {
	total, stacks, err := goroutineProfile(ctx)
	if err != nil {
		return nil, err
	}
	fds, err := openFDs(pid)
	if err != nil {
		return nil, err
	}
	rss, err := readRSS(pid)
	if err != nil {
		return nil, err
	}
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeName})
	if err != nil {
		return nil, fmt.Errorf("listing the node's pods: %w", err)
	}
	return &procBaseline{pid: pid, goroutines: total, stacks: stacks, fds: fds, rss: rss, livePods: len(pods.Items)}, nil
}

// processLeaksOnce compares the running crivk with its baseline b: nil when
// within the bounds above, else what grew (the goroutine stacks and fd
// kinds that grew most), from one sample. goroutinesOnly reports that
// the goroutines alone are over their bound (processLeaksSettled samples
// again then).
func processLeaksOnce(ctx context.Context, b *procBaseline) (out []string, goroutinesOnly bool, err error) {
	cur, err := sampleProcess(ctx, b.pid)
	if err != nil {
		return nil, false, err
	}
	extraPods := max(0, cur.livePods-b.livePods)
	maxG := b.goroutines + leakGoroutineSlack + leakGoroutinesPerPod*extraPods
	maxF := sum(b.fds) + leakFDSlack + leakFDsPerPod*extraPods
	maxRSS := leakRSSFactor*b.rss + leakRSSSlack
	fmt.Printf("e2e: crivk (pid %d) against its baseline (after %s): goroutines %d -> %d (bound %d), open files %d -> %d (bound %d), RSS %.1f -> %.1f MiB (bound %.1f), pods on the node %d -> %d\n",
		b.pid, b.takenAfter, b.goroutines, cur.goroutines, maxG, sum(b.fds), sum(cur.fds), maxF, mib(b.rss), mib(cur.rss), mib(maxRSS), b.livePods, cur.livePods)
	overG := cur.goroutines > maxG
	if overG {
		out = append(out, fmt.Sprintf("goroutines %d, over %d (baseline %d + %d + %d for each of %d more pods); grown most:", cur.goroutines, maxG, b.goroutines, leakGoroutineSlack, leakGoroutinesPerPod, extraPods))
		out = append(out, grown(b.stacks, cur.stacks, 10)...)
	}
	if sum(cur.fds) > maxF {
		out = append(out, fmt.Sprintf("open files %d, over %d (baseline %d + %d + %d for each of %d more pods); grown most:", sum(cur.fds), maxF, sum(b.fds), leakFDSlack, leakFDsPerPod, extraPods))
		out = append(out, grown(b.fds, cur.fds, 10)...)
	}
	if cur.rss > maxRSS {
		out = append(out, fmt.Sprintf("RSS %.1f MiB, over %.1f MiB (%d x baseline %.1f MiB + %d MiB)", mib(cur.rss), mib(maxRSS), leakRSSFactor, mib(b.rss), leakRSSSlack>>20))
	}
	return out, overG && sum(cur.fds) <= maxF && cur.rss <= maxRSS, nil
}

// objectWatchesIdle is how long a watch of a ConfigMap or Secret can
// outlive the pods that referenced it: apiobjects stops each per-object
// watch (7 goroutines: reflector, watch stream, informer loop) once no pod
// of the node references it and it went 5 s unused, checked every 5 s
// (apiobjects.unreferencedAfter), as the kubelet stops its watch with the
// last referencing pod. processLeaksSettled waits that long, with a margin
// for a loaded machine and a pod informer that sees the deletion late,
// before it calls goroutines leaked.
const objectWatchesIdle = 45 * time.Second

// processLeaksSettled is processLeaksOnce, sampled again every 15 s while
// goroutines alone are over their bound, for at most objectWatchesIdle:
// what the idle object watches hold goes when they stop; a leak stays.
func processLeaksSettled(ctx context.Context, b *procBaseline) ([]string, error) {
	deadline := time.Now().Add(objectWatchesIdle)
	for {
		leaks, goroutinesOnly, err := processLeaksOnce(ctx, b)
		if err != nil || len(leaks) == 0 || !goroutinesOnly || time.Now().After(deadline) {
			return leaks, err
		}
		fmt.Printf("e2e: crivk's goroutines over their bound: sampled again in 15 s (unreferenced object watches stop within %s)\n", objectWatchesIdle)
		select {
		case <-ctx.Done():
			return leaks, nil
		case <-time.After(15 * time.Second):
		}
	}
}

// grown lists the keys that grew from before to after, most first.
func grown(before, after map[string]int, n int) []string {
	type d struct {
		k    string
		diff int
	}
	var ds []d
	for k, v := range after {
		if v > before[k] {
			ds = append(ds, d{k, v - before[k]})
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].diff > ds[j].diff || ds[i].diff == ds[j].diff && ds[i].k < ds[j].k })
	var out []string
	for i, x := range ds {
		if i == n {
			out = append(out, fmt.Sprintf("  ... and %d more", len(ds)-n))
			break
		}
		out = append(out, fmt.Sprintf("  +%d %s", x.diff, x.k))
	}
	return out
}

// goroutineProfile reads crivk's goroutine profile (pprof debug=1): the
// total and the count per stack, a stack named by its function names.
func goroutineProfile(ctx context.Context) (int, map[string]int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+crivkProfilingAddr+"/debug/pprof/goroutine?debug=1", nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("crivk's goroutines: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("crivk's goroutines: %w", err)
	}
	return parseGoroutineProfile(string(raw))
}

var profileCount = regexp.MustCompile(`^(\d+) @`)

// parseGoroutineProfile parses pprof's debug=1 text: "goroutine profile:
// total N", then blocks "K @ addrs" followed by "#\taddr\tfunc+off\tfile:line".
func parseGoroutineProfile(s string) (int, map[string]int, error) {
	var total int
	first, rest, _ := strings.Cut(s, "\n")
	if _, err := fmt.Sscanf(first, "goroutine profile: total %d", &total); err != nil {
		return 0, nil, fmt.Errorf("crivk's goroutines: %q: %v", first, err)
	}
	stacks := map[string]int{}
	for _, block := range strings.Split(rest, "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		m := profileCount.FindStringSubmatch(lines[0])
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		var funcs []string
		for _, l := range lines[1:] {
			f := strings.Split(l, "\t")
			if len(f) >= 3 {
				name, _, _ := strings.Cut(f[2], "+0x")
				funcs = append(funcs, name)
			}
		}
		// The innermost frames are the runtime's parking; the ones
		// that tell the leak are below: keep 6, from the first
		// non-runtime frame.
		i := 0
		for i < len(funcs)-1 && (strings.HasPrefix(funcs[i], "runtime.") || strings.HasPrefix(funcs[i], "internal/")) {
			i++
		}
		funcs = funcs[i:min(len(funcs), i+6)]
		stacks[strings.Join(funcs, " < ")] += n
	}
	return total, stacks, nil
}

var fdNumber = regexp.MustCompile(`:\[\d+\]$`)

// openFDs counts pid's open files by what they are: a path, or its kind
// (socket, pipe, anon_inode:...) without the inode number.
func openFDs(pid int) (map[string]int, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("crivk's open files: %w", err)
	}
	out := map[string]int{}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed since the listing
		}
		out[fdNumber.ReplaceAllString(target, "")]++
	}
	return out, nil
}

// readRSS is VmRSS of pid, in bytes.
func readRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmRSS of %d: %q", pid, rest)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// apiPodUIDs are the UIDs of every pod in the API, of any node and phase,
// with the runtime UID of each mirror pod (a static pod runs under its
// manifest's hash, which the mirror carries in kubernetes.io/config.mirror).
func apiPodUIDs(ctx context.Context) (map[types.UID]string, error) {
	l, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the pods: %w", err)
	}
	out := map[types.UID]string{}
	for _, p := range l.Items {
		out[p.UID] = p.Namespace + "/" + p.Name
		if h := p.Annotations[v1.MirrorPodAnnotationKey]; h != "" {
			out[types.UID(h)] = p.Namespace + "/" + p.Name + " (static)"
		}
	}
	return out, nil
}

// runtimeLeaks lists what crivk left of pods the API no longer has: its
// sandboxes and containers (any node's of a fleet too), pod cgroups under
// its cgroup root, and mounts under its root directory's pods/<uid>/.
func runtimeLeaks(ctx context.Context) ([]string, error) {
	// The API first: an object listed after the runtime could be one
	// created in between.
	api, err := apiPodUIDs(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	sbs, err := runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: cri.OwnedSelector("")})
	if err != nil {
		return nil, fmt.Errorf("listing the sandboxes: %w", err)
	}
	for _, sb := range sbs {
		if _, ok := api[types.UID(sb.Metadata.Uid)]; !ok {
			out = append(out, fmt.Sprintf("sandbox %s (%s) of pod %s/%s uid %s, no longer in the API", sb.Id[:12], sb.State, sb.Metadata.Namespace, sb.Metadata.Name, sb.Metadata.Uid))
		}
	}
	cs, err := runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: cri.OwnedSelector("")})
	if err != nil {
		return nil, fmt.Errorf("listing the containers: %w", err)
	}
	for _, c := range cs {
		uid := c.Labels["io.kubernetes.pod.uid"]
		if _, ok := api[types.UID(uid)]; !ok {
			out = append(out, fmt.Sprintf("container %s %q (%s) of pod %s/%s uid %s, no longer in the API", c.Id[:12], c.Metadata.Name, c.State,
				c.Labels["io.kubernetes.pod.namespace"], c.Labels["io.kubernetes.pod.name"], uid))
		}
	}
	for _, d := range podCgroupsUnder(cgroupRoot()) {
		if _, ok := api[d.uid]; !ok {
			out = append(out, fmt.Sprintf("pod cgroup %s, its pod no longer in the API", d.dir))
		}
	}
	mounts, err := podMounts(filepath.Join(mustEnv("LOCAL_DIR"), "crivk"))
	if err != nil {
		return nil, err
	}
	for _, m := range mounts {
		if _, ok := api[m.uid]; !ok {
			out = append(out, fmt.Sprintf("mount %s, its pod no longer in the API", m.dir))
		}
	}
	return out, nil
}

type leakedDir struct {
	uid types.UID
	dir string
}

var podCgroupName = regexp.MustCompile(`^pod([0-9a-f-]{36})$|-pod([0-9a-f_]{36})\.slice$`)

// podCgroupsUnder walks root in each hierarchy the suite reads (cgroup
// v1: cpu, memory, pids; v2: the unified one) for pod cgroups (pod<uid>,
// or the systemd driver's ...-pod<uid>.slice), not descending into them:
// a single node's kubepods/[class/]pod<uid> and a fleet's
// <name>/kubepods/... alike.
func podCgroupsUnder(root string) []leakedDir {
	bases := []string{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids"}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		bases = []string{"/sys/fs/cgroup"}
	}
	var out []leakedDir
	for _, base := range bases {
		_ = filepath.WalkDir(filepath.Join(base, root), func(path string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil // gone while walked, or a file
			}
			if m := podCgroupName.FindStringSubmatch(d.Name()); m != nil {
				uid := m[1]
				if uid == "" {
					uid = strings.ReplaceAll(m[2], "_", "-")
				}
				out = append(out, leakedDir{types.UID(uid), path})
				return filepath.SkipDir
			}
			return nil
		})
	}
	return out
}

var podMountPath = regexp.MustCompile(`/pods/([0-9a-f-]{36})(/|$)`)

// podMounts lists the mount points under root that are in a pods/<uid>/
// directory (crivk's volumes: a single node's <root>/pods/<uid>/volumes/...,
// a fleet node's <root>/<name>/pods/...).
func podMounts(root string) ([]leakedDir, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []leakedDir
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := fields[4]
		if !strings.HasPrefix(mp, root+"/") {
			continue
		}
		if m := podMountPath.FindStringSubmatch(mp); m != nil {
			out = append(out, leakedDir{types.UID(m[1]), mp})
		}
	}
	return out, sc.Err()
}

// waitNoRuntimeLeaks waits up to leakSettle for runtimeLeaks to be empty:
// nil, or what is still left then.
func waitNoRuntimeLeaks(ctx context.Context) []string {
	var last []string
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, time.Second, leakSettle, true, func(ctx context.Context) (bool, error) {
		last, lastErr = runtimeLeaks(ctx)
		return lastErr == nil && len(last) == 0, nil
	})
	if err == nil {
		return nil
	}
	if lastErr != nil {
		last = append(last, "the check itself failed: "+lastErr.Error())
	}
	if len(last) == 0 {
		last = []string{"no check completed: " + err.Error()}
	}
	return last
}

// deleteNamespace deletes namespace ns and waits until it is gone (its
// pods stopped and deleted by the node), up to namespaceGone; the error
// names what is left in it. The one way the suite deletes namespaces.
//
// The pods go first with a grace period of 1 s: most of the suite's run
// `sleep` as PID 1, which ignores SIGTERM, and would hold each sequential
// test for its whole 30 s grace period now that the deletion is waited
// for. (The tests of graceful termination delete their pods themselves.)
func deleteNamespace(ctx context.Context, ns string) error {
	err := client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)}, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the pods of namespace %s: %w", ns, err)
	}
	err = client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting namespace %s: %w", ns, err)
	}
	var last *v1.Namespace
	err = wait.PollUntilContextTimeout(ctx, poll, namespaceGone, true, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err == nil {
			last = n
		}
		return false, nil
	})
	if err == nil {
		return nil
	}
	var left []string
	if last != nil {
		for _, c := range last.Status.Conditions {
			if c.Status == v1.ConditionTrue {
				left = append(left, fmt.Sprintf("%s: %s", c.Type, c.Message))
			}
		}
	}
	lctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if l, err := client.CoreV1().Pods(ns).List(lctx, metav1.ListOptions{}); err == nil {
		for _, p := range l.Items {
			left = append(left, fmt.Sprintf("pod %s on %s, phase %s, deletion %v", p.Name, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp))
		}
	}
	return fmt.Errorf("namespace %s not gone %s after its deletion (%v); left: %s", ns, namespaceGone, err, strings.Join(left, "; "))
}

// testNamespaces are the namespaces each test made (newNamespace), by
// test name, for restartsCrivk's check to delete before it looks.
var testNamespaces = struct {
	sync.Mutex
	byTest map[string][]string
}{byTest: map[string][]string{}}

func recordNamespace(t *testing.T, ns string) {
	testNamespaces.Lock()
	defer testNamespaces.Unlock()
	testNamespaces.byTest[t.Name()] = append(testNamespaces.byTest[t.Name()], ns)
}

// waitNoTestNamespaces waits until no namespace of the suite (e2e-...)
// is left, deleting those that are (a test's clean-up that did not run:
// a panic, a timeout).
func waitNoTestNamespaces(ctx context.Context) []string {
	l, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{"listing the namespaces: " + err.Error()}
	}
	var out []string
	for _, n := range l.Items {
		if !strings.HasPrefix(n.Name, "e2e-") {
			continue
		}
		out = append(out, fmt.Sprintf("namespace %s still there at the suite's end (phase %s)", n.Name, n.Status.Phase))
		if err := deleteNamespace(ctx, n.Name); err != nil {
			out = append(out, err.Error())
		}
	}
	return out
}

// restartsCrivk makes t, which stops or restarts crivk, end with crivk
// running with the defaults (its node's lease renewed by the new process)
// and checked for leaks. Call it before the first stop; it registers one
// cleanup per test, which runs after the cleanups registered later (those
// of withCrivkFlags among them):
//  1. if crivk is down (the test failed between a stop and a start), it
//     is started again, so the tests after this one do not fail for it;
//  2. unless t failed (its namespaces are kept then for its evidence, and
//     the suite's end checks), t's namespaces are deleted and waited for
//     and runtimeLeaks must be empty within leakSettle;
//  3. a baseline is taken of the running crivk if it has none: the
//     restarted process, with no pod of this test left.
func restartsCrivk(t *testing.T) {
	t.Helper()
	restartChecks.Lock()
	defer restartChecks.Unlock()
	if restartChecks.registered[t.Name()] {
		return
	}
	restartChecks.registered[t.Name()] = true
	t.Cleanup(func() {
		restartChecks.Lock()
		delete(restartChecks.registered, t.Name())
		restartChecks.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		if stopCrivk == nil {
			t.Errorf("the test ended with crivk down: starting it with the defaults")
			started := time.Now()
			stop, err := startCrivk()
			if err != nil {
				t.Errorf("starting crivk again: %v", err)
				return
			}
			stopCrivk = stop
			waitFleetRenewed(t, []string{nodeName}, started, 2*time.Minute)
		}
		if t.Failed() {
			t.Logf("leak check after %s left to the suite's end: the test failed, its namespaces stay for its evidence", t.Name())
		} else {
			testNamespaces.Lock()
			nss := testNamespaces.byTest[t.Name()]
			testNamespaces.Unlock()
			for _, ns := range nss {
				if err := deleteNamespace(ctx, ns); err != nil {
					t.Errorf("clean-up: %v", err)
				}
			}
			if leaks := waitNoRuntimeLeaks(ctx); len(leaks) > 0 {
				t.Errorf("leak check after %s: %d left %s after its namespaces went:\n  %s", t.Name(), len(leaks), leakSettle, strings.Join(leaks, "\n  "))
			} else {
				t.Logf("leak check after %s: no sandbox, container, pod cgroup or mount of a deleted pod", t.Name())
			}
		}
		if pid, err := lookupCrivkPID(); err == nil && (baseline == nil || baseline.pid != pid) {
			b, err := takeBaseline(ctx, t.Name())
			if err != nil {
				t.Errorf("crivk's baseline: %v", err)
			}
			baseline = b
		}
	})
}

var restartChecks = struct {
	sync.Mutex
	registered map[string]bool
}{registered: map[string]bool{}}

// checkBeforeStop fails t if the running crivk, about to be stopped,
// grew past its baseline's bounds; nothing when it has no baseline (a
// process with a test's flags, or one started by a kill -9 cycle).
func checkBeforeStop(t *testing.T) {
	t.Helper()
	b := baseline
	baseline = nil // the process goes
	if b == nil {
		return
	}
	if pid, err := lookupCrivkPID(); err != nil || pid != b.pid {
		t.Logf("crivk's process is not the baseline's (pid %d): %v", b.pid, err)
		return
	}
	leaks, err := processLeaksSettled(testContext(t, objectWatchesIdle+time.Minute), b)
	if err != nil {
		t.Errorf("checking crivk's process before its stop: %v", err)
		return
	}
	if len(leaks) > 0 {
		t.Errorf("crivk (pid %d) leaked between its baseline (after %s) and this stop:\n  %s", b.pid, b.takenAfter, strings.Join(leaks, "\n  "))
	}
}

// suiteLeakCheck is the suite's last check, crivk still running: every
// test namespace gone, nothing of a deleted pod left (runtimeLeaks), and
// the process within its baseline's bounds. It returns what leaked.
func suiteLeakCheck() []string {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	out := waitNoTestNamespaces(ctx)
	out = append(out, waitNoRuntimeLeaks(ctx)...)
	if b := baseline; b == nil {
		out = append(out, "crivk has no baseline: the process check could not run")
	} else if pid, err := lookupCrivkPID(); err != nil || pid != b.pid {
		out = append(out, fmt.Sprintf("crivk's process is not the baseline's (pid %d): %v", b.pid, err))
	} else if leaks, err := processLeaksSettled(ctx, b); err != nil {
		out = append(out, "checking crivk's process: "+err.Error())
	} else {
		out = append(out, leaks...)
	}
	return out
}

// lookupCrivkPID is the PID of the suite's crivk: the process running
// crivk's binary for the suite's node (hack/run-crivk.sh passes
// --node-name), so another crivk a test runs beside it (TestEvictionDiskPressure's
// node crivk-disk, in the parallel phase) is never taken for it.
func lookupCrivkPID() (int, error) {
	bin, err := filepath.Abs("../../_output/bin/crivk")
	if err != nil {
		return 0, err
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && exe == bin {
			if cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil &&
				bytes.Contains(cmdline, []byte("\x00--node-name="+nodeName+"\x00")) {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("no process runs crivk's binary for node %s", nodeName)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
