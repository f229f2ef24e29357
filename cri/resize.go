package cri

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/crivk/crivk/podutil"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// In-place pod resize (InPlacePodVerticalScaling, GA in v1.35), the
// runtime side of the kubelet's computePodResizeAction and
// doPodResizeAction.
//
// The pod a plan is made for carries the allocated resources (the caller,
// package lifecycle's allocation manager, decides whether a resize asked
// for in the spec fits the node). The actual side is what the runtime
// reports a running container has (its CRI status' resources), compared
// in the runtime's own units (CPU shares, CFS quota, memory limit in
// bytes), so nothing of the actuated state is kept here: a container whose
// values differ from its allocation's is to be resized. Those values are
// also what the pod status reports as the container's resources.
//
//	allocated (spec) != runtime values  ─plan─>  ContainersToUpdate[cpu|memory]
//	                                             (decreases first), or a
//	                                             kill and start when the
//	                                             container's resizePolicy
//	                                             for that resource says
//	                                             RestartContainer
//	allocated pod's pod cgroup values
//	  != those last written ────────────plan─>  UpdatePodLevelResources
//	  (PodCgroupResizing, a pod-level            (InPlacePodLevelResources-
//	  resize among them)                          VerticalScaling)
//	SyncPod, per resource (memory, then cpu):
//	   pod cgroup limit grows ─> pod cgroup request grows ─> containers
//	   ─> pod cgroup request shrinks ─> pod cgroup limit shrinks
//
// A memory request is no runtime value (cgroup v1 has no memory.min), but
// the kubelet resizes for it as for the others: it compares the allocated
// request with the one it actuated, so a change of the memory request
// alone restarts a container whose resizePolicy for memory says
// RestartContainer, and otherwise sends the container the values it has
// (UpdateContainerResources) and counts the request as actuated. The
// actuated request here is the one the container was created with (its
// AnnotationMemoryRequest), or the one an in-place update last sent it
// (Runtime.actuated, in memory: after a restart of the agent, the
// creation's, and a resize sends the values again, as the kubelet does
// without its actuated record). A container without the annotation (made
// by an older crivk) counts as having its allocated request.

// PodCgroupResizer is what a resize needs of the pod cgroup (package cm's
// Manager). Values are CPU quota (limit) and CPU shares (request), or the
// memory limit in bytes (memory has no request in the cgroup: 0); a limit
// of 0 is none.
type PodCgroupResizer interface {
	// PodCgroupValues returns the limit and request the pod cgroup has
	// now and those the pod (its allocated spec) asks for.
	PodCgroupValues(pod *v1.Pod, resource v1.ResourceName) (curLimit, curRequest, wantLimit, wantRequest int64, err error)
	// ResizePodCgroup writes the pod's limit (or request) of resource on
	// its cgroup.
	ResizePodCgroup(pod *v1.Pod, resource v1.ResourceName, limit bool) error
}

// ContainerUpdate is one running container resized in place for one
// resource.
type ContainerUpdate struct {
	Name string
	Type ContainerType
	ID   string
	// Desired are the allocated values, Current the runtime's.
	Desired, Current ResizeValues
}

// ResizeValues are a container's resizable values in the runtime's units,
// and its memory request in bytes (no runtime value: see above).
type ResizeValues struct {
	CPUShares, CPUQuota, MemoryLimit, MemoryRequest int64
}

// AnnotationMemoryRequest records, on a container, the memory request in
// bytes it was created with: the actuated memory request of an in-place
// resize.
const AnnotationMemoryRequest = "io.crivk.container.memoryRequest"

// memoryRequestAnnotation is AnnotationMemoryRequest's value for c.
func memoryRequestAnnotation(c *v1.Container) string {
	return strconv.FormatInt(c.Resources.Requests.Memory().Value(), 10)
}

// desiredValues are the runtime values of spec's (allocated) resources.
func desiredValues(pod *v1.Pod, spec *v1.Container, typ ContainerType) ResizeValues {
	r := containerResources(pod, spec, typ, 0)
	return ResizeValues{CPUShares: r.CpuShares, CPUQuota: r.CpuQuota, MemoryLimit: r.MemoryLimitInBytes,
		MemoryRequest: spec.Resources.Requests.Memory().Value()}
}

// actualValues are the values the runtime reports for c, with its
// actuated memory request (want's when c has no record of it); false
// when the runtime reports none.
func actualValues(c *ContainerStatus, want ResizeValues) (ResizeValues, bool) {
	r := c.Resources
	if r == nil {
		return ResizeValues{}, false
	}
	quota := r.CpuQuota
	if quota < 0 {
		quota = 0
	}
	memReq := want.MemoryRequest
	if c.HasMemoryRequest {
		memReq = c.MemoryRequest
	}
	return ResizeValues{CPUShares: r.CpuShares, CPUQuota: quota, MemoryLimit: r.MemoryLimitInBytes, MemoryRequest: memReq}, true
}

// actuatedMemory holds the memory requests in-place updates sent to
// containers, by pod and container ID: the actuated request of a
// container whose creation's annotation is out of date. Its zero value is
// ready.
type actuatedMemory struct {
	mu sync.Mutex
	// byPod is guarded by mu.
	byPod map[types.UID]map[string]int64
}

func (a *actuatedMemory) set(pod types.UID, id string, request int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byPod == nil {
		a.byPod = map[types.UID]map[string]int64{}
	}
	if a.byPod[pod] == nil {
		a.byPod[pod] = map[string]int64{}
	}
	a.byPod[pod][id] = request
}

// apply overrides the recorded memory requests of the pod's containers in
// status (all of them, as GetPodStatus lists them) with those sent in
// place, and forgets the containers that are gone.
func (a *actuatedMemory) apply(status *PodStatus) {
	a.mu.Lock()
	defer a.mu.Unlock()
	sent := a.byPod[status.Ref.UID]
	if len(sent) == 0 {
		return
	}
	kept := map[string]int64{}
	for i := range status.Containers {
		c := &status.Containers[i]
		if v, ok := sent[c.ID]; ok {
			c.MemoryRequest, c.HasMemoryRequest = v, true
			kept[c.ID] = v
		}
	}
	if len(kept) == 0 {
		delete(a.byPod, status.Ref.UID)
		return
	}
	a.byPod[status.Ref.UID] = kept
}

// resizePolicy is the container's restart policy for resource (the
// implicit default NotRequired).
func resizePolicy(spec *v1.Container, res v1.ResourceName) v1.ResourceResizeRestartPolicy {
	for _, p := range spec.ResizePolicy {
		if p.ResourceName == res {
			return p.RestartPolicy
		}
	}
	return v1.NotRequired
}

// resize plans the in-place resize of the running container c to spec's
// allocated resources (the kubelet's computePodResizeAction) and reports
// whether c is killed to be started again instead, because its
// resizePolicy says RestartContainer for a resource that changes (Killing
// "Container <name> resize requires restart").
func (p *planner) resize(spec *v1.Container, c *ContainerStatus) (restart bool) {
	want := desiredValues(p.pod, spec, c.Type)
	cur, ok := actualValues(c, want)
	if !ok || cur == want {
		return false
	}
	memChanged := cur.MemoryLimit != want.MemoryLimit || cur.MemoryRequest != want.MemoryRequest
	cpuChanged := cur.CPUQuota != want.CPUQuota || cur.CPUShares != want.CPUShares
	if (memChanged && resizePolicy(spec, v1.ResourceMemory) == v1.RestartContainer) ||
		(cpuChanged && resizePolicy(spec, v1.ResourceCPU) == v1.RestartContainer) {
		p.a.ContainersToKill[c.ID] = Kill{Name: c.Name, Type: c.Type, Reason: "resize requires restart",
			Message: fmt.Sprintf("Container %s resize requires restart", spec.Name), Grace: gracePeriod(p.pod, nil)}
		p.a.UpdatePodResources = true
		return true
	}
	u := ContainerUpdate{Name: c.Name, Type: c.Type, ID: c.ID, Desired: want, Current: cur}
	if p.a.ContainersToUpdate == nil {
		p.a.ContainersToUpdate = map[v1.ResourceName][]ContainerUpdate{}
	}
	// Decreases go before increases (prepended), as the kubelet orders
	// them: the pod's total never goes above its new allocation on the way.
	add := func(res v1.ResourceName, decrease bool) {
		l := p.a.ContainersToUpdate[res]
		if decrease {
			l = append([]ContainerUpdate{u}, l...)
		} else {
			l = append(l, u)
		}
		p.a.ContainersToUpdate[res] = l
	}
	switch {
	case cur.MemoryLimit != want.MemoryLimit:
		add(v1.ResourceMemory, want.MemoryLimit != 0 && (cur.MemoryLimit == 0 || want.MemoryLimit < cur.MemoryLimit))
	case cur.MemoryRequest != want.MemoryRequest:
		add(v1.ResourceMemory, want.MemoryRequest < cur.MemoryRequest)
	}
	switch {
	case cur.CPUQuota != want.CPUQuota:
		add(v1.ResourceCPU, want.CPUQuota != 0 && (cur.CPUQuota == 0 || want.CPUQuota < cur.CPUQuota))
	case cur.CPUShares != want.CPUShares:
		add(v1.ResourceCPU, want.CPUShares < cur.CPUShares)
	}
	return false
}

// ResizeInProgress reports whether a running resizable container of pod
// (a regular container or a sidecar) has runtime values other than those
// of its allocated resources (the kubelet's IsPodResizeInProgress, with
// the runtime's values for the actuated ones). Containers that do not run
// are sized when they start.
func ResizeInProgress(pod *v1.Pod, status *PodStatus) bool {
	check := func(spec *v1.Container, typ ContainerType) bool {
		c := status.Latest(spec.Name, typ)
		if c == nil || c.State != StateRunning {
			return false
		}
		want := desiredValues(pod, spec, typ)
		cur, ok := actualValues(c, want)
		return ok && cur != want
	}
	for i := range pod.Spec.InitContainers {
		if podutil.IsSidecar(&pod.Spec.InitContainers[i]) && check(&pod.Spec.InitContainers[i], ContainerTypeInit) {
			return true
		}
	}
	for i := range pod.Spec.Containers {
		if check(&pod.Spec.Containers[i], ContainerTypeRegular) {
			return true
		}
	}
	return false
}

// ActualResources are the resources the runtime reports c has, as the
// kubelet reads them (toKubeContainerResources): the CPU limit from the
// CFS quota, the CPU request from the shares, the memory limit; nil for
// a value the runtime does not report (or reports unset).
func ActualResources(c *ContainerStatus) (cpuRequest, cpuLimit, memoryLimit *resource.Quantity) {
	r := c.Resources
	if r == nil {
		return nil, nil, nil
	}
	if r.CpuPeriod > 0 {
		if m := podutil.QuotaToMilliCPU(r.CpuQuota, r.CpuPeriod); m > 0 {
			cpuLimit = resource.NewMilliQuantity(m, resource.DecimalSI)
		}
	}
	if r.CpuShares > 0 {
		if m := podutil.SharesToMilliCPU(r.CpuShares); m > 0 {
			cpuRequest = resource.NewMilliQuantity(m, resource.DecimalSI)
		}
	}
	if r.MemoryLimitInBytes > 0 {
		memoryLimit = resource.NewQuantity(r.MemoryLimitInBytes, resource.BinarySI)
	}
	return cpuRequest, cpuLimit, memoryLimit
}

// PodCgroupResizing reports whether the pod cgroup's CPU quota or shares
// or its memory limit, as last written, differ from those pod (its
// allocated spec) asks for: the plan's PlanInputs.PodCgroupResizing, and
// a resize in progress (the kubelet's IsPodResizeInProgress, whose
// actuated pod-level resources these values stand for: a change of the
// pod-level memory request alone moves no cgroup value and is done once
// allocated). False without a pod cgroup made by this agent (before the
// pod's first sync after a start, or without pod cgroups).
func (r *Runtime) PodCgroupResizing(pod *v1.Pod) bool {
	pc := r.cfg.PodCgroups
	if pc == nil {
		return false
	}
	for _, res := range []v1.ResourceName{v1.ResourceMemory, v1.ResourceCPU} {
		curLim, curReq, wantLim, wantReq, err := pc.PodCgroupValues(pod, res)
		if err != nil {
			return false
		}
		if curLim != wantLim || curReq != wantReq {
			return true
		}
	}
	return false
}

// resizePod carries out the plan's in-place resize (the kubelet's
// doPodResizeAction): a memory limit decrease below what the pod or a
// container uses is refused first, nothing changed; then memory, then
// CPU, each with the pod cgroup's limit and request grown before the
// containers are updated and shrunk after. A resource is resized when a
// container of it is, a container restarts for a resize, or the pod
// cgroup's values differ from the pod's (UpdatePodLevelResources, a
// pod-level resize: the pod cgroup alone may change). The first failure
// stops it (the next sync carries on from what the runtime then
// reports).
func (r *Runtime) resizePod(ctx context.Context, pod *v1.Pod, plan PodActions) error {
	pc := r.cfg.PodCgroups
	if err := r.validateMemoryResize(ctx, pod, plan, pc); err != nil {
		return err
	}
	sent := map[string]ResizeValues{}
	for _, res := range []v1.ResourceName{v1.ResourceMemory, v1.ResourceCPU} {
		if len(plan.ContainersToUpdate[res]) == 0 && !plan.UpdatePodResources && !plan.UpdatePodLevelResources {
			continue
		}
		var curLim, curReq, wantLim, wantReq int64
		if pc != nil {
			var err error
			if curLim, curReq, wantLim, wantReq, err = pc.PodCgroupValues(pod, res); err != nil {
				return fmt.Errorf("unable to get pod cgroup %s config for pod %s: %w", res, RefOf(pod), err)
			}
		}
		grows := func(cur, want int64) bool { return cur != 0 && (want == 0 || want > cur) }
		shrinks := func(cur, want int64) bool { return want != 0 && (cur == 0 || want < cur) }
		set := func(limit bool) error {
			if err := pc.ResizePodCgroup(pod, res, limit); err != nil {
				return fmt.Errorf("setting the pod cgroup %s of pod %s: %w", res, RefOf(pod), err)
			}
			return nil
		}
		if pc != nil && grows(curLim, wantLim) {
			if err := set(true); err != nil {
				return err
			}
		}
		if pc != nil && res == v1.ResourceCPU && wantReq > curReq {
			if err := set(false); err != nil {
				return err
			}
		}
		for _, u := range plan.ContainersToUpdate[res] {
			// What an earlier update of the container set is its
			// current value now (the kubelet's shared current values).
			if v, ok := sent[u.ID]; ok {
				u.Current = v
			}
			v, err := r.updateContainer(ctx, pod, res, u)
			if err != nil {
				return err
			}
			sent[u.ID] = v
		}
		if pc != nil && res == v1.ResourceCPU && wantReq < curReq {
			if err := set(false); err != nil {
				return err
			}
		}
		if pc != nil && shrinks(curLim, wantLim) {
			if err := set(true); err != nil {
				return err
			}
		}
	}
	return nil
}

// updateContainer sends the container its desired values of res and its
// current ones of the other resource (the kubelet's
// updatePodContainerResources), on top of what else the runtime has
// (OOM score, cpuset, ...), which stays. It returns the values sent.
func (r *Runtime) updateContainer(ctx context.Context, pod *v1.Pod, res v1.ResourceName, u ContainerUpdate) (ResizeValues, error) {
	l := &runtimeapi.LinuxContainerResources{}
	if st, err := r.rs.ContainerStatus(ctx, u.ID, false); err == nil && st.GetStatus().GetResources().GetLinux() != nil {
		l = proto.Clone(st.GetStatus().GetResources().GetLinux()).(*runtimeapi.LinuxContainerResources)
	}
	v := u.Current
	switch res {
	case v1.ResourceMemory:
		v.MemoryLimit, v.MemoryRequest = u.Desired.MemoryLimit, u.Desired.MemoryRequest
	case v1.ResourceCPU:
		v.CPUShares, v.CPUQuota = u.Desired.CPUShares, u.Desired.CPUQuota
	}
	l.CpuShares, l.CpuQuota, l.CpuPeriod, l.MemoryLimitInBytes = v.CPUShares, v.CPUQuota, quotaPeriod, v.MemoryLimit
	// The swap limit is the kubelet's NoSwap one for the new memory
	// limit, as at the container's creation: the kubelet's update sends
	// the resources generateLinuxContainerResources makes, swap included.
	// Never the one the runtime reports: that is the old memory limit,
	// below a grown one, which cgroup v1 refuses. Without a swap
	// controller none is sent (0), as the kubelet's.
	l.MemorySwapLimitInBytes = 0
	configureNoSwap(l, r.cfg.Swap)
	// memory.oom.group too, as the kubelet's regenerated resources have it.
	configureOOMGroup(l, r.cfg.OOMKillGroup)
	if err := r.rs.UpdateContainerResources(ctx, u.ID, &runtimeapi.ContainerResources{Linux: l}); err != nil {
		// The runtime's words, as the kubelet reports them in the
		// PodResizeInProgress condition; SyncPod names the pod.
		return v, runtimeWords(err)
	}
	if res == v1.ResourceMemory {
		r.actuated.set(pod.UID, u.ID, v.MemoryRequest)
	}
	return v, nil
}

// validateMemoryResize refuses a memory limit decrease, of the pod cgroup
// or of a container, to or below what it uses now (the kubelet's
// validateMemoryResizeAction, with its words).
func (r *Runtime) validateMemoryResize(ctx context.Context, pod *v1.Pod, plan PodActions, pc PodCgroupResizer) error {
	if len(plan.ContainersToUpdate[v1.ResourceMemory]) == 0 && !plan.UpdatePodResources {
		return nil
	}
	var podLimit int64
	if pc != nil {
		cur, _, want, _, err := pc.PodCgroupValues(pod, v1.ResourceMemory)
		if err != nil {
			return fmt.Errorf("unable to get pod cgroup memory config for pod %s: %w", RefOf(pod), err)
		}
		if want != 0 && (cur == 0 || want < cur) {
			podLimit = want
		}
	}
	decreasing := map[string]int64{}
	for _, u := range plan.ContainersToUpdate[v1.ResourceMemory] {
		if d, c := u.Desired.MemoryLimit, u.Current.MemoryLimit; d != 0 && (c == 0 || d < c) {
			decreasing[u.Name] = d
		}
	}
	if podLimit == 0 && len(decreasing) == 0 {
		return nil
	}
	unable := fmt.Errorf("unable to read memory usage for pod %q", pod.Namespace+"/"+pod.Name)
	var errs []error
	if podLimit != 0 {
		st, err := r.rs.ListPodSandboxStats(ctx, &runtimeapi.PodSandboxStatsFilter{Id: plan.SandboxID})
		if err != nil {
			return unable
		}
		var usage *runtimeapi.UInt64Value
		if len(st) > 0 {
			usage = st[0].GetLinux().GetMemory().GetUsageBytes()
		}
		switch {
		case usage == nil:
			errs = append(errs, errors.New("missing pod memory usage"))
		case usage.Value >= uint64(podLimit):
			errs = append(errs, fmt.Errorf("attempting to set pod memory limit (%d) below current usage (%d)", podLimit, usage.Value))
		}
	}
	if len(decreasing) > 0 {
		stats, err := r.rs.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{PodSandboxId: plan.SandboxID})
		if err != nil {
			return unable
		}
		for _, s := range stats {
			name := s.GetAttributes().GetLabels()[LabelContainerName]
			if name == "" {
				name = s.GetAttributes().GetMetadata().GetName()
			}
			limit, ok := decreasing[name]
			if !ok {
				continue
			}
			if u := s.GetMemory().GetUsageBytes(); u == nil {
				errs = append(errs, fmt.Errorf("missing container %q memory usage", name))
			} else if u.Value >= uint64(limit) {
				errs = append(errs, fmt.Errorf("attempting to set container %q memory limit (%d) below current usage (%d)", name, limit, u.Value))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("cannot decrease memory limits: %w", utilerrors.NewAggregate(errs))
	}
	return nil
}
