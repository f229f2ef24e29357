package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestContainerLimitsReachTheRuntime reads the container's own cgroup
// files (runc mounts the container's cgroup at /sys/fs/cgroup/<controller>
// on cgroup v1) through exec: the memory limit, CPU shares and CFS quota
// are the kubelet's values for the pod's limits.
func TestContainerLimitsReachTheRuntime(t *testing.T) {
	ns := newNamespace(t)
	pod := busyboxPod("limits", v1.RestartPolicyNever, "sleep 3600")
	pod.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("64Mi")},
	}
	p := runningPod(t, ns, pod)
	if p.Status.QOSClass != v1.PodQOSBurstable {
		t.Errorf("QoS class %q, want Burstable", p.Status.QOSClass)
	}
	for file, want := range map[string]string{
		"/sys/fs/cgroup/memory/memory.limit_in_bytes": "67108864",
		"/sys/fs/cgroup/cpu/cpu.shares":               "256",
		"/sys/fs/cgroup/cpu/cpu.cfs_quota_us":         "50000",
		"/sys/fs/cgroup/cpu/cpu.cfs_period_us":        "100000",
	} {
		out, stderr, err := execOutput(testContext(t, 30*time.Second), ns, "limits", "cat", file)
		if err != nil || strings.TrimSpace(out) != want {
			t.Errorf("%s: %q (%v %s), want %s", file, strings.TrimSpace(out), err, stderr, want)
		}
	}
}

// TestMemoryLimitOOMKills runs a container that doubles a string until it
// passes its 16Mi limit: the kernel kills it and the status says
// OOMKilled with exit code 137, within 30 s.
func TestMemoryLimitOOMKills(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	pod := busyboxPod("oom", v1.RestartPolicyNever, "x=a; while true; do x=$x$x; done")
	pod.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("16Mi")},
	}
	createPod(t, ns, pod)
	start := time.Now()
	p := waitPod(t, ns, "oom", 30*time.Second, "the container terminated", func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Terminated != nil
	})
	term := p.Status.ContainerStatuses[0].State.Terminated
	t.Logf("16Mi container terminated after %s: reason %s, exit code %d, phase %s", time.Since(start).Round(time.Millisecond), term.Reason, term.ExitCode, p.Status.Phase)
	if term.Reason != "OOMKilled" || term.ExitCode != 137 {
		t.Errorf("terminated %+v, want OOMKilled with exit code 137", term)
	}
}

// TestAdmissionRejects binds pods straight to the node (spec.nodeName,
// as a scheduler would not place them): one asking for 10Ti of memory and
// one whose nodeSelector the node does not match, one setting an unsafe
// sysctl the node does not allow. Each goes Failed with
// the kubelet's reason and message and a Warning event, and no sandbox of
// it is ever created.
func TestAdmissionRejects(t *testing.T) {
	ns := newNamespace(t)
	huge := busyboxPod("huge", v1.RestartPolicyNever, "sleep 3600")
	huge.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("10Ti")}
	elsewhere := busyboxPod("elsewhere", v1.RestartPolicyNever, "sleep 3600")
	elsewhere.Spec.NodeSelector = map[string]string{"disktype": "does-not-exist"}
	unsafe := busyboxPod("unsafe-sysctl", v1.RestartPolicyNever, "sleep 3600")
	unsafe.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel.msgmax", Value: "10000"}}}
	for _, tc := range []struct {
		pod     *v1.Pod
		reason  string
		message string
	}{
		{huge, "OutOfmemory", "Pod was rejected: Node didn't have enough resource: memory, requested: 10995116277760"},
		{elsewhere, "NodeAffinity", "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"},
		{unsafe, "SysctlForbidden", `Pod was rejected: forbidden sysctl: "kernel.msgmax" not allowlisted`},
	} {
		tc.pod.Spec.NodeName = nodeName
		created := createPod(t, ns, tc.pod)
		p := waitPod(t, ns, tc.pod.Name, 30*time.Second, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
		t.Logf("%s: phase %s, reason %s, message %q", tc.pod.Name, p.Status.Phase, p.Status.Reason, p.Status.Message)
		if p.Status.Reason != tc.reason || !strings.HasPrefix(p.Status.Message, tc.message) {
			t.Errorf("%s: reason %q message %q, want %s / %q", tc.pod.Name, p.Status.Reason, p.Status.Message, tc.reason, tc.message)
		}
		if sbs, cs := runtimeObjects(t, created.UID); sbs != 0 || cs != 0 {
			t.Errorf("%s: %d sandboxes and %d containers in the runtime for a rejected pod", tc.pod.Name, sbs, cs)
		}
		waitEvent(t, ns, tc.pod.Name, v1.EventTypeWarning, tc.reason, strings.TrimPrefix(tc.message, "Pod was rejected: "))
		if err := client.CoreV1().Pods(ns).Delete(testContext(t, 10*time.Second), tc.pod.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitGone(t, ns, tc.pod.Name, 30*time.Second)
	}
}

// TestResourceMetricsEndpoint reads /metrics/resource through the API
// server's node proxy (as metrics-server does) while a pod burns CPU: its
// container's CPU time and working set are there and not zero, and so are
// the node's.
func TestResourceMetricsEndpoint(t *testing.T) {
	ns := newNamespace(t)
	runningPod(t, ns, busyboxPod("busy", v1.RestartPolicyNever, "while true; do :; done"))
	var body string
	waitPod(t, ns, "busy", 60*time.Second, "its CPU time in /metrics/resource", func(*v1.Pod) bool {
		raw, err := client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", nodeName, "proxy/metrics/resource").DoRaw(testContext(t, 10*time.Second))
		if err != nil {
			return false
		}
		body = string(raw)
		return metricValue(body, `container_cpu_usage_seconds_total{container="c",namespace="`+ns+`",pod="busy"}`) > 0
	})
	for _, series := range []string{
		`container_memory_working_set_bytes{container="c",namespace="` + ns + `",pod="busy"}`,
		`pod_cpu_usage_seconds_total{namespace="` + ns + `",pod="busy"}`,
		"node_cpu_usage_seconds_total",
		"node_memory_working_set_bytes",
	} {
		if v := metricValue(body, series); v <= 0 {
			t.Errorf("%s = %v, want > 0", series, v)
		}
	}
	if metricValue(body, "resource_scrape_error") != 0 {
		t.Errorf("resource_scrape_error is not 0")
	}
}

// metricValue is the value of the series named exactly so (-1 if absent).
func metricValue(body, series string) float64 {
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, series+" ")
		if !ok {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(strings.Fields(rest)[0], &v); err == nil {
			return v
		}
	}
	return -1
}

// TestStatsSummary reads /stats/summary through the node proxy: the node
// has CPU, memory and filesystem figures, and a running pod its
// containers' CPU and working set.
func TestStatsSummary(t *testing.T) {
	ns := newNamespace(t)
	// 1 MiB written to an emptyDir volume before the CPU loop.
	pod := busyboxPod("summarized", v1.RestartPolicyNever, "dd if=/dev/zero of=/cache/f bs=1024 count=1024 && while true; do :; done")
	pod.Spec.Volumes = []v1.Volume{{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "cache", MountPath: "/cache"}}
	runningPod(t, ns, pod)
	var sum statsSummary
	// Volumes are measured at most once a minute (the kubelet's
	// --volume-stats-agg-period): a first measure taken before dd ended is
	// replaced within 60 s.
	waitPod(t, ns, "summarized", 90*time.Second, "its stats in /stats/summary", func(*v1.Pod) bool {
		raw, err := client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", nodeName, "proxy/stats/summary").DoRaw(testContext(t, 10*time.Second))
		if err != nil || json.Unmarshal(raw, &sum) != nil {
			return false
		}
		for _, p := range sum.Pods {
			if p.PodRef.Namespace == ns && p.CPU != nil && p.CPU.UsageCoreNanoSeconds > 0 &&
				cacheUsed(p.VolumeStats) >= 1<<20 {
				return true
			}
		}
		return false
	})
	if sum.Node.NodeName != nodeName || sum.Node.CPU == nil || sum.Node.CPU.UsageCoreNanoSeconds == 0 ||
		sum.Node.Memory == nil || sum.Node.Memory.WorkingSetBytes == 0 || sum.Node.Fs == nil || sum.Node.Fs.CapacityBytes == 0 {
		t.Errorf("node stats incomplete: %+v", sum.Node)
	}
	for _, p := range sum.Pods {
		if p.PodRef.Namespace == ns && (len(p.Containers) != 1 || p.Containers[0].Name != "c" || p.Memory == nil || p.Memory.WorkingSetBytes == 0) {
			t.Errorf("pod stats incomplete: %+v", p)
		}
		// The pod's network, from its sandbox in its pod cgroup.
		if p.PodRef.Namespace == ns && (p.Network == nil || p.Network.Name != "eth0" || p.Network.RxBytes == nil) {
			t.Errorf("pod network stats %+v, want eth0 with its byte counts", p.Network)
		}
		// The emptyDir volume, measured as the kubelet's du-based metrics.
		// (beside the service account token's projected volume).
		if p.PodRef.Namespace == ns {
			found := false
			for _, v := range p.VolumeStats {
				if v.Name == "cache" && v.UsedBytes >= 1<<20 && v.CapacityBytes > 0 && v.InodesUsed >= 2 {
					found = true
					t.Logf("volume %s: %d bytes, %d inodes used, capacity %d", v.Name, v.UsedBytes, v.InodesUsed, v.CapacityBytes)
				}
			}
			if !found {
				t.Errorf("volume stats %+v, want cache with at least 1 MiB and 2 inodes used and its filesystem's capacity", p.VolumeStats)
			}
		}
	}
}

// statsSummary is the part of the kubelet's Summary this test reads.
type statsSummary struct {
	Node struct {
		NodeName string `json:"nodeName"`
		CPU      *struct {
			UsageCoreNanoSeconds uint64 `json:"usageCoreNanoSeconds"`
		} `json:"cpu"`
		Memory *struct {
			WorkingSetBytes uint64 `json:"workingSetBytes"`
		} `json:"memory"`
		Fs *struct {
			CapacityBytes uint64 `json:"capacityBytes"`
		} `json:"fs"`
	} `json:"node"`
	Pods []struct {
		PodRef struct {
			Name, Namespace string
		} `json:"podRef"`
		Containers []struct {
			Name string `json:"name"`
		} `json:"containers"`
		CPU *struct {
			UsageCoreNanoSeconds uint64 `json:"usageCoreNanoSeconds"`
		} `json:"cpu"`
		Memory *struct {
			WorkingSetBytes uint64 `json:"workingSetBytes"`
		} `json:"memory"`
		VolumeStats []volumeStat `json:"volume"`
		Network     *struct {
			Name    string  `json:"name"`
			RxBytes *uint64 `json:"rxBytes"`
		} `json:"network"`
	} `json:"pods"`
}

// TestPodScheduledWithoutScheduler binds a pod by spec.nodeName, which the
// scheduler never sees: the node itself reports PodScheduled=True, as the
// kubelet's status generation does.
func TestPodScheduledWithoutScheduler(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	pod := busyboxPod("bound", v1.RestartPolicyNever, "sleep 3600")
	pod.Spec.NodeName = nodeName
	p := runningPod(t, ns, pod)
	var found *v1.PodCondition
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == v1.PodScheduled {
			found = &p.Status.Conditions[i]
		}
	}
	if found == nil || found.Status != v1.ConditionTrue || found.LastTransitionTime.IsZero() {
		t.Errorf("PodScheduled %+v, want True with a transition time; conditions %+v", found, p.Status.Conditions)
	}
}

// TestSafeSysctlApplied runs a pod setting a safe sysctl, slash-separated
// as the API allows: the runtime receives it and the container sees the
// value in its own namespace.
func TestSafeSysctlApplied(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	pod := busyboxPod("safe-sysctl", v1.RestartPolicyNever, "cat /proc/sys/kernel/shm_rmid_forced /proc/sys/net/ipv4/ip_local_port_range")
	pod.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{
		{Name: "kernel.shm_rmid_forced", Value: "1"},
		{Name: "net/ipv4/ip_local_port_range", Value: "20000 30000"},
	}}
	createPod(t, ns, pod)
	waitPod(t, ns, pod.Name, 60*time.Second, "Succeeded", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
	out, err := podLogs(testContext(t, 10*time.Second), ns, pod.Name, &v1.PodLogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(out); len(got) != 3 || got[0] != "1" || got[1] != "20000" || got[2] != "30000" {
		t.Errorf("container saw %q, want 1 / 20000 30000", out)
	}
}

// volumeStat is one of a pod's volumes in the Summary.
type volumeStat struct {
	Name          string `json:"name"`
	UsedBytes     uint64 `json:"usedBytes"`
	InodesUsed    uint64 `json:"inodesUsed"`
	CapacityBytes uint64 `json:"capacityBytes"`
}

// cacheUsed is the used bytes of the volume named cache (0: none).
func cacheUsed(vs []volumeStat) uint64 {
	for _, v := range vs {
		if v.Name == "cache" {
			return v.UsedBytes
		}
	}
	return 0
}
