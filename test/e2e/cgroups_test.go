package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// cgroupRoot is crivk's --cgroup-root in the local cluster
// (hack/run-crivk.sh): its own, beside any kubelet's /kubepods.
func cgroupRoot() string {
	if r := os.Getenv("CRIVK_CGROUP_ROOT"); r != "" {
		return r
	}
	return "/crivk"
}

// podCgroupDirs are a pod's cgroup directories on this cgroup v1 machine,
// one per hierarchy the test reads.
func podCgroupDirs(qos v1.PodQOSClass, uid types.UID) map[string]string {
	class := map[v1.PodQOSClass]string{v1.PodQOSGuaranteed: "", v1.PodQOSBurstable: "burstable", v1.PodQOSBestEffort: "besteffort"}[qos]
	dirs := map[string]string{}
	for _, ctrl := range []string{"cpu", "memory", "pids"} {
		dirs[ctrl] = filepath.Join("/sys/fs/cgroup", ctrl, cgroupRoot(), "kubepods", class, "pod"+string(uid))
	}
	return dirs
}

func readCgroup(t *testing.T, dir, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Errorf("reading %s: %v", filepath.Join(dir, file), err)
		return ""
	}
	return strings.TrimSpace(string(b))
}

// anyDirLeft returns one of dirs that still exists, or "".
func anyDirLeft(dirs map[string]string) string {
	for _, d := range dirs {
		if _, err := os.Stat(d); err == nil {
			return d
		}
	}
	return ""
}

// TestPodCgroups reads the pod cgroups crivk made from the host's cgroup
// files, one pod per QoS class, checks that the containers run inside
// them, deletes the pods and checks that no pod cgroup is left 10 s after
// the objects are gone (crivk removes it before deleting the object).
func TestPodCgroups(t *testing.T) {
	t.Parallel() // pods of its own namespace only: runs beside TestVolumeTokenRefresh's 8-minute wait
	ns := newNamespace(t)
	guaranteed := busyboxPod("guaranteed", v1.RestartPolicyNever, "sleep 3600")
	guaranteed.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("64Mi")},
	}
	burstable := busyboxPod("burstable", v1.RestartPolicyNever, "sleep 3600")
	burstable.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi")},
	}
	besteffort := busyboxPod("besteffort", v1.RestartPolicyNever, "sleep 3600")
	want := map[string]map[string]string{ // pod -> controller/file -> value
		"guaranteed": {"cpu/cpu.shares": "512", "cpu/cpu.cfs_quota_us": "50000", "cpu/cpu.cfs_period_us": "100000", "memory/memory.limit_in_bytes": "67108864"},
		// Every container has a memory limit, not a CPU limit: no quota.
		"burstable":  {"cpu/cpu.shares": "256", "cpu/cpu.cfs_quota_us": "-1", "memory/memory.limit_in_bytes": "134217728"},
		"besteffort": {"cpu/cpu.shares": "2", "cpu/cpu.cfs_quota_us": "-1"},
	}
	all := map[string]map[string]string{}
	var pods []*v1.Pod
	for _, pod := range []*v1.Pod{guaranteed, burstable, besteffort} {
		p := runningPod(t, ns, pod)
		pods = append(pods, p)
		dirs := podCgroupDirs(p.Status.QOSClass, p.UID)
		all[p.Name] = dirs
		for key, w := range want[p.Name] {
			ctrl, file, _ := strings.Cut(key, "/")
			if got := readCgroup(t, dirs[ctrl], file); got != w {
				t.Errorf("%s (%s): %s/%s = %q, want %q", p.Name, p.Status.QOSClass, dirs[ctrl], file, got, w)
			}
		}
		// The container runs below its pod cgroup in every hierarchy.
		out, stderr, err := execOutput(testContext(t, 30*time.Second), ns, p.Name, "cat", "/proc/self/cgroup")
		if err != nil {
			t.Fatalf("%s: reading /proc/self/cgroup: %v %s", p.Name, err, stderr)
		}
		class := map[v1.PodQOSClass]string{v1.PodQOSGuaranteed: "", v1.PodQOSBurstable: "burstable/", v1.PodQOSBestEffort: "besteffort/"}[p.Status.QOSClass]
		prefix := cgroupRoot() + "/kubepods/" + class + "pod" + string(p.UID) + "/"
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if strings.Contains(line, ":memory:") || strings.Contains(line, ":cpu,") || strings.HasSuffix(strings.SplitN(line, ":", 3)[1], "cpu") {
				if !strings.Contains(line, prefix) {
					t.Errorf("%s: %q is not below %s", p.Name, line, prefix)
				}
			}
		}
	}
	for name, dirs := range all {
		t.Logf("%s: pod cgroup %s", name, dirs["memory"])
	}
	for _, p := range pods {
		if err := client.CoreV1().Pods(ns).Delete(testContext(t, 10*time.Second), p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pods {
		waitGone(t, ns, p.Name, 60*time.Second)
		gone := time.Now()
		err := wait.PollUntilContextTimeout(context.Background(), poll, 10*time.Second, true, func(context.Context) (bool, error) {
			return anyDirLeft(all[p.Name]) == "", nil
		})
		if err != nil {
			t.Errorf("%s: %s still exists 10 s after the pod object was deleted", p.Name, anyDirLeft(all[p.Name]))
		} else {
			t.Logf("%s: no cgroup left %s after the object was gone", p.Name, time.Since(gone).Round(time.Millisecond))
		}
	}
}

// TestPodCgroupsCleanedAfterKill9 kills crivk with SIGKILL while pods run,
// deletes them (they stay Terminating: nobody runs the node) and plants
// the cgroup of a pod that never existed (what an agent killed between
// removing a sandbox and its cgroup leaves); after crivk's restart the
// pods are stopped and gone and so are all those cgroups.
func TestPodCgroupsCleanedAfterKill9(t *testing.T) {
	ns := newNamespace(t)
	var pods []*v1.Pod
	for _, name := range []string{"k1", "k2", "k3"} {
		pods = append(pods, runningPod(t, ns, busyboxPod(name, v1.RestartPolicyAlways, "sleep 3600")))
	}
	killCrivkFor(t)
	for _, p := range pods {
		if err := client.CoreV1().Pods(ns).Delete(testContext(t, 10*time.Second), p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	stray := podCgroupDirs(v1.PodQOSBestEffort, "e2e-never-existed")
	for _, d := range stray {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := startCrivkFor(t); err != nil {
		t.Fatalf("restarting crivk: %v", err)
	}
	start := time.Now()
	for _, p := range pods {
		waitGone(t, ns, p.Name, 90*time.Second)
	}
	t.Logf("all 3 pods gone %s after the restart", time.Since(start).Round(time.Millisecond))
	// The stopped containers and sandboxes are removed just after the
	// object goes (as the kubelet); the cgroups before it.
	left := func() string {
		for _, p := range pods {
			if d := anyDirLeft(podCgroupDirs(p.Status.QOSClass, p.UID)); d != "" {
				return d
			}
			if sb, c := runtimeObjects(t, p.UID); sb != 0 || c != 0 {
				return fmt.Sprintf("%s: %d sandboxes and %d containers", p.Name, sb, c)
			}
		}
		return anyDirLeft(stray)
	}
	err := wait.PollUntilContextTimeout(context.Background(), poll, 10*time.Second, true, func(context.Context) (bool, error) {
		return left() == "", nil
	})
	if err != nil {
		t.Errorf("%s still exists 10 s after the pods were gone", left())
	}
}

// TestNodeAllocatable: the Node's allocatable is its capacity less the
// hard eviction thresholds of memory.available and nodefs.available, as
// /configz reports them (hack/run-crivk.sh: 100Mi and 2Gi), no reservation
// being configured here.
func TestNodeAllocatable(t *testing.T) {
	ctx := testContext(t, 10*time.Second)
	n, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := testutil.Configz(ctx, client, nodeName)
	if err != nil {
		t.Fatalf("/configz: %v", err)
	}
	hard, _ := kc["evictionHard"].(map[string]any)
	// threshold is a signal's hard threshold out of capacity: a quantity
	// or a percentage of it.
	threshold := func(signal string, capacity int64) int64 {
		v, _ := hard[signal].(string)
		if pct, ok := strings.CutSuffix(v, "%"); ok {
			f, err := strconv.ParseFloat(pct, 64)
			if err != nil {
				t.Fatalf("/configz evictionHard %s = %q: %v", signal, v, err)
			}
			return int64(float64(capacity) * f / 100)
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			t.Fatalf("/configz evictionHard %s = %q: %v", signal, v, err)
		}
		return q.Value()
	}
	capMem, allocMem := n.Status.Capacity[v1.ResourceMemory], n.Status.Allocatable[v1.ResourceMemory]
	if d, want := capMem.Value()-allocMem.Value(), threshold("memory.available", capMem.Value()); d != want || want == 0 {
		t.Errorf("memory capacity %s allocatable %s: difference %d, want memory.available's %q (%d)", capMem.String(), allocMem.String(), d, hard["memory.available"], want)
	}
	capFS, allocFS := n.Status.Capacity[v1.ResourceEphemeralStorage], n.Status.Allocatable[v1.ResourceEphemeralStorage]
	if d, want := capFS.Value()-allocFS.Value(), threshold("nodefs.available", capFS.Value()); d < want-1 || d > want+1 || want == 0 {
		t.Errorf("ephemeral-storage capacity %d allocatable %d: difference %d, want nodefs.available's %q (%d)", capFS.Value(), allocFS.Value(), d, hard["nodefs.available"], want)
	}
	capCPU, allocCPU := n.Status.Capacity[v1.ResourceCPU], n.Status.Allocatable[v1.ResourceCPU]
	if capCPU.Cmp(allocCPU) != 0 {
		t.Errorf("cpu capacity %s allocatable %s, want equal", capCPU.String(), allocCPU.String())
	}
}
