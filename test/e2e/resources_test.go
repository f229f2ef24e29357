package e2e

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
