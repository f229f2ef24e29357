package cri

import (
	"errors"
	"reflect"
	"testing"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
)

// podLevel is pod with pod-level resources: CPU request and limit, and a
// memory limit equal to its request.
func podLevel(pod *v1.Pod, cpuReq, cpuLim, mem string) *v1.Pod {
	pod = pod.DeepCopy()
	pod.Spec.Resources = &v1.ResourceRequirements{Requests: testutil.Resources(cpuReq, mem), Limits: testutil.Resources(cpuLim, mem)}
	return pod
}

// TestComputePodActionsPodLevel: a pod-level resize in the plan, the
// kubelet's computePodLevelResourcesResizeAction and its
// computePodResizeAction over containers without limits of their own
// (kubeutil.GetLimits: the pod-level limit is theirs): the pod cgroup is
// resized once the pod is initialized in a kept sandbox, containers that
// take the pod-level limit are updated in place or, per their
// resizePolicy, restarted.
func TestComputePodActionsPodLevel(t *testing.T) {
	// own: a container with its own resources (shares 102, quota 20000,
	// 64Mi); bare: one without, under pod-level 200m/200m/64Mi (shares
	// from the limit, 204).
	own := sized("a", "100m", "200m", "64Mi")
	bare := v1.Container{Name: "a", Image: "busybox:1.36"}
	ownAsIs := readyStatus(withValues(running("a"), 102, 20000, 64*mi))
	bareAsIs := readyStatus(withValues(running("a"), 204, 20000, 64*mi))
	for name, tc := range map[string]struct {
		pod       *v1.Pod
		status    *PodStatus
		resizing  bool
		wantPod   bool
		cpu, mem  []string
		kill      bool
		wantEmpty bool
	}{
		"pod cgroup as allocated: nothing": {
			pod: podLevel(syncPod(v1.RestartPolicyAlways, own), "100m", "200m", "64Mi"), status: ownAsIs, wantEmpty: true,
		},
		"pod-level CPU up, containers with their own resources: the pod cgroup alone": {
			pod: podLevel(syncPod(v1.RestartPolicyAlways, own), "150m", "300m", "64Mi"), status: ownAsIs, resizing: true, wantPod: true,
		},
		"pod-level CPU limit up, a container without limits: it takes the new limit in place": {
			pod: podLevel(syncPod(v1.RestartPolicyAlways, bare), "100m", "300m", "64Mi"), status: bareAsIs, resizing: true, wantPod: true,
			cpu: []string{"a"},
		},
		"pod-level memory down, a container without limits: updated in place": {
			pod: podLevel(syncPod(v1.RestartPolicyAlways, bare), "100m", "200m", "32Mi"), status: bareAsIs, resizing: true, wantPod: true,
			mem: []string{"a"},
		},
		"pod-level CPU up, a container without limits restarting for CPU: killed and started": {
			pod: podLevel(syncPod(v1.RestartPolicyAlways, restartOn(bare, v1.ResourceCPU)), "100m", "300m", "64Mi"), status: bareAsIs,
			resizing: true, wantPod: true, kill: true,
		},
		"no ready sandbox: the new sandbox is made with the allocation": {
			pod: podLevel(syncPod(v1.RestartPolicyAlways, own), "150m", "300m", "64Mi"), status: &PodStatus{}, resizing: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := ComputePodActions(tc.pod, tc.status, PlanInputs{PodCgroupResizing: tc.resizing})
			if got.UpdatePodLevelResources != tc.wantPod {
				t.Errorf("UpdatePodLevelResources %v, want %v (%s)", got.UpdatePodLevelResources, tc.wantPod, got)
			}
			names := func(us []ContainerUpdate) []string {
				var out []string
				for _, u := range us {
					out = append(out, u.Name)
				}
				return out
			}
			if g := names(got.ContainersToUpdate[v1.ResourceCPU]); !reflect.DeepEqual(g, tc.cpu) {
				t.Errorf("cpu updates %v, want %v", g, tc.cpu)
			}
			if g := names(got.ContainersToUpdate[v1.ResourceMemory]); !reflect.DeepEqual(g, tc.mem) {
				t.Errorf("memory updates %v, want %v", g, tc.mem)
			}
			if killed := len(got.ContainersToKill) > 0; killed != tc.kill || (tc.kill && !reflect.DeepEqual(got.ContainersToStart, []int{0})) {
				t.Errorf("kills %v starts %v, want a restart: %v", got.ContainersToKill, got.ContainersToStart, tc.kill)
			}
			if got.Empty() != tc.wantEmpty {
				t.Errorf("Empty() = %v, want %v (%s)", got.Empty(), tc.wantEmpty, got)
			}
		})
	}
	// Still initializing: the kubelet looks no further than the init
	// containers.
	init := podLevel(syncPod(v1.RestartPolicyAlways, own), "150m", "300m", "64Mi")
	init.Spec.InitContainers = []v1.Container{{Name: "i", Image: "busybox:1.36"}}
	if got := ComputePodActions(init, readyStatus(initCtr("i", StateRunning, 0)), PlanInputs{PodCgroupResizing: true}); got.UpdatePodLevelResources {
		t.Errorf("initializing pod: UpdatePodLevelResources set (%s)", got)
	}
}

// TestPodCgroupResizing: the pod cgroup is being resized while a value
// as last written differs from the allocated pod's; without a pod cgroup
// made by this agent nothing is.
func TestPodCgroupResizing(t *testing.T) {
	pod := syncPod(v1.RestartPolicyAlways, sized("a", "100m", "200m", "64Mi"))
	same := map[v1.ResourceName][2]int64{v1.ResourceMemory: {64 * mi, 0}, v1.ResourceCPU: {20000, 102}}
	for name, tc := range map[string]struct {
		pc   PodCgroupResizer
		want bool
	}{
		"no pod cgroups": {pc: nil},
		"as allocated":   {pc: &fakePodCgroup{cur: same, want: same}},
		"CPU limit":      {pc: &fakePodCgroup{cur: same, want: map[v1.ResourceName][2]int64{v1.ResourceMemory: {64 * mi, 0}, v1.ResourceCPU: {30000, 102}}}, want: true},
		"CPU request":    {pc: &fakePodCgroup{cur: same, want: map[v1.ResourceName][2]int64{v1.ResourceMemory: {64 * mi, 0}, v1.ResourceCPU: {20000, 153}}}, want: true},
		"memory limit":   {pc: &fakePodCgroup{cur: same, want: map[v1.ResourceName][2]int64{v1.ResourceMemory: {32 * mi, 0}, v1.ResourceCPU: {20000, 102}}}, want: true},
		"not made by us": {pc: &fakePodCgroup{err: errors.New("pod cgroup was not made by this agent")}},
	} {
		t.Run(name, func(t *testing.T) {
			r := &Runtime{cfg: Config{PodCgroups: tc.pc}}
			if got := r.PodCgroupResizing(pod); got != tc.want {
				t.Errorf("PodCgroupResizing = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSyncPodResizePodLevel carries out pod-level resizes against the
// fake runtime and pod cgroup, in the kubelet's doPodResizeAction order:
// growing, the pod cgroup's limit then request before the containers;
// shrinking, the containers first, then its request and limit; a pod
// cgroup alone when no container changes.
func TestSyncPodResizePodLevel(t *testing.T) {
	f := newSyncFixture(t)
	f.is.SetFakeImages([]string{"busybox:1.36"})
	var log []string
	asIs := map[v1.ResourceName][2]int64{v1.ResourceMemory: {64 * mi, 0}, v1.ResourceCPU: {20000, 204}}
	pc := &fakePodCgroup{log: &log, rs: f.rs, cur: asIs, want: asIs}
	f.rt.cfg.PodCgroups = pc
	bare := v1.Container{Name: "a", Image: "busybox:1.36"}
	pod := podLevel(syncPod(v1.RestartPolicyAlways, bare, sized("b", "50m", "100m", "32Mi")), "200m", "200m", "64Mi")
	sync := func(p *v1.Pod) {
		t.Helper()
		st := f.status(t, p)
		plan := ComputePodActions(p, st, PlanInputs{BackOff: f.b.View(f.clock.Now()), PodCgroupResizing: f.rt.PodCgroupResizing(p)})
		if res := f.rt.SyncPod(t.Context(), p, st, plan, f.b, f.clock.Now()); res.Error() != nil || res.ResizeErr != nil {
			t.Fatalf("sync: %v %v (plan %s)", res.Error(), res.ResizeErr, plan)
		}
	}
	sync(pod)

	// Up: CPU 300m (a takes the limit), memory 128Mi (a takes it too).
	up := podLevel(pod, "300m", "300m", "128Mi")
	pc.want = map[v1.ResourceName][2]int64{v1.ResourceMemory: {128 * mi, 0}, v1.ResourceCPU: {30000, 307}}
	sync(up)
	want := []string{"pod memory limit after 0 updates", "pod cpu limit after 1 updates", "pod cpu request after 1 updates"}
	if !reflect.DeepEqual(log, want) {
		t.Errorf("grow: pod cgroup steps %q, want %q", log, want)
	}
	if want := []string{"a cpu=204/20000 mem=134217728", "a cpu=307/30000 mem=134217728"}; !reflect.DeepEqual(f.rs.updates, want) {
		t.Errorf("grow: container updates %q, want %q", f.rs.updates, want)
	}
	if f.rt.PodCgroupResizing(up) {
		t.Errorf("grow: the pod cgroup is still being resized")
	}

	// Down: the containers first, once the usage is below the new limits.
	log, f.rs.updates = nil, nil
	st := f.status(t, up)
	f.rs.memUsage = map[string]uint64{st.Latest("a", ContainerTypeRegular).ID: 10 << 20, st.Latest("b", ContainerTypeRegular).ID: 10 << 20, "": 20 << 20}
	down := podLevel(pod, "250m", "250m", "96Mi")
	pc.want = map[v1.ResourceName][2]int64{v1.ResourceMemory: {96 * mi, 0}, v1.ResourceCPU: {25000, 256}}
	sync(down)
	want = []string{"pod memory limit after 1 updates", "pod cpu request after 2 updates", "pod cpu limit after 2 updates"}
	if !reflect.DeepEqual(log, want) {
		t.Errorf("shrink: pod cgroup steps %q, want %q", log, want)
	}

	// The request alone, which no container takes (b has its own, a
	// takes the limit only): the pod cgroup alone.
	log, f.rs.updates = nil, nil
	req := podLevel(pod, "200m", "250m", "96Mi")
	pc.want = map[v1.ResourceName][2]int64{v1.ResourceMemory: {96 * mi, 0}, v1.ResourceCPU: {25000, 204}}
	sync(req)
	if want := []string{"pod cpu request after 0 updates"}; !reflect.DeepEqual(log, want) || len(f.rs.updates) != 0 {
		t.Errorf("request alone: pod cgroup steps %q (want %q), container updates %q (want none)", log, want, f.rs.updates)
	}
}
