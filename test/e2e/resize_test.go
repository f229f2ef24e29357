package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// resizeCondition returns the pod's condition of type typ, or nil.
func resizeCondition(p *v1.Pod, typ v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// patchResize patches the pod's only container's resources through the
// resize subresource, as `kubectl patch --subresource resize` does.
func patchResize(t *testing.T, ns, name, resources string) *v1.Pod {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"containers":[{"name":"c","resources":%s}]}}`, resources)
	p, err := client.CoreV1().Pods(ns).Patch(testContext(t, 30*time.Second), name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "resize")
	if err != nil {
		t.Fatalf("resizing pod %s/%s: %v", ns, name, err)
	}
	return p
}

// TestInPlaceResize resizes a running Burstable pod through the resize
// subresource (GA in v1.35): its CPU request and limit and its memory
// limit grow in place. The API server accepts the resize (it refuses one
// of a pod whose running containers report no resources); the container
// is not restarted (same container ID, restart count 0); its status'
// resources and allocatedResources show the new values; the container's
// own cgroup and the pod cgroup hold them; PodResizePending and
// PodResizeInProgress are gone once done, with the kubelet's ResizeStarted
// and ResizeCompleted events. Then a resize asking for more CPU than the
// node has is refused by the API server (v1.37's PodResizeValidator
// admission; since v1.36 the kubelet has no Infeasible verdict of its own
// for it), and the container keeps its allocation.
func TestInPlaceResize(t *testing.T) {
	ns := newNamespace(t)
	pod := busyboxPod("resize", v1.RestartPolicyAlways, "sleep 3600")
	pod.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m"), v1.ResourceMemory: resource.MustParse("64Mi")},
	}
	p := runningPod(t, ns, pod)
	before := p.Status.ContainerStatuses[0]
	if before.Resources == nil || before.AllocatedResources.Cpu().MilliValue() != 100 {
		t.Fatalf("before the resize: resources %v, allocatedResources %v; want both reported", before.Resources, before.AllocatedResources)
	}

	start := time.Now()
	resized := patchResize(t, ns, "resize", `{"requests":{"cpu":"200m"},"limits":{"cpu":"400m","memory":"96Mi"}}`)
	p = waitPod(t, ns, "resize", 60*time.Second, "the resize applied and its conditions cleared", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses[0]
		return cs.Resources != nil && cs.Resources.Limits.Cpu().MilliValue() == 400 && cs.Resources.Requests.Cpu().MilliValue() == 200 &&
			cs.Resources.Limits.Memory().Value() == 96<<20 && cs.AllocatedResources.Cpu().MilliValue() == 200 &&
			resizeCondition(p, v1.PodResizePending) == nil && resizeCondition(p, v1.PodResizeInProgress) == nil
	})
	t.Logf("resize to 200m/400m CPU, 96Mi applied in %s (generation %d)", time.Since(start).Round(time.Millisecond), resized.Generation)
	cs := p.Status.ContainerStatuses[0]
	if cs.ContainerID != before.ContainerID || cs.RestartCount != 0 {
		t.Errorf("container %s restart count %d, want %s and 0: resized in place", cs.ContainerID, cs.RestartCount, before.ContainerID)
	}
	if cs.AllocatedResources.Memory().Value() != 32<<20 {
		t.Errorf("allocatedResources memory %s, want 32Mi (the request did not change)", cs.AllocatedResources.Memory())
	}
	// The container's own cgroup (runc mounts it at /sys/fs/cgroup/<controller>
	// on cgroup v1) and the pod cgroup on the host.
	for file, want := range map[string]string{
		"/sys/fs/cgroup/cpu/cpu.cfs_quota_us":         "40000",
		"/sys/fs/cgroup/cpu/cpu.shares":               "204",
		"/sys/fs/cgroup/memory/memory.limit_in_bytes": "100663296",
	} {
		out, stderr, err := execOutput(testContext(t, 30*time.Second), ns, "resize", "cat", file)
		if err != nil || strings.TrimSpace(out) != want {
			t.Errorf("container %s: %q (%v %s), want %s", file, strings.TrimSpace(out), err, stderr, want)
		}
	}
	dirs := podCgroupDirs(v1.PodQOSBurstable, p.UID)
	for _, f := range []struct{ dir, file, want string }{
		{dirs["cpu"], "cpu.cfs_quota_us", "40000"},
		{dirs["cpu"], "cpu.shares", "204"},
		{dirs["memory"], "memory.limit_in_bytes", "100663296"},
	} {
		if got := readCgroup(t, f.dir, f.file); got != f.want {
			t.Errorf("pod cgroup %s: %s, want %s", filepath.Join(f.dir, f.file), got, f.want)
		}
	}
	waitEvent(t, ns, "resize", v1.EventTypeNormal, "ResizeStarted", `Pod resize started: {"containers":[{"name":"c","resources":{"limits":{"cpu":"400m","memory":"96Mi"},"requests":{"cpu":"200m","memory":"32Mi"}}}],"generation":`)
	waitEvent(t, ns, "resize", v1.EventTypeNormal, "ResizeCompleted", "Pod resize completed: ")

	// More CPU than the node has: since v1.37 the API server refuses the
	// resize itself (its PodResizeValidator admission, against the Node's
	// allocatable); the node would only defer it (admission's verdict,
	// lifecycle/allocation's Decide, unit-tested); the allocation stays.
	node, err := client.CoreV1().Nodes().Get(testContext(t, 10*time.Second), nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alloc := node.Status.Allocatable.Cpu().MilliValue()
	huge := alloc + 1000
	patch := fmt.Sprintf(`{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"%dm"},"limits":{"cpu":"%dm"}}}]}}`, huge, huge)
	_, err = client.CoreV1().Pods(ns).Patch(testContext(t, 30*time.Second), "resize", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "resize")
	wantMsg := fmt.Sprintf("node didn't have enough allocatable resources: cpu, requested: %d, allocatable: %d", huge, alloc)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), wantMsg) {
		t.Errorf("a resize beyond the node's allocatable: %v, want Forbidden %q", err, wantMsg)
	}
	p, err = client.CoreV1().Pods(ns).Get(testContext(t, 10*time.Second), "resize", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := resizeCondition(p, v1.PodResizePending); c != nil {
		t.Errorf("PodResizePending %s %s %q after a refused resize", c.Status, c.Reason, c.Message)
	}
	cs = p.Status.ContainerStatuses[0]
	if cs.AllocatedResources.Cpu().MilliValue() != 200 || cs.Resources.Limits.Cpu().MilliValue() != 400 || cs.ContainerID != before.ContainerID {
		t.Errorf("refused resize: allocatedResources %v resources %v container %s; want the previous allocation, same container",
			cs.AllocatedResources, cs.Resources, cs.ContainerID)
	}
	out, _, err := execOutput(testContext(t, 30*time.Second), ns, "resize", "cat", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
	if err != nil || strings.TrimSpace(out) != "40000" {
		t.Errorf("cpu.cfs_quota_us %q (%v) after the refused resize, want 40000 unchanged", strings.TrimSpace(out), err)
	}
}
