package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// rl is a cpu and memory resource list; "" leaves one out.
func rl(cpu, mem string) v1.ResourceList {
	l := v1.ResourceList{}
	if cpu != "" {
		l[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		l[v1.ResourceMemory] = resource.MustParse(mem)
	}
	return l
}

// TestPodLevelResources runs pods with pod-level resources
// (spec.resources, PodLevelResources beta and on in v1.35) and reads their
// QoS class in the status and their pod cgroup's values from the host's
// cgroup v1 files, as the node e2e suite's pod_level_resources.go
// (test/e2e/common/node) checks them on cgroup v2: the kubelet's
// ResourceConfigForPod with pod-level values (Guaranteed at pod level with
// containers that set nothing; pod-level requests only, the containers'
// limits summed in the pod cgroup; pod-level limits above requests). A
// container without limits of its own gets the pod-level ones in its own
// cgroup (the kubelet's getCPULimit and getMemoryLimit).
func TestPodLevelResources(t *testing.T) {
	t.Parallel() // pods of its own namespace only: runs beside TestVolumeTokenRefresh's 8-minute wait
	ns := newNamespace(t)
	type ctrCgroup struct{ quota, memLimit string }
	for _, tc := range []struct {
		name       string
		pod        v1.ResourceRequirements
		containers []v1.ResourceRequirements
		qos        v1.PodQOSClass
		// fromSpec: qos and cgroup come from the created pod (podLevelFromSpec).
		fromSpec bool
		cgroup   map[string]string // controller/file -> value
		// c1 is the first container's own cgroup values, when it sets no
		// limits of its own.
		c1 *ctrCgroup
	}{
		{
			name: "pl-guaranteed", qos: v1.PodQOSGuaranteed,
			pod:        v1.ResourceRequirements{Requests: rl("100m", "100Mi"), Limits: rl("100m", "100Mi")},
			containers: []v1.ResourceRequirements{{}, {}},
			cgroup:     map[string]string{"cpu/cpu.shares": "102", "cpu/cpu.cfs_quota_us": "10000", "memory/memory.limit_in_bytes": "104857600"},
			c1:         &ctrCgroup{quota: "10000", memLimit: "104857600"},
		},
		{
			// Pod-level requests only. The v1.37 API server defaults the
			// pod-level limits at creation (PodLevelResourcesFixDefaulting,
			// its PrepareForCreate); the QoS class and the pod cgroup
			// follow the created pod's defaulted spec (fromSpec).
			name: "pl-requests", fromSpec: true,
			pod: v1.ResourceRequirements{Requests: rl("100m", "100Mi")},
			containers: []v1.ResourceRequirements{
				{Requests: rl("30m", "30Mi"), Limits: rl("30m", "30Mi")},
				{Requests: rl("30m", "30Mi"), Limits: rl("30m", "30Mi")},
			},
			cgroup: map[string]string{"cpu/cpu.shares": "102", "cpu/cpu.cfs_quota_us": "6000", "memory/memory.limit_in_bytes": "62914560"},
		},
		{
			name: "pl-burstable", qos: v1.PodQOSBurstable,
			pod:        v1.ResourceRequirements{Requests: rl("50m", "50Mi"), Limits: rl("100m", "100Mi")},
			containers: []v1.ResourceRequirements{{}},
			cgroup:     map[string]string{"cpu/cpu.shares": "51", "cpu/cpu.cfs_quota_us": "10000", "memory/memory.limit_in_bytes": "104857600"},
			c1:         &ctrCgroup{quota: "10000", memLimit: "104857600"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := busyboxPod(tc.name, v1.RestartPolicyAlways, "sleep 3600")
			pod.Spec.Resources = &tc.pod
			base := pod.Spec.Containers[0]
			pod.Spec.Containers = nil
			for i, r := range tc.containers {
				c := *base.DeepCopy()
				if i > 0 {
					c.Name = "c" + string(rune('1'+i))
				}
				c.Resources = r
				pod.Spec.Containers = append(pod.Spec.Containers, c)
			}
			p := runningPod(t, ns, pod)
			if tc.fromSpec {
				tc.qos, tc.cgroup = podLevelFromSpec(t, p)
			}
			if p.Status.QOSClass != tc.qos {
				t.Errorf("status.qosClass %s, want %s", p.Status.QOSClass, tc.qos)
			}
			dirs := podCgroupDirs(tc.qos, p.UID)
			for key, want := range tc.cgroup {
				ctrl, file, _ := strings.Cut(key, "/")
				if got := readCgroup(t, dirs[ctrl], file); got != want {
					t.Errorf("pod cgroup %s/%s = %q, want %q", dirs[ctrl], file, got, want)
				}
			}
			if tc.c1 != nil {
				for file, want := range map[string]string{
					"/sys/fs/cgroup/cpu/cpu.cfs_quota_us":         tc.c1.quota,
					"/sys/fs/cgroup/memory/memory.limit_in_bytes": tc.c1.memLimit,
				} {
					out, stderr, err := execOutput(testContext(t, 30*time.Second), ns, tc.name, "cat", file)
					if err != nil || strings.TrimSpace(out) != want {
						t.Errorf("container c (no limits of its own) %s: %q (%v %s), want the pod-level %s", file, strings.TrimSpace(out), err, stderr, want)
					}
				}
			}
			if err := client.CoreV1().Pods(ns).Delete(testContext(t, 10*time.Second), tc.name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			waitGone(t, ns, tc.name, 60*time.Second)
			if err := wait.PollUntilContextTimeout(context.Background(), poll, 10*time.Second, true, func(context.Context) (bool, error) {
				return anyDirLeft(dirs) == "", nil
			}); err != nil {
				t.Errorf("%s still exists 10 s after the pod object was deleted", anyDirLeft(dirs))
			}
		})
	}
}

// TestPodLevelMemoryRequestResize resizes only the memory request of a
// running container through the resize subresource, as the kubelet's
// computePodResizeAction treats it: with the default resizePolicy the
// container stays (same ID, no restart) and the resize completes
// (allocatedResources and status resources show the new request, the
// conditions go, ResizeStarted and ResizeCompleted); with resizePolicy
// RestartContainer for memory the container is restarted with it.
func TestPodLevelMemoryRequestResize(t *testing.T) {
	t.Parallel() // pods of its own namespace only: runs beside TestVolumeTokenRefresh's 8-minute wait
	ns := newNamespace(t)
	for _, tc := range []struct {
		name    string
		policy  v1.ResourceResizeRestartPolicy
		restart bool
	}{
		{name: "memreq-inplace", policy: v1.NotRequired},
		{name: "memreq-restart", policy: v1.RestartContainer, restart: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := busyboxPod(tc.name, v1.RestartPolicyAlways, "sleep 3600")
			pod.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: rl("100m", "32Mi"), Limits: rl("200m", "64Mi")}
			pod.Spec.Containers[0].ResizePolicy = []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: tc.policy}}
			p := runningPod(t, ns, pod)
			before := p.Status.ContainerStatuses[0]
			start := time.Now()
			resized := patchResize(t, ns, tc.name, `{"requests":{"memory":"48Mi"}}`)
			p = waitPod(t, ns, tc.name, 60*time.Second, "the memory request resized and the conditions cleared", func(p *v1.Pod) bool {
				if len(p.Status.ContainerStatuses) == 0 {
					return false
				}
				cs := p.Status.ContainerStatuses[0]
				return cs.State.Running != nil && cs.AllocatedResources.Memory().Value() == 48<<20 &&
					cs.Resources != nil && cs.Resources.Requests.Memory().Value() == 48<<20 &&
					resizeCondition(p, v1.PodResizePending) == nil && resizeCondition(p, v1.PodResizeInProgress) == nil &&
					(!tc.restart || cs.RestartCount == 1)
			})
			cs := p.Status.ContainerStatuses[0]
			t.Logf("memory request 32Mi -> 48Mi (%s, generation %d) done in %s: container %s restarts %d",
				tc.policy, resized.Generation, time.Since(start).Round(time.Millisecond), cs.ContainerID, cs.RestartCount)
			if tc.restart {
				if cs.ContainerID == before.ContainerID || cs.RestartCount != 1 {
					t.Errorf("container %s restart count %d, want a new container, restart count 1", cs.ContainerID, cs.RestartCount)
				}
				waitEvent(t, ns, tc.name, v1.EventTypeNormal, "Killing", "Container c resize requires restart")
			} else if cs.ContainerID != before.ContainerID || cs.RestartCount != 0 {
				t.Errorf("container %s restart count %d, want %s and 0: resized in place", cs.ContainerID, cs.RestartCount, before.ContainerID)
			}
			if cs.Resources.Limits.Memory().Value() != 64<<20 || cs.Resources.Limits.Cpu().MilliValue() != 200 {
				t.Errorf("status resources limits %v, want the unchanged 200m and 64Mi", cs.Resources.Limits)
			}
			waitEvent(t, ns, tc.name, v1.EventTypeNormal, "ResizeStarted", `Pod resize started: {"containers":[{"name":"c","resources":{"limits":{"cpu":"200m","memory":"64Mi"},"requests":{"cpu":"100m","memory":"48Mi"}}}],"generation":`)
			waitEvent(t, ns, tc.name, v1.EventTypeNormal, "ResizeCompleted", "Pod resize completed: ")
		})
	}
}

// podLevelFromSpec is the QoS class and the pod cgroup's values that the
// created pod's pod-level resources (as the API server defaulted them)
// give: Guaranteed when its requests equal its limits for CPU and memory,
// else Burstable; cpu.shares from the CPU request, the quota (100 ms
// period) from the CPU limit, the memory limit from the memory limit.
func podLevelFromSpec(t *testing.T, p *v1.Pod) (v1.PodQOSClass, map[string]string) {
	t.Helper()
	r := p.Spec.Resources
	if r == nil || r.Limits.Cpu().IsZero() || r.Limits.Memory().IsZero() {
		t.Fatalf("the created pod's pod-level resources %+v: want limits defaulted by the API server", r)
	}
	t.Logf("the created pod's pod-level resources: requests %v limits %v", r.Requests, r.Limits)
	qos := v1.PodQOSBurstable
	if r.Requests.Cpu().Cmp(*r.Limits.Cpu()) == 0 && r.Requests.Memory().Cmp(*r.Limits.Memory()) == 0 {
		qos = v1.PodQOSGuaranteed
	}
	return qos, map[string]string{
		"cpu/cpu.shares":               fmt.Sprint(r.Requests.Cpu().MilliValue() * 1024 / 1000),
		"cpu/cpu.cfs_quota_us":         fmt.Sprint(r.Limits.Cpu().MilliValue() * 100),
		"memory/memory.limit_in_bytes": fmt.Sprint(r.Limits.Memory().Value()),
	}
}
