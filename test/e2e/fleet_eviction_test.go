package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// TestFleetMemoryEvictionPerNode runs two nodes from one process, node 0
// with a small part of the machine's memory (--node-shares=1,w, w chosen
// from the machine's memory so that node 0 holds about 512 MiB), and shows
// a node's own memory.available (docs/scale.md, "Eviction per node";
// eviction.Config.MemoryShare): a pod on node 0 filling a memory-backed
// emptyDir until node 0's pods use all but about 96 MiB of its share puts
// node 0, and node 0 alone, under MemoryPressure while the machine has
// gigabytes free, and is evicted by node 0 with the kubelet's reason,
// message (node 0's figures), DisruptionTarget condition and Evicted event;
// node 0 then refuses a BestEffort pod for the pressure while node 1 runs
// one, and node 1's pod runs on untouched; node 0's pressure clears after
// the transition period, the evicted pod's sandbox, containers, cgroup and
// mounts are gone. It fails if node 1 shows MemoryPressure at any time, if
// its pod is disturbed, or if node 1 evicts anything.
//
// The thresholds keep the node's measure apart from the allocatable one:
// without reservations a node's kubepods bound is its share, so the
// allocatableMemory.available twin of a hard memory.available threshold
// (the kubelet's, eviction.Config.EnforceNodeAllocatable) measures the same
// amount and would evict per node by itself. The twin is set apart, lower
// (allocatableMemory.available<32Mi against memory.available<160Mi), and
// the hog stops in between: the eviction's threshold quantity (160Mi) and
// kubelet_evictions{eviction_signal="memory.available"} name the node's
// memory.available, and its available figure, under 160Mi while the
// machine's measure is far above, is node 0's.
func TestFleetMemoryEvictionPerNode(t *testing.T) {
	const (
		// node0Share is about node 0's part of the machine's memory: the
		// hog fills most of it.
		node0Share = 512 << 20
		// The hard thresholds: memory.available (the node's measure, and
		// the machine's) and its allocatable twin, set lower.
		thresholdMi   = 160
		allocatableMi = 32
		// overhead is what the hog's pod uses besides its fill (pause,
		// sh, dd's buffer), taken off the fill.
		overhead   = 4 << 20
		transition = 30 * time.Second
	)
	names := []string{nodeName + "-0", nodeName + "-1"}
	ctx := testContext(t, 6*time.Minute)

	single, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	machine := single.Status.Capacity[v1.ResourceMemory]
	other := machine.Value()/node0Share - 1
	if other < 2 {
		t.Skipf("the machine's memory %s is too small to give node 0 a part of about %d MiB", machine.String(), node0Share>>20)
	}
	shares := fmt.Sprintf("1,%d", other)

	cleanupFleetNodes(t, names)
	waitSingleNodeEmpty(t, 2*time.Minute)
	logFrom := crivkLogSize(t)
	// The disk thresholds are hack/run-crivk.sh's (the host's shared disk
	// must not make DiskPressure); only the memory ones are this test's.
	hard := fmt.Sprintf("--eviction-hard=memory.available<%dMi,allocatableMemory.available<%dMi,nodefs.available<2Gi,nodefs.inodesFree<5%%,imagefs.available<2Gi",
		thresholdMi, allocatableMi)
	args := []string{"--node-count=2", "--node-shares=" + shares, "--pod-manifest-path=", "--node-labels=" + fleetLabel + "=true",
		hard, "--eviction-pressure-transition-period=" + transition.String()}
	withCrivkFlags(t, func() { removeDeadUnlabelledSandboxes(t) }, nil, args...)
	waitFleetRenewed(t, names, time.Now().Add(-time.Second), 2*time.Minute)
	for _, n := range names {
		waitNodeConditionOf(t, n, v1.NodeMemoryPressure, v1.ConditionFalse, 30*time.Second)
	}

	// Node 0's part: its capacity (the eviction manager's MemoryShare) and
	// its kubepods bound (what allocatableMemory.available measures).
	node0, err := client.CoreV1().Nodes().Get(ctx, names[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	capa := node0.Status.Capacity[v1.ResourceMemory]
	share := capa.Value()
	limit := readInt(t, filepath.Join("/sys/fs/cgroup/memory", cgroupRoot(), names[0], "kubepods", "memory.limit_in_bytes"))
	ws0 := podsWorkingSet(t, names[0])
	// The window of node 0's pods' working set in which memory.available
	// is met on node 0's measure and its allocatable twin is not:
	// share - ws < threshold and limit - ws >= allocatable.
	low, high := share-thresholdMi<<20, limit-allocatableMi<<20
	target := (low + high) / 2
	fill := (target - ws0 - overhead) >> 20
	alloc := node0.Status.Allocatable[v1.ResourceMemory]
	t.Logf("--node-shares=%s: node %s capacity %s (share %d), allocatable %s, kubepods limit %d, pods' working set %d; "+
		"memory.available<%dMi met above a working set of %d, allocatableMemory.available<%dMi above %d: the hog writes %d MiB for about %d",
		shares, names[0], capa.String(), share, alloc.String(), limit, ws0, thresholdMi, low, allocatableMi, high, fill, target)
	if high-low < 64<<20 || fill < 64 {
		t.Fatalf("node %s: no room for the test: window %d..%d of the pods' working set, %d already used", names[0], low, high, ws0)
	}

	ns := newNamespace(t)
	t.Cleanup(func() { clearFleet(t, ns, names) })
	pod := func(name, node string, mutate func(*v1.PodSpec)) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: fleetPodSpec(func(s *v1.PodSpec) {
			s.NodeName = node
			if mutate != nil {
				mutate(s)
			}
		})}
	}
	bestEffort := func(s *v1.PodSpec) { s.Containers[0].Resources = v1.ResourceRequirements{} }

	quiet := createPod(t, ns, pod("quiet", names[1], nil))
	quiet = waitPod(t, ns, quiet.Name, time.Minute, "Running", isRunningReady)
	watch := watchNeighbour(ctx, names[1], ns, quiet.Name)

	hogStart := time.Now()
	hog := createPod(t, ns, pod("hog", names[0], func(s *v1.PodSpec) {
		c := &s.Containers[0]
		c.Command = []string{"sh", "-c", fmt.Sprintf("sleep 2; dd if=/dev/zero of=/scratch/fill bs=1M count=%d; sleep 3600", fill)}
		c.Resources = v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("32Mi")}}
		c.VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
		s.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}}}
	}))
	waitPod(t, ns, hog.Name, time.Minute, "Running", isRunningReady)
	filling := time.Now().Add(2 * time.Second)

	toPressure := waitNodeConditionOf(t, names[0], v1.NodeMemoryPressure, v1.ConditionTrue, time.Minute)
	pressureAt := time.Now()
	if c := nodeConditionOf(ctx, names[0], v1.NodeMemoryPressure); c.Reason != "KubeletHasInsufficientMemory" || c.Message != "kubelet has insufficient memory available" {
		t.Errorf("node %s: MemoryPressure %q %q, want the kubelet's", names[0], c.Reason, c.Message)
	}
	// The machine is not low: node 0's pressure is its own measure's.
	machineAvail := int64(-1)
	if m := nodeSummaryOf(t, names[0]).Node.Memory; m != nil && m.AvailableBytes != nil {
		machineAvail = int64(*m.AvailableBytes)
	}
	if machineAvail < 4*thresholdMi<<20 {
		t.Errorf("the machine's memory.available is %d under node %s's pressure: the machine itself is low, the test proves nothing", machineAvail, names[0])
	}

	// Admission under the pressure is per node too: node 0 refuses a
	// BestEffort pod, node 1 runs one.
	createPod(t, ns, pod("besteffort-0", names[0], bestEffort))
	createPod(t, ns, pod("besteffort-1", names[1], bestEffort))
	refused := waitPod(t, ns, "besteffort-0", 30*time.Second, "refused", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if refused.Status.Reason != "Evicted" || refused.Status.Message != "Pod was rejected: The node had condition: [MemoryPressure]. " {
		t.Errorf("BestEffort pod on %s under its memory pressure: reason %q message %q", names[0], refused.Status.Reason, refused.Status.Message)
	}
	waitPod(t, ns, "besteffort-1", time.Minute, "Running on the node without pressure", isRunningReady)

	evicted := waitPod(t, ns, hog.Name, time.Minute, "evicted", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	evictedAt := time.Now()
	msg := evicted.Status.Message
	re := regexp.MustCompile(fmt.Sprintf(`^The node was low on resource: memory\. Threshold quantity: %dMi, available: (\d+(?:Ki|Mi|Gi)?)\. `+
		`Container c was using \d+(?:Ki|Mi|Gi)?, request is 32Mi, has larger consumption of memory\. $`, thresholdMi))
	m := re.FindStringSubmatch(msg)
	if evicted.Status.Reason != "Evicted" || m == nil {
		t.Errorf("evicted hog: reason %q message %q", evicted.Status.Reason, msg)
	} else if avail := resource.MustParse(m[1]); avail.Value() >= thresholdMi<<20 {
		t.Errorf("evicted hog: available %s in the message, want node %s's own measure, below %dMi", m[1], names[0], thresholdMi)
	}
	if dt := disruptionTarget(evicted); dt == nil || dt.Status != v1.ConditionTrue || dt.Reason != "TerminationByKubelet" || dt.Message != msg {
		t.Errorf("DisruptionTarget %+v, want True TerminationByKubelet with the message", dt)
	}
	for _, cs := range evicted.Status.ContainerStatuses {
		if cs.State.Terminated == nil {
			t.Errorf("evicted pod's container %s not terminated: %+v", cs.Name, cs.State)
		}
	}
	if ev := evictedEvent(t, ns, hog.Name); ev != msg {
		t.Errorf("Evicted event %q, want the status message", ev)
	}
	for _, c := range []struct {
		node, signal string
		want         float64
	}{
		{names[0], "memory.available", 1},
		{names[0], "allocatableMemory.available", 0},
		{names[1], "memory.available", 0},
		{names[1], "allocatableMemory.available", 0},
	} {
		if n := evictionsMetricOf(t, c.node, c.signal); n != c.want {
			t.Errorf("node %s: kubelet_evictions{eviction_signal=%q} = %v, want %v", c.node, c.signal, n, c.want)
		}
	}

	// The evicted pod stays Failed in the API; nothing of it runs, its pod
	// cgroup and its mounts (the emptyDir's tmpfs) are gone.
	waitEvictedCleanedUp(t, names[0], evicted.UID, time.Minute)
	toClear := waitNodeConditionOf(t, names[0], v1.NodeMemoryPressure, v1.ConditionFalse, transition+time.Minute)
	clearedAt := time.Now()

	// Node 1 was never under pressure, its pod never disturbed.
	for _, v := range watch() {
		t.Error(v)
	}
	if c := nodeConditionOf(ctx, names[1], v1.NodeMemoryPressure); c.Status != v1.ConditionFalse || c.LastTransitionTime.After(hogStart) {
		t.Errorf("node %s: MemoryPressure %s since %s, want False since before the hog started (%s)", names[1], c.Status, c.LastTransitionTime, hogStart.Format(time.RFC3339))
	}
	q, err := client.CoreV1().Pods(ns).Get(ctx, quiet.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !isRunningReady(q) || disruptionTarget(q) != nil || len(q.Status.ContainerStatuses) != 1 ||
		q.Status.ContainerStatuses[0].RestartCount != 0 || q.Status.ContainerStatuses[0].ContainerID != quiet.Status.ContainerStatuses[0].ContainerID {
		t.Errorf("the pod on node %s was touched: %+v", names[1], q.Status)
	}
	checkReclaimLog(t, logFrom, names, thresholdMi)

	// Deleted, the evicted pod leaves nothing in the runtime, and each
	// node holds exactly its API pods.
	for _, name := range []string{hog.Name, "besteffort-0"} {
		if err := client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{hog.Name, "besteffort-0"} {
		waitGone(t, ns, name, time.Minute)
	}
	var sbs, cs int
	gone := wait.PollUntilContextTimeout(ctx, poll, time.Minute, true, func(context.Context) (bool, error) {
		sbs, cs = runtimeObjects(t, evicted.UID)
		return sbs == 0 && cs == 0, nil
	})
	if gone != nil {
		t.Errorf("the evicted pod %s deleted: the runtime still has %d sandboxes and %d containers of it", evicted.UID, sbs, cs)
	}
	waitRuntimeMatches(t, names, time.Minute)

	t.Logf("figures: dd started -> %s MemoryPressure=True in the API %.1fs (waited %.1fs); -> hog Failed/Evicted %.1fs after the pressure; "+
		"-> MemoryPressure=False %.1fs after the eviction (waited %.1fs; transition period %s); machine memory.available %d MiB under the pressure; message %q; "+
		"%s: MemoryPressure False throughout, its pod Running, 0 restarts",
		names[0], pressureAt.Sub(filling).Seconds(), toPressure.Seconds(), evictedAt.Sub(pressureAt).Seconds(),
		clearedAt.Sub(evictedAt).Seconds(), toClear.Seconds(), transition, machineAvail>>20, msg, names[1])
}

// podsWorkingSet is the working set of node's pods together: the "pods"
// system container of its /stats/summary (its kubepods).
func podsWorkingSet(t *testing.T, node string) int64 {
	t.Helper()
	for _, c := range nodeSummaryOf(t, node).Node.SystemContainers {
		if c.Name == statsapi.SystemContainerPods && c.Memory != nil && c.Memory.WorkingSetBytes != nil {
			return int64(*c.Memory.WorkingSetBytes)
		}
	}
	t.Fatalf("node %s: /stats/summary has no pods system container with a working set", node)
	return 0
}

// watchNeighbour polls node's MemoryPressure and pod ns/name every second
// until the returned function is called, which returns what was wrong:
// the first time the node was not MemoryPressure=False, the first time
// the pod was not Running and Ready or was being deleted. Failed reads are
// skipped.
func watchNeighbour(ctx context.Context, node, ns, name string) func() []string {
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex // guards seen
	seen := map[string]string{}
	note := func(kind, what string) {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := seen[kind]; !ok {
			seen[kind] = fmt.Sprintf("%s: %s", time.Now().Format(time.RFC3339Nano), what)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
			if n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err == nil {
				for _, c := range n.Status.Conditions {
					if c.Type == v1.NodeMemoryPressure && c.Status != v1.ConditionFalse {
						note("node", fmt.Sprintf("node %s MemoryPressure %s (%s: %s)", node, c.Status, c.Reason, c.Message))
					}
				}
			}
			if p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err == nil && (!isRunningReady(p) || p.DeletionTimestamp != nil) {
				note("pod", fmt.Sprintf("pod %s/%s on %s: phase %s reason %q message %q, deleting %v", ns, name, node, p.Status.Phase, p.Status.Reason, p.Status.Message, p.DeletionTimestamp != nil))
			}
			return false, nil
		})
	}()
	return func() []string {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, kind := range []string{"node", "pod"} {
			if s, ok := seen[kind]; ok {
				out = append(out, "while node 0 was filled: "+s)
			}
		}
		return out
	}
}

// waitEvictedCleanedUp waits until evicted pod uid of node has no ready
// sandbox, no running container, no pod cgroup and no mount under its pod
// directory (what the eviction manager waits for before its next round,
// lifecycle.Engine.PodCleanedUp).
func waitEvictedCleanedUp(t *testing.T, node string, uid types.UID, timeout time.Duration) {
	t.Helper()
	dir := filepath.Join(mustEnv("LOCAL_DIR"), "crivk", "nodes", node, "pods", string(uid))
	sel := map[string]string{"io.kubernetes.pod.uid": string(uid)}
	var last string
	err := wait.PollUntilContextCancel(testContext(t, timeout), poll, true, func(ctx context.Context) (bool, error) {
		sbs, err := runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel,
			State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		cs, err := runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel,
			State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		mounts := mountsUnder(t, dir+"/")
		cgroup := podCgroupsOf(node)[uid]
		last = fmt.Sprintf("%d ready sandboxes, %d running containers, pod cgroup %v, mounts %v", len(sbs), len(cs), cgroup, mounts)
		return len(sbs) == 0 && len(cs) == 0 && !cgroup && len(mounts) == 0, nil
	})
	if err != nil {
		t.Errorf("evicted pod %s of node %s not cleaned up after %s: %s", uid, node, timeout, last)
	}
}

// checkReclaimLog: crivk's log since from shows node names[0]'s eviction
// manager reclaiming memory for memory.available<thresholdMi on its own
// measure (measure=node), and no reclaim by any other node.
func checkReclaimLog(t *testing.T, from int64, names []string, thresholdMi int) {
	t.Helper()
	lines := crivkLogLinesSince(t, from)
	field := func(k, v string) *regexp.Regexp {
		return regexp.MustCompile(`(^|\s)` + regexp.QuoteMeta(k) + `="?` + regexp.QuoteMeta(v) + `"?(\s|$)`)
	}
	own, threshold := field("measure", "node"), field("threshold", fmt.Sprintf("memory.available<%dMi", thresholdMi))
	var found bool
	nodeFields := make([]*regexp.Regexp, len(names))
	for i, n := range names {
		nodeFields[i] = field("node", n)
	}
	for _, line := range lines {
		if !strings.Contains(line, "eviction manager: attempting to reclaim") {
			continue
		}
		for i, n := range names {
			if !nodeFields[i].MatchString(line) {
				continue
			}
			if i != 0 {
				t.Errorf("node %s reclaimed: %s", n, line)
				continue
			}
			if !own.MatchString(line) || !threshold.MatchString(line) {
				t.Errorf("node %s reclaimed on another measure or threshold than its own memory.available<%dMi: %s", n, thresholdMi, line)
				continue
			}
			found = true
		}
	}
	if !found {
		t.Errorf("crivk logged no memory reclaim by node %s on its own measure (see %s)", names[0], crivkLogPath())
	}
}
