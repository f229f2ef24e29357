package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// procPIDAvailable is pid.available as crivk computes it (nodeapi/stats,
// the kubelet's pidlimit), read from /proc here: min(kernel.pid_max,
// kernel.threads-max) less the task count of /proc/loadavg.
func procPIDAvailable(t *testing.T) (available, maxPID, tasks int64) {
	t.Helper()
	maxPID = -1
	for _, f := range []string{"/proc/sys/kernel/pid_max", "/proc/sys/kernel/threads-max"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if maxPID < 0 || v < maxPID {
			maxPID = v
		}
	}
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) < 5 {
		t.Fatalf("/proc/loadavg %q: not enough fields", b)
	}
	_, total, ok := strings.Cut(f[3], "/")
	if !ok {
		t.Fatalf("/proc/loadavg %q: no task count", b)
	}
	if tasks, err = strconv.ParseInt(total, 10, 64); err != nil {
		t.Fatal(err)
	}
	return maxPID - tasks, maxPID, tasks
}

// TestEvictionPID: with --eviction-hard=pid.available<X, X a few hundred
// below the node's available pids (/proc), a pod forking 1200 background
// sleeps makes PIDPressure (the kubelet's reason and message) and is
// evicted with the kubelet's reason, message ("The node was low on
// resource: pids. Threshold quantity: X, available: N. "), Evicted event
// and DisruptionTarget condition; a pod created under the pressure is
// refused ("The node had condition: [PIDPressure]. "); a bystander pod
// with one process is untouched (pid.available ranks by priority, then
// process count); PIDPressure clears after the transition period (30 s).
func TestEvictionPID(t *testing.T) {
	const (
		margin     = 400  // pids between what is available and the threshold
		forks      = 1200 // background sleeps the forker starts
		transition = 30 * time.Second
	)
	// A SIGTERM before crivk's signal handler is set would kill it uncleanly.
	waitCrivkServing(t)
	t.Cleanup(func() { waitCrivkServing(t) })
	avail, maxPID, tasks := procPIDAvailable(t)
	if r := nodeSummary(t).Node.Rlimit; r != nil && r.MaxPID != nil && r.NumOfRunningProcesses != nil {
		t.Logf("/proc: max pid %d, %d tasks, %d available; /stats/summary rlimit: maxpid %d, curproc %d", maxPID, tasks, avail, *r.MaxPID, *r.NumOfRunningProcesses)
	}
	threshold := avail - margin
	withCrivkFlags(t, nil, nil, fmt.Sprintf("--eviction-hard=pid.available<%d", threshold), "--eviction-pressure-transition-period="+transition.String())
	waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	ns := newNamespace(t)

	bystander := runningPod(t, ns, busyboxPod("bystander", v1.RestartPolicyAlways, "exec sleep 3600"))
	// The threshold is not met before the forks: else the test shows nothing.
	if r := nodeSummary(t).Node.Rlimit; r == nil || r.MaxPID == nil || r.NumOfRunningProcesses == nil {
		t.Fatalf("the node reports no rlimit: %+v", r)
	} else if a := *r.MaxPID - *r.NumOfRunningProcesses; a <= threshold {
		t.Fatalf("pid.available %d already below the threshold %d before the forks", a, threshold)
	}
	if c := nodeCondition(testContext(t, 10*time.Second), v1.NodePIDPressure); c.Status != v1.ConditionFalse {
		t.Fatalf("PIDPressure %s before the forks", c.Status)
	}

	script := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do sleep 3600 & i=$((i+1)); done; echo forked; sleep 3600`, forks)
	runningPod(t, ns, busyboxPod("forker", v1.RestartPolicyAlways, script))
	forking := time.Now()

	toPressure := waitNodeCondition(t, v1.NodePIDPressure, v1.ConditionTrue, 60*time.Second)
	pressureAt := time.Now()
	c := nodeCondition(testContext(t, 10*time.Second), v1.NodePIDPressure)
	if c.Reason != "KubeletHasInsufficientPID" || c.Message != "kubelet has insufficient PID available" {
		t.Errorf("PIDPressure %q %q, want the kubelet's", c.Reason, c.Message)
	}

	// Under PID pressure every pod is refused (bound directly: the
	// scheduler keeps pods off the tainted node).
	late := busyboxPod("late", v1.RestartPolicyAlways, "sleep 3600")
	late.Spec.NodeSelector, late.Spec.NodeName = nil, nodeName
	createPod(t, ns, late)
	refused := waitPod(t, ns, "late", 30*time.Second, "refused", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if refused.Status.Reason != "Evicted" || refused.Status.Message != "Pod was rejected: The node had condition: [PIDPressure]. " {
		t.Errorf("pod created under PID pressure: %q %q", refused.Status.Reason, refused.Status.Message)
	}

	evicted := waitPod(t, ns, "forker", 60*time.Second, "evicted", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	evictedAt := time.Now()
	msg := evicted.Status.Message
	wantThreshold := resource.NewQuantity(threshold, resource.DecimalSI).String()
	re := regexp.MustCompile(`^The node was low on resource: pids\. Threshold quantity: ` + regexp.QuoteMeta(wantThreshold) + `, available: (\d+)(k?)\. $`)
	if m := re.FindStringSubmatch(msg); evicted.Status.Reason != "Evicted" || m == nil {
		t.Errorf("evicted forker: reason %q message %q, want Evicted and %s", evicted.Status.Reason, msg, re)
	} else if n, _ := strconv.ParseInt(m[1], 10, 64); m[2] == "" && n >= threshold {
		t.Errorf("message %q: available %d not below the threshold %d", msg, n, threshold)
	}
	if dt := disruptionTarget(evicted); dt == nil || dt.Status != v1.ConditionTrue || dt.Reason != "TerminationByKubelet" || dt.Message != msg {
		t.Errorf("DisruptionTarget %+v, want True TerminationByKubelet with the message", dt)
	}
	for _, cs := range evicted.Status.ContainerStatuses {
		if cs.State.Terminated == nil {
			t.Errorf("evicted pod's container %s not terminated: %+v", cs.Name, cs.State)
		}
	}
	if ev := evictedEvent(t, ns, "forker"); ev != msg {
		t.Errorf("Evicted event %q, want the status message", ev)
	}
	if n := evictionsMetric(t, "pid.available"); n < 1 {
		t.Errorf("kubelet_evictions{eviction_signal=pid.available} = %v", n)
	}
	b, err := client.CoreV1().Pods(ns).Get(testContext(t, 10*time.Second), bystander.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !isRunningReady(b) || b.Status.ContainerStatuses[0].RestartCount != 0 || disruptionTarget(b) != nil {
		t.Errorf("the bystander pod was touched: %+v", b.Status)
	}

	toClear := waitNodeCondition(t, v1.NodePIDPressure, v1.ConditionFalse, transition+60*time.Second)
	clearedAt := time.Now()
	if clearedAt.Sub(evictedAt) < transition-5*time.Second {
		t.Errorf("PIDPressure cleared %s after the eviction, before the %s transition period", clearedAt.Sub(evictedAt), transition)
	}
	afterAvail, _, _ := procPIDAvailable(t)
	t.Logf("figures: threshold pid.available<%d (%d available before); forks started -> PIDPressure=True in the API %.1fs (waited %.1fs); "+
		"-> forker Failed/Evicted %.1fs after the pressure; -> PIDPressure=False %.1fs after the eviction (waited %.1fs; transition period %s); "+
		"%d available after; message %q; bystander Running, 0 restarts",
		threshold, avail, pressureAt.Sub(forking).Seconds(), toPressure.Seconds(), evictedAt.Sub(pressureAt).Seconds(),
		clearedAt.Sub(evictedAt).Seconds(), toClear.Seconds(), transition, afterAvail, msg)
}

// TestEvictionPodEphemeralStorageLimit: a pod whose containers' writable
// layers, logs and emptyDir together use more than the sum of its
// containers' ephemeral-storage limits (10Mi + 10Mi) is evicted without
// any node pressure, though neither container passes its own limit (each
// writes 6Mi to its writable layer; one writes 12Mi more to an emptyDir
// without sizeLimit, which counts for the pod, not the container): the
// kubelet's podEphemeralStorageLimitEviction, message "Pod ephemeral local
// storage usage exceeds the total limit of containers 20Mi. ", the Evicted
// event, no DisruptionTarget condition, kubelet_evictions{eviction_signal=
// "ephemeralpodfs.limit"}.
func TestEvictionPodEphemeralStorageLimit(t *testing.T) {
	ns := newNamespace(t)
	p := busyboxPod("spender", v1.RestartPolicyAlways, "dd if=/dev/zero of=/fill bs=1M count=6; dd if=/dev/zero of=/scratch/fill bs=1M count=12; sleep 3600")
	p.Spec.Containers[0].Name = "a"
	p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("10Mi")}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	b := p.Spec.Containers[0]
	b.Name, b.Command, b.VolumeMounts = "b", []string{"sh", "-c", "dd if=/dev/zero of=/fill bs=1M count=6; sleep 3600"}, nil
	p.Spec.Containers = append(p.Spec.Containers, b)
	p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	createPod(t, ns, p)
	running := waitPod(t, ns, "spender", 60*time.Second, "Running", isRunningReady)
	start := time.Now()
	// Volumes are measured at most once a minute, writable layers by
	// containerd every 10 s or so; the eviction manager looks every 10 s.
	// The pod's stats are kept from the summaries read meanwhile.
	var last *statsapi.PodStats
	var got *v1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 2*time.Second, 120*time.Second, true, func(ctx context.Context) (bool, error) {
		x, err := client.CoreV1().Pods(ns).Get(ctx, "spender", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if got = x; x.Status.Phase == v1.PodFailed {
			return true, nil
		}
		raw, err := client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", nodeName, "proxy/stats/summary").DoRaw(ctx)
		var s statsapi.Summary
		if err != nil || json.Unmarshal(raw, &s) != nil {
			return false, nil
		}
		for i := range s.Pods {
			if s.Pods[i].PodRef.UID == string(running.UID) {
				last = &s.Pods[i]
			}
		}
		return false, nil
	})
	if err != nil {
		phase := v1.PodPhase("unknown")
		if got != nil {
			phase = got.Status.Phase
		}
		t.Fatalf("the pod was not evicted within 120s (phase %s); its last stats: %+v", phase, last)
	}
	took := time.Since(start)
	want := "Pod ephemeral local storage usage exceeds the total limit of containers 20Mi. "
	checkLocalStorageEviction(t, ns, "spender", got, want, "ephemeralpodfs.limit")
	// The last summary before the eviction: each container under its own
	// 10Mi, the pod over 20Mi once the emptyDir was measured.
	var figures []string
	if last != nil {
		for _, c := range last.Containers {
			var u uint64
			if c.Rootfs != nil && c.Rootfs.UsedBytes != nil {
				u += *c.Rootfs.UsedBytes
			}
			if c.Logs != nil && c.Logs.UsedBytes != nil {
				u += *c.Logs.UsedBytes
			}
			if u > 10<<20 {
				t.Errorf("container %s used %d bytes, past its own 10Mi limit: the container's limit, not the pod's, was exceeded", c.Name, u)
			}
			figures = append(figures, fmt.Sprintf("%s %.1fMi", c.Name, float64(u)/(1<<20)))
		}
		if e := last.EphemeralStorage; e != nil && e.UsedBytes != nil {
			figures = append(figures, fmt.Sprintf("pod %.1fMi", float64(*e.UsedBytes)/(1<<20)))
		}
	}
	t.Logf("figures: running -> Failed/Evicted %.1fs; last summary before: %s", took.Seconds(), strings.Join(figures, ", "))
}

// TestEvictionAllocatableMemory: crivk's pods are bounded by kubepods'
// memory limit (capacity - --system-reserved, here 1536Mi); with
// --eviction-hard=allocatableMemory.available<X, X 400Mi below what
// kubepods has available (/stats/summary's "pods" system container:
// its limit - its working set), a Burstable pod filling a memory-backed
// emptyDir by 900Mi makes MemoryPressure and is evicted with the kubelet's
// message, while the node's own memory.available stays far above X: the
// signal is the allocatable one. A Guaranteed pod beside it is untouched.
func TestEvictionAllocatableMemory(t *testing.T) {
	const (
		podsLimit = 1536 << 20 // kubepods' memory limit under the test
		margin    = 400        // MiB between what kubepods has available and the threshold
		fill      = 900        // MiB the hog writes
	)
	waitCrivkServing(t)
	t.Cleanup(func() { waitCrivkServing(t) })
	n, err := client.CoreV1().Nodes().Get(testContext(t, 10*time.Second), nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	capMem := n.Status.Capacity[v1.ResourceMemory]
	pods := podsSystemContainer(t)
	if pods == nil || pods.Memory == nil || pods.Memory.WorkingSetBytes == nil || pods.Memory.AvailableBytes == nil {
		t.Fatalf("/stats/summary has no pods system container with available memory: %+v", pods)
	}
	kubepods := filepath.Join("/sys/fs/cgroup/memory", cgroupRoot(), "kubepods")
	limit, err := strconv.ParseUint(readCgroup(t, kubepods, "memory.limit_in_bytes"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if got := *pods.Memory.AvailableBytes + *pods.Memory.WorkingSetBytes; got != limit {
		t.Errorf("pods container: available %d + working set %d = %d, want kubepods' memory.limit_in_bytes %d",
			*pods.Memory.AvailableBytes, *pods.Memory.WorkingSetBytes, got, limit)
	}
	wsMi := int64(*pods.Memory.WorkingSetBytes >> 20)
	threshold := podsLimit>>20 - wsMi - margin
	if threshold < 200 {
		t.Skipf("kubepods already uses %d MiB: too much to run the test", wsMi)
	}
	reserved := capMem.Value() - podsLimit
	t.Logf("node memory capacity %s; kubepods working set %d MiB: --system-reserved=memory=%d --eviction-hard=allocatableMemory.available<%dMi",
		capMem.String(), wsMi, reserved, threshold)
	withCrivkFlags(t, nil, nil, fmt.Sprintf("--system-reserved=memory=%d", reserved),
		fmt.Sprintf("--eviction-hard=allocatableMemory.available<%dMi", threshold), "--eviction-pressure-transition-period=30s")
	// The node stays Ready in the API across the restart: wait for the new
	// crivk itself (its Lease renewed), which sets kubepods' limit first.
	waitCrivkServing(t)
	waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	var got string
	err = wait.PollUntilContextTimeout(context.Background(), poll, 30*time.Second, true, func(context.Context) (bool, error) {
		b, err := os.ReadFile(filepath.Join(kubepods, "memory.limit_in_bytes"))
		got = strings.TrimSpace(string(b))
		return err == nil && got == strconv.Itoa(podsLimit), nil
	})
	if err != nil {
		t.Fatalf("kubepods memory.limit_in_bytes %s, want %d", got, podsLimit)
	}
	ns := newNamespace(t)

	guaranteed := busyboxPod("guaranteed", v1.RestartPolicyAlways, "sleep 3600")
	q := v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")}
	guaranteed.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: q, Limits: q}
	runningPod(t, ns, guaranteed)

	hog := busyboxPod("hog", v1.RestartPolicyAlways, fmt.Sprintf("sleep 2; dd if=/dev/zero of=/scratch/fill bs=1M count=%d; sleep 3600", fill))
	hog.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("32Mi")}
	hog.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	hog.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}}}
	runningPod(t, ns, hog)
	filling := time.Now().Add(2 * time.Second)

	toPressure := waitNodeCondition(t, v1.NodeMemoryPressure, v1.ConditionTrue, 60*time.Second)
	pressureAt := time.Now()
	s := nodeSummary(t)
	nodeAvailMi := int64(-1)
	if s.Node.Memory != nil && s.Node.Memory.AvailableBytes != nil {
		nodeAvailMi = int64(*s.Node.Memory.AvailableBytes >> 20)
	}
	if nodeAvailMi <= threshold+margin {
		t.Errorf("node memory.available %d MiB under the pressure: not far above the threshold %d MiB, the pressure may be the node's", nodeAvailMi, threshold)
	}

	evicted := waitPod(t, ns, "hog", 60*time.Second, "evicted", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	evictedAt := time.Now()
	msg := evicted.Status.Message
	re := regexp.MustCompile(`^The node was low on resource: memory\. Threshold quantity: ` + strconv.FormatInt(threshold, 10) +
		`Mi, available: \d+(Ki|Mi|Gi)?\. Container c was using \d+(Ki|Mi|Gi)?, request is 32Mi, has larger consumption of memory\. $`)
	if evicted.Status.Reason != "Evicted" || !re.MatchString(msg) {
		t.Errorf("evicted hog: reason %q message %q", evicted.Status.Reason, msg)
	}
	if dt := disruptionTarget(evicted); dt == nil || dt.Status != v1.ConditionTrue || dt.Reason != "TerminationByKubelet" || dt.Message != msg {
		t.Errorf("DisruptionTarget %+v, want True TerminationByKubelet with the message", dt)
	}
	if ev := evictedEvent(t, ns, "hog"); ev != msg {
		t.Errorf("Evicted event %q, want the status message", ev)
	}
	if n := evictionsMetric(t, "allocatableMemory.available"); n < 1 {
		t.Errorf("kubelet_evictions{eviction_signal=allocatableMemory.available} = %v", n)
	}
	g, err := client.CoreV1().Pods(ns).Get(testContext(t, 10*time.Second), "guaranteed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !isRunningReady(g) || g.Status.ContainerStatuses[0].RestartCount != 0 || disruptionTarget(g) != nil {
		t.Errorf("the Guaranteed pod was touched: %+v", g.Status)
	}
	t.Logf("figures: dd started -> MemoryPressure=True in the API %.1fs (waited %.1fs); -> hog Failed/Evicted %.1fs after the pressure; "+
		"node memory.available %d MiB under the pressure; message %q; Guaranteed pod Running, 0 restarts",
		pressureAt.Sub(filling).Seconds(), toPressure.Seconds(), evictedAt.Sub(pressureAt).Seconds(), nodeAvailMi, msg)
}

// podsSystemContainer is /stats/summary's "pods" system container, nil if
// none.
func podsSystemContainer(t *testing.T) *statsapi.ContainerStats {
	t.Helper()
	for _, c := range nodeSummary(t).Node.SystemContainers {
		if c.Name == statsapi.SystemContainerPods {
			return &c
		}
	}
	return nil
}
