package cri

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// sized is a container with a CPU request and limit and a memory limit
// (request = limit for memory).
func sized(name, cpuReq, cpuLim, mem string) v1.Container {
	return v1.Container{Name: name, Image: "busybox:1.36", Resources: v1.ResourceRequirements{
		Requests: testutil.Resources(cpuReq, mem), Limits: testutil.Resources(cpuLim, mem)}}
}

// withValues is a running container whose runtime reports those values.
func withValues(c ContainerStatus, shares, quota, mem int64) ContainerStatus {
	c.Resources = &runtimeapi.LinuxContainerResources{CpuShares: shares, CpuQuota: quota, CpuPeriod: quotaPeriod, MemoryLimitInBytes: mem}
	return c
}

// memReq is c with its memory request set to q.
func memReq(c v1.Container, q string) v1.Container {
	c = *c.DeepCopy()
	c.Resources.Requests[v1.ResourceMemory] = resource.MustParse(q)
	return c
}

// actuated is c with an actuated memory request (its annotation's).
func actuated(c ContainerStatus, memRequest int64) ContainerStatus {
	c.MemoryRequest, c.HasMemoryRequest = memRequest, true
	return c
}

func restartOn(c v1.Container, res v1.ResourceName) v1.Container {
	c.ResizePolicy = append(c.ResizePolicy, v1.ContainerResizePolicy{ResourceName: res, RestartPolicy: v1.RestartContainer})
	return c
}

const mi = 1 << 20

// TestComputePodActionsResize: the plan's in-place resize, the kubelet's
// computePodResizeAction compared with the runtime's values: which
// containers are updated for which resource, decreases first, and which
// are restarted instead (resizePolicy RestartContainer) with the kubelet's
// Killing message.
func TestComputePodActionsResize(t *testing.T) {
	type wantPlan struct {
		cpu, memory []string // containers updated, in order
		kill        map[string]string
		start       []int
		sidecars    []int
		podCgroup   bool
	}
	// a: 100m/200m CPU, 64Mi: shares 102, quota 20000.
	a := sized("a", "100m", "200m", "64Mi")
	b := sized("b", "100m", "200m", "64Mi")
	asIs := func(name string) ContainerStatus { return withValues(running(name), 102, 20000, 64*mi) }
	tests := map[string]struct {
		containers []v1.Container
		status     *PodStatus
		want       wantPlan
	}{
		"the runtime has the allocation: nothing to do": {
			containers: []v1.Container{a, b},
			status:     readyStatus(asIs("a"), asIs("b")),
		},
		"CPU limit and request up: updated in place for cpu": {
			containers: []v1.Container{sized("a", "500m", "1", "64Mi"), b},
			status:     readyStatus(asIs("a"), asIs("b")),
			want:       wantPlan{cpu: []string{"a"}},
		},
		"CPU request alone (shares) up": {
			containers: []v1.Container{sized("a", "150m", "200m", "64Mi")},
			status:     readyStatus(asIs("a")),
			want:       wantPlan{cpu: []string{"a"}},
		},
		"memory up for a, down for b: b first": {
			containers: []v1.Container{sized("a", "100m", "200m", "128Mi"), sized("b", "100m", "200m", "32Mi")},
			status:     readyStatus(asIs("a"), asIs("b")),
			want:       wantPlan{memory: []string{"b", "a"}},
		},
		"CPU down for b, up for a; memory up for a": {
			containers: []v1.Container{sized("a", "100m", "400m", "128Mi"), sized("b", "100m", "100m", "64Mi")},
			status:     readyStatus(asIs("a"), asIs("b")),
			want:       wantPlan{cpu: []string{"b", "a"}, memory: []string{"a"}},
		},
		"resizePolicy RestartContainer for memory, memory changes: killed and started": {
			containers: []v1.Container{restartOn(sized("a", "100m", "200m", "128Mi"), v1.ResourceMemory)},
			status:     readyStatus(asIs("a")),
			want:       wantPlan{kill: map[string]string{"a-0": "Container a resize requires restart"}, start: []int{0}, podCgroup: true},
		},
		"resizePolicy RestartContainer for memory, only CPU changes: in place": {
			containers: []v1.Container{restartOn(sized("a", "100m", "300m", "64Mi"), v1.ResourceMemory)},
			status:     readyStatus(asIs("a")),
			want:       wantPlan{cpu: []string{"a"}},
		},
		// The memory request alone (the kubelet's resizeMemReq): no runtime
		// value, compared with the request the container has actuated.
		"memory request alone down: updated in place for memory": {
			containers: []v1.Container{memReq(a, "32Mi")},
			status:     readyStatus(actuated(asIs("a"), 64*mi)),
			want:       wantPlan{memory: []string{"a"}},
		},
		"memory request alone, resizePolicy RestartContainer for memory: killed and started": {
			containers: []v1.Container{restartOn(memReq(a, "32Mi"), v1.ResourceMemory)},
			status:     readyStatus(actuated(asIs("a"), 64*mi)),
			want:       wantPlan{kill: map[string]string{"a-0": "Container a resize requires restart"}, start: []int{0}, podCgroup: true},
		},
		"memory request alone, resizePolicy RestartContainer for cpu: in place": {
			containers: []v1.Container{restartOn(memReq(a, "32Mi"), v1.ResourceCPU)},
			status:     readyStatus(actuated(asIs("a"), 64*mi)),
			want:       wantPlan{memory: []string{"a"}},
		},
		"memory request already actuated: nothing to do": {
			containers: []v1.Container{restartOn(memReq(a, "32Mi"), v1.ResourceMemory)},
			status:     readyStatus(actuated(asIs("a"), 32*mi)),
		},
		"a container without a recorded memory request counts as allocated": {
			containers: []v1.Container{restartOn(memReq(a, "32Mi"), v1.ResourceMemory)},
			status:     readyStatus(asIs("a")),
		},
		"the runtime reports no resources: nothing compared, nothing done": {
			containers: []v1.Container{sized("a", "500m", "1", "64Mi")},
			status:     readyStatus(running("a")),
		},
		"an exited container is not resized: it starts again with its allocation": {
			containers: []v1.Container{sized("a", "500m", "1", "64Mi")},
			status:     readyStatus(withValues(exited("a", 0), 102, 20000, 64*mi)),
			want:       wantPlan{start: []int{0}},
		},
		"a running sidecar is resized in place": {
			containers: []v1.Container{a},
			status:     readyStatus(withValues(initCtr("s", StateRunning, 0), 102, 20000, 64*mi), asIs("a")),
			want:       wantPlan{cpu: []string{"s"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := syncPod(v1.RestartPolicyAlways, tc.containers...)
			if name == "a running sidecar is resized in place" {
				always := v1.ContainerRestartPolicyAlways
				s := sized("s", "100m", "500m", "64Mi")
				s.RestartPolicy = &always
				pod.Spec.InitContainers = []v1.Container{s}
			}
			got := ComputePodActions(pod, tc.status, PlanInputs{})
			names := func(us []ContainerUpdate) []string {
				var out []string
				for _, u := range us {
					out = append(out, u.Name)
				}
				return out
			}
			if g := names(got.ContainersToUpdate[v1.ResourceCPU]); !reflect.DeepEqual(g, tc.want.cpu) {
				t.Errorf("cpu updates %v, want %v", g, tc.want.cpu)
			}
			if g := names(got.ContainersToUpdate[v1.ResourceMemory]); !reflect.DeepEqual(g, tc.want.memory) {
				t.Errorf("memory updates %v, want %v", g, tc.want.memory)
			}
			kills := map[string]string{}
			for id, k := range got.ContainersToKill {
				kills[id] = k.Message
			}
			if len(kills) == 0 {
				kills = nil
			}
			if !reflect.DeepEqual(kills, tc.want.kill) {
				t.Errorf("kills %v, want %v", kills, tc.want.kill)
			}
			if len(got.ContainersToStart) > 0 || len(tc.want.start) > 0 {
				if !reflect.DeepEqual(got.ContainersToStart, tc.want.start) {
					t.Errorf("start %v, want %v", got.ContainersToStart, tc.want.start)
				}
			}
			if got.UpdatePodResources != tc.want.podCgroup {
				t.Errorf("UpdatePodResources %v, want %v", got.UpdatePodResources, tc.want.podCgroup)
			}
			empty := tc.want.cpu == nil && tc.want.memory == nil && tc.want.kill == nil && tc.want.start == nil
			if got.Empty() != empty {
				t.Errorf("Empty() = %v, want %v (%s)", got.Empty(), empty, got)
			}
		})
	}
}

// TestResizeInProgress: a resize is in progress while a running resizable
// container's runtime values differ from its allocation.
func TestResizeInProgress(t *testing.T) {
	pod := syncPod(v1.RestartPolicyAlways, sized("a", "100m", "200m", "64Mi"))
	for name, tc := range map[string]struct {
		status *PodStatus
		want   bool
	}{
		"values match":              {readyStatus(withValues(running("a"), 102, 20000, 64*mi)), false},
		"quota differs":             {readyStatus(withValues(running("a"), 102, 10000, 64*mi)), true},
		"shares differ":             {readyStatus(withValues(running("a"), 50, 20000, 64*mi)), true},
		"memory differs":            {readyStatus(withValues(running("a"), 102, 20000, 32*mi)), true},
		"memory request differs":    {readyStatus(actuated(withValues(running("a"), 102, 20000, 64*mi), 32*mi)), true},
		"memory request actuated":   {readyStatus(actuated(withValues(running("a"), 102, 20000, 64*mi), 64*mi)), false},
		"not running":               {readyStatus(withValues(exited("a", 1), 2, 0, 0)), false},
		"runtime reports nothing":   {readyStatus(running("a")), false},
		"no container of it at all": {readyStatus(), false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := ResizeInProgress(pod, tc.status); got != tc.want {
				t.Errorf("ResizeInProgress = %v, want %v", got, tc.want)
			}
		})
	}
}

// fakePodCgroup is a pod cgroup with current and wanted values per
// resource ([limit, request]); it logs each write with the number of
// container updates made before it.
type fakePodCgroup struct {
	cur, want map[v1.ResourceName][2]int64
	log       *[]string
	rs        *fakeRuntimeService
	// err is PodCgroupValues' error (a pod cgroup this agent did not make).
	err error
}

func (f *fakePodCgroup) PodCgroupValues(_ *v1.Pod, res v1.ResourceName) (int64, int64, int64, int64, error) {
	return f.cur[res][0], f.cur[res][1], f.want[res][0], f.want[res][1], f.err
}

func (f *fakePodCgroup) ResizePodCgroup(_ *v1.Pod, res v1.ResourceName, limit bool) error {
	c := f.cur[res]
	what := "request"
	if limit {
		what = "limit"
		c[0] = f.want[res][0]
	} else {
		c[1] = f.want[res][1]
	}
	f.cur[res] = c
	f.rs.mu.Lock()
	n := len(f.rs.updates)
	f.rs.mu.Unlock()
	*f.log = append(*f.log, fmt.Sprintf("pod %s %s after %d updates", res, what, n))
	return nil
}

// TestSyncPodResize carries out resizes against the fake runtime and pod
// cgroup: growing, the pod cgroup goes first; shrinking, the containers
// go first (the kubelet's doPodResizeAction); a memory limit decrease to
// below a container's usage is refused with the kubelet's message and
// nothing changes.
func TestSyncPodResize(t *testing.T) {
	f := newSyncFixture(t)
	f.is.SetFakeImages([]string{"busybox:1.36"})
	var log []string
	pc := &fakePodCgroup{log: &log, rs: f.rs}
	f.rt.cfg.PodCgroups = pc
	pod := syncPod(v1.RestartPolicyAlways, sized("a", "100m", "200m", "64Mi"), sized("b", "100m", "200m", "64Mi"))
	if res, _ := f.sync(t, pod); res.Error() != nil {
		t.Fatalf("first sync: %v", res.Error())
	}

	// Grow a's memory and CPU limit.
	grown := pod.DeepCopy()
	grown.Spec.Containers[0] = sized("a", "100m", "400m", "128Mi")
	pc.cur = map[v1.ResourceName][2]int64{v1.ResourceMemory: {128 * mi, 0}, v1.ResourceCPU: {40000, 204}}
	pc.want = map[v1.ResourceName][2]int64{v1.ResourceMemory: {192 * mi, 0}, v1.ResourceCPU: {60000, 204}}
	res, plan := f.sync(t, grown)
	if res.ResizeErr != nil || res.Error() != nil {
		t.Fatalf("grow: %v %v (plan %s)", res.ResizeErr, res.Error(), plan)
	}
	wantLog := []string{"pod memory limit after 0 updates", "pod cpu limit after 1 updates"}
	if !reflect.DeepEqual(log, wantLog) {
		t.Errorf("grow: pod cgroup steps %q, want %q", log, wantLog)
	}
	if want := []string{"a cpu=102/20000 mem=134217728", "a cpu=102/40000 mem=134217728"}; !reflect.DeepEqual(f.rs.updates, want) {
		t.Errorf("grow: container updates %q, want %q (memory first, then CPU with the new memory)", f.rs.updates, want)
	}
	if st := f.status(t, grown); ResizeInProgress(grown, st) {
		t.Errorf("grow: still in progress after the sync")
	}

	// Shrink b's CPU: the container, then the pod cgroup's request and
	// limit.
	log, f.rs.updates = nil, nil
	shrunk := grown.DeepCopy()
	shrunk.Spec.Containers[1] = sized("b", "50m", "100m", "64Mi")
	pc.cur = map[v1.ResourceName][2]int64{v1.ResourceMemory: {192 * mi, 0}, v1.ResourceCPU: {60000, 204}}
	pc.want = map[v1.ResourceName][2]int64{v1.ResourceMemory: {192 * mi, 0}, v1.ResourceCPU: {50000, 153}}
	if res, plan := f.sync(t, shrunk); res.Error() != nil {
		t.Fatalf("shrink: %v (plan %s)", res.Error(), plan)
	}
	if want := []string{"pod cpu request after 1 updates", "pod cpu limit after 1 updates"}; !reflect.DeepEqual(log, want) {
		t.Errorf("shrink: pod cgroup steps %q, want %q", log, want)
	}
	if want := []string{"b cpu=51/10000 mem=67108864"}; !reflect.DeepEqual(f.rs.updates, want) {
		t.Errorf("shrink: container updates %q, want %q", f.rs.updates, want)
	}

	// a's memory limit down to 32Mi while it uses 50 MB: refused.
	log, f.rs.updates = nil, nil
	st := f.status(t, shrunk)
	f.rs.memUsage = map[string]uint64{st.Latest("a", ContainerTypeRegular).ID: 50_000_000, "": 60_000_000}
	below := shrunk.DeepCopy()
	below.Spec.Containers[0] = sized("a", "100m", "400m", "32Mi")
	pc.want = map[v1.ResourceName][2]int64{v1.ResourceMemory: {96 * mi, 0}, v1.ResourceCPU: {50000, 153}}
	res, _ = f.sync(t, below)
	want := `cannot decrease memory limits: attempting to set container "a" memory limit (33554432) below current usage (50000000)`
	if res.ResizeErr == nil || res.ResizeErr.Error() != want {
		t.Errorf("decrease below usage: ResizeErr %v, want %q", res.ResizeErr, want)
	}
	if len(f.rs.updates) != 0 || len(log) != 0 {
		t.Errorf("decrease below usage: updates %q, pod cgroup %q; want none", f.rs.updates, log)
	}
	if !strings.Contains(fmt.Sprint(res.Errs), "cannot decrease memory limits") {
		t.Errorf("the resize failure is not among the sync's errors: %v", res.Errs)
	}

	// The runtime refuses the update: its words are the failure's.
	f.rs.memUsage = nil
	f.rs.errors["UpdateContainerResources"] = []error{errors.New("rpc error: code = Unknown desc = failed to update resources")}
	cpuUp := shrunk.DeepCopy()
	cpuUp.Spec.Containers[0] = sized("a", "100m", "500m", "128Mi")
	pc.cur = map[v1.ResourceName][2]int64{v1.ResourceMemory: {192 * mi, 0}, v1.ResourceCPU: {50000, 153}}
	pc.want = map[v1.ResourceName][2]int64{v1.ResourceMemory: {192 * mi, 0}, v1.ResourceCPU: {60000, 153}}
	if res, _ := f.sync(t, cpuUp); res.ResizeErr == nil || res.ResizeErr.Error() != "rpc error: code = Unknown desc = failed to update resources" {
		t.Errorf("runtime refusal: ResizeErr %v", res.ResizeErr)
	}
}

// TestSyncPodResizeRestart: a container whose resizePolicy says
// RestartContainer is stopped and started again with its new resources.
func TestSyncPodResizeRestart(t *testing.T) {
	f := newSyncFixture(t)
	f.is.SetFakeImages([]string{"busybox:1.36"})
	pod := syncPod(v1.RestartPolicyAlways, restartOn(sized("a", "100m", "200m", "64Mi"), v1.ResourceMemory))
	if res, _ := f.sync(t, pod); res.Error() != nil {
		t.Fatal(res.Error())
	}
	first := f.status(t, pod).Latest("a", ContainerTypeRegular).ID
	resized := pod.DeepCopy()
	resized.Spec.Containers[0] = restartOn(sized("a", "100m", "200m", "128Mi"), v1.ResourceMemory)
	if res, plan := f.sync(t, resized); res.Error() != nil {
		t.Fatalf("%v (plan %s)", res.Error(), plan)
	}
	st := f.status(t, resized)
	c := st.Latest("a", ContainerTypeRegular)
	if c.ID == first || c.State != StateRunning || c.Attempt != 1 {
		t.Errorf("after the resize: %s attempt %d %s, want a new running instance (attempt 1)", c.ID, c.Attempt, c.State)
	}
	if c.Resources.GetMemoryLimitInBytes() != 128*mi {
		t.Errorf("new instance's memory limit %d, want %d", c.Resources.GetMemoryLimitInBytes(), 128*mi)
	}
	if f.rs.stops[first] == 0 {
		t.Errorf("the old instance %s was not stopped", first)
	}
	if len(f.rs.updates) != 0 {
		t.Errorf("UpdateContainerResources called %q; a restart needs none", f.rs.updates)
	}
}

// TestSyncPodResizeMemoryRequest: a change of the memory request alone,
// as the kubelet: with resizePolicy NotRequired the container is sent
// the values it has (UpdateContainerResources), the pod cgroup is not
// written, and the request counts as actuated (no resize in progress);
// with RestartContainer for memory the container is started again.
func TestSyncPodResizeMemoryRequest(t *testing.T) {
	for name, tc := range map[string]struct {
		policy      *v1.ResourceName // RestartContainer for it
		wantUpdates []string
		wantAttempt uint32
	}{
		"NotRequired: updated in place":         {wantUpdates: []string{"a cpu=102/20000 mem=67108864"}},
		"RestartContainer for memory: restarts": {policy: ptrTo(v1.ResourceMemory), wantAttempt: 1},
		"RestartContainer for cpu: in place":    {policy: ptrTo(v1.ResourceCPU), wantUpdates: []string{"a cpu=102/20000 mem=67108864"}},
	} {
		t.Run(name, func(t *testing.T) {
			f := newSyncFixture(t)
			f.is.SetFakeImages([]string{"busybox:1.36"})
			var log []string
			pc := &fakePodCgroup{log: &log, rs: f.rs,
				cur:  map[v1.ResourceName][2]int64{v1.ResourceMemory: {64 * mi, 0}, v1.ResourceCPU: {20000, 102}},
				want: map[v1.ResourceName][2]int64{v1.ResourceMemory: {64 * mi, 0}, v1.ResourceCPU: {20000, 102}}}
			f.rt.cfg.PodCgroups = pc
			a := sized("a", "100m", "200m", "64Mi")
			if tc.policy != nil {
				a = restartOn(a, *tc.policy)
			}
			pod := syncPod(v1.RestartPolicyAlways, a)
			if res, _ := f.sync(t, pod); res.Error() != nil {
				t.Fatal(res.Error())
			}
			first := f.status(t, pod).Latest("a", ContainerTypeRegular)
			if !first.HasMemoryRequest || first.MemoryRequest != 64*mi {
				t.Fatalf("created container's memory request %d (recorded %v), want %d", first.MemoryRequest, first.HasMemoryRequest, 64*mi)
			}
			resized := pod.DeepCopy()
			resized.Spec.Containers[0] = memReq(resized.Spec.Containers[0], "32Mi")
			if !ResizeInProgress(resized, f.status(t, resized)) {
				t.Errorf("no resize in progress before the sync")
			}
			if res, plan := f.sync(t, resized); res.Error() != nil || res.ResizeErr != nil {
				t.Fatalf("%v %v (plan %s)", res.Error(), res.ResizeErr, plan)
			}
			if !reflect.DeepEqual(f.rs.updates, tc.wantUpdates) {
				t.Errorf("container updates %q, want %q", f.rs.updates, tc.wantUpdates)
			}
			if len(log) != 0 {
				t.Errorf("pod cgroup written: %q", log)
			}
			st := f.status(t, resized)
			c := st.Latest("a", ContainerTypeRegular)
			if c.Attempt != tc.wantAttempt || c.State != StateRunning {
				t.Errorf("container attempt %d %s, want attempt %d running", c.Attempt, c.State, tc.wantAttempt)
			}
			if c.MemoryRequest != 32*mi {
				t.Errorf("actuated memory request %d, want %d", c.MemoryRequest, 32*mi)
			}
			if ResizeInProgress(resized, st) {
				t.Errorf("resize still in progress after the sync")
			}
			if res, plan := f.sync(t, resized); !plan.Empty() || len(f.rs.updates) != len(tc.wantUpdates) {
				t.Errorf("a second sync does more: plan %s, updates %q (%v)", plan, f.rs.updates, res.Error())
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }
