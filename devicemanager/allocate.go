package devicemanager

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/podutil"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// allocateTimeout bounds each Allocate and GetPreferredAllocation call
// during admission. The kubelet sets none; admission is serialised, so a
// hung plugin would hold every pod of the node.
const allocateTimeout = 2 * time.Minute

// Allocate gives every container of pod (init containers first, in
// order) the devices of each device plugin resource it limits, calling the
// plugins' Allocate: the kubelet's topology manager admission with the
// "none" policy. active are the other pods that hold resources: devices of
// pods neither active nor pod are freed first (the kubelet's
// UpdateAllocatedDevices). Devices a container already has are kept.
//
// A non-nil error rejects the pod: the caller publishes reason
// UnexpectedAdmissionError and "Allocate failed due to <err>, which is
// unexpected" (lifecycle/admit.go). Devices allocated to
// the pod's earlier containers are then kept until the pod is no longer
// active, as with the kubelet.
func (m *Manager) Allocate(ctx context.Context, pod *v1.Pod, active []*v1.Pod) error {
	m.allocMu.Lock()
	defer m.allocMu.Unlock()
	keep := sets.New(pod.UID)
	for _, p := range active {
		keep.Insert(p.UID)
	}
	m.mu.Lock()
	freed := false
	for uid := range m.pods {
		if !keep.Has(uid) {
			delete(m.pods, uid)
			freed = true
		}
	}
	m.mu.Unlock()
	if freed {
		m.writeCheckpoint()
	}
	// Devices an init container (not a sidecar) used are given first to
	// the containers after it (the kubelet's devicesToReuse).
	reuse := map[string]sets.Set[string]{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if err := m.allocateContainer(ctx, pod, c, reuse, true); err != nil {
			return err
		}
		m.updateReuse(pod.UID, c.Name, reuse, !podutil.IsSidecar(c))
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if err := m.allocateContainer(ctx, pod, c, reuse, true); err != nil {
			return err
		}
		m.updateReuse(pod.UID, c.Name, reuse, false)
	}
	return nil
}

// updateReuse adds the container's devices to reuse (add) or takes them
// out of it.
func (m *Manager) updateReuse(uid types.UID, container string, reuse map[string]sets.Set[string], add bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for r, cd := range m.pods[uid][container] {
		if add {
			if reuse[r] == nil {
				reuse[r] = sets.New[string]()
			}
			reuse[r] = reuse[r].Union(cd.ids)
		} else if reuse[r] != nil {
			reuse[r] = reuse[r].Difference(cd.ids)
		}
	}
}

// allocateContainer allocates container c's devices, resource by resource
// (by name), the kubelet's allocateContainerResources; at admission, a
// container running when Start ran gets none. allocMu is held.
func (m *Manager) allocateContainer(ctx context.Context, pod *v1.Pod, c *v1.Container, reuse map[string]sets.Set[string], atAdmission bool) error {
	allocated := false
	defer func() {
		if allocated {
			m.writeCheckpoint()
		}
	}()
	for _, name := range slices.Sorted(maps.Keys(c.Resources.Limits)) {
		r := string(name)
		q := c.Resources.Limits[name]
		if !m.isDevicePluginResource(r) {
			continue
		}
		devs, err := m.devicesToAllocate(ctx, pod.UID, c.Name, r, int(q.Value()), reuse[r], atAdmission && m.running[pod.UID].Has(c.Name))
		if err != nil {
			return err
		}
		if devs.Len() == 0 {
			continue
		}
		m.mu.Lock()
		e, ok := m.endpoints[r]
		m.mu.Unlock()
		if !ok {
			return fmt.Errorf("unknown Device Plugin %s", r)
		}
		actx, cancel := context.WithTimeout(ctx, allocateTimeout)
		resp, err := e.allocate(actx, sets.List(devs))
		cancel()
		if err != nil {
			return err
		}
		if len(resp.ContainerResponses) == 0 {
			return fmt.Errorf("no containers return in allocation response %v", resp)
		}
		m.mu.Lock()
		if m.pods[pod.UID] == nil {
			m.pods[pod.UID] = map[string]map[string]*containerDevices{}
		}
		if m.pods[pod.UID][c.Name] == nil {
			m.pods[pod.UID][c.Name] = map[string]*containerDevices{}
		}
		m.pods[pod.UID][c.Name][r] = &containerDevices{ids: devs, resp: resp.ContainerResponses[0]}
		m.mu.Unlock()
		allocated = true
		log.G(ctx).WithField("pod", pod.Namespace+"/"+pod.Name).WithField("container", c.Name).
			WithField("resource", r).WithField("devices", sets.List(devs)).Info("devices allocated")
	}
	return nil
}

// isDevicePluginResource reports whether r is a plugin's resource: listed
// by a plugin, or allocated to some container.
func (m *Manager) isDevicePluginResource(r string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.healthy[r]; ok {
		return true
	}
	return m.inUseLocked(r).Len() > 0
}

// inUseLocked are the devices of r allocated to some container; mu is
// held.
func (m *Manager) inUseLocked(r string) sets.Set[string] {
	in := sets.New[string]()
	for _, containers := range m.pods {
		for _, resources := range containers {
			if cd, ok := resources[r]; ok {
				in = in.Union(cd.ids)
			}
		}
	}
	return in
}

// devicesToAllocate chooses the devices of r that container of pod uid
// still needs (none when it has them already): first those reusable,
// then the plugin's preferred ones, then any healthy free ones, in the
// kubelet's order and with its errors. A container already running
// (running) keeps what it has and gets nothing new, whatever the devices'
// health.
func (m *Manager) devicesToAllocate(ctx context.Context, uid types.UID, container, r string, required int, reusable sets.Set[string], running bool) (sets.Set[string], error) {
	m.mu.Lock()
	needed := required
	var have sets.Set[string]
	if cd := m.pods[uid][container][r]; cd != nil {
		have = cd.ids
		needed -= have.Len()
		if needed != 0 {
			m.mu.Unlock()
			return nil, fmt.Errorf("pod %q container %q changed request for resource %q from %d to %d", uid, container, r, have.Len(), required)
		}
	}
	if running {
		m.mu.Unlock()
		return nil, nil
	}
	healthy, registered := m.healthy[r]
	switch {
	case !registered:
		m.mu.Unlock()
		return nil, fmt.Errorf("cannot allocate unregistered device %s", r)
	case healthy.Len() == 0:
		m.mu.Unlock()
		return nil, fmt.Errorf("no healthy devices present; cannot allocate unhealthy devices %s", r)
	case !healthy.IsSuperset(have):
		m.mu.Unlock()
		return nil, fmt.Errorf("previously allocated devices are no longer healthy; cannot allocate unhealthy devices %s", r)
	case needed == 0:
		m.mu.Unlock()
		return nil, nil
	}
	allocated := sets.New[string]()
	take := func(from sets.Set[string]) bool {
		for _, d := range sets.List(from.Difference(allocated)) {
			allocated.Insert(d)
			if needed--; needed == 0 {
				return true
			}
		}
		return false
	}
	if take(reusable) {
		m.mu.Unlock()
		return allocated, nil
	}
	available := healthy.Difference(m.inUseLocked(r))
	e := m.endpoints[r]
	m.mu.Unlock()
	if available.Len() < needed {
		return nil, fmt.Errorf("requested number of devices unavailable for %s. Requested: %d, Available: %d", r, needed, available.Len())
	}
	if e != nil && e.opts.GetGetPreferredAllocationAvailable() {
		actx, cancel := context.WithTimeout(ctx, allocateTimeout)
		resp, err := e.preferredAllocation(actx, sets.List(available.Union(allocated)), sets.List(allocated), required)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("device plugin GetPreferredAllocation rpc failed with err: %v", err)
		}
		if len(resp.GetContainerResponses()) > 0 {
			if take(sets.New(resp.ContainerResponses[0].DeviceIDs...).Intersection(available)) {
				return allocated, nil
			}
		}
	}
	if take(available) {
		return allocated, nil
	}
	return nil, fmt.Errorf("unexpectedly allocated less resources than required. Requested: %d, Got: %d", required, required-needed)
}

// ContainerOptions is what the device plugins add to container c's CRI
// config, the kubelet's GetDeviceRunContainerOptions: for each device
// plugin resource c limits, PreStartContainer is called if the plugin asked
// for it, and devices are allocated if c has none yet (a pod admitted
// before crivk restarted); then the plugins' responses are merged
// (resources by name; the first env, mount, device or annotation of a
// name wins). nil: c has no devices. An error is the container's
// CreateContainerConfigError.
func (m *Manager) ContainerOptions(ctx context.Context, pod *v1.Pod, c *v1.Container) (*cri.RunContainerOptions, error) {
	realloc := false
	for _, name := range slices.Sorted(maps.Keys(c.Resources.Limits)) {
		r, q := string(name), c.Resources.Limits[name]
		if !m.isDevicePluginResource(r) || q.Value() == 0 {
			continue
		}
		if err := m.preStart(ctx, pod.UID, c.Name, r); err != nil {
			return nil, err
		}
		m.mu.Lock()
		missing := m.pods[pod.UID][c.Name][r] == nil
		m.mu.Unlock()
		realloc = realloc || missing
	}
	if realloc {
		m.allocMu.Lock()
		err := m.allocateContainer(ctx, pod, c, map[string]sets.Set[string]{}, false)
		m.allocMu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	resources := m.pods[pod.UID][c.Name]
	if resources == nil {
		return nil, nil
	}
	return runOptions(resources), nil
}

// preStart calls the plugin's PreStartContainer for the devices of r
// allocated to container when the plugin asked for it (the kubelet's
// callPreStartContainerIfNeeded).
func (m *Manager) preStart(ctx context.Context, uid types.UID, container, r string) error {
	m.mu.Lock()
	e, ok := m.endpoints[r]
	if !ok {
		m.mu.Unlock()
		return fmt.Errorf("endpoint not found in cache for a registered resource: %s", r)
	}
	if !e.opts.GetPreStartRequired() {
		m.mu.Unlock()
		return nil
	}
	cd := m.pods[uid][container][r]
	m.mu.Unlock()
	if cd == nil {
		return fmt.Errorf("no devices found allocated in local cache for pod %s, container %s, resource %s", uid, container, r)
	}
	if _, err := e.preStartContainer(ctx, sets.List(cd.ids)); err != nil {
		return fmt.Errorf("device plugin PreStartContainer rpc failed with err: %v", err)
	}
	return nil
}

// runOptions merges the plugins' responses for one container into CRI
// options, as the kubelet's deviceRunContainerOptions: envs, devices (by
// container path), mounts (by container path), annotations and CDI devices
// (by name), the first of each key kept.
func runOptions(resources map[string]*containerDevices) *cri.RunContainerOptions {
	opts := &cri.RunContainerOptions{}
	envs, devs, mounts, cdi := sets.New[string](), sets.New[string](), sets.New[string](), sets.New[string]()
	for _, r := range slices.Sorted(maps.Keys(resources)) {
		resp := resources[r].resp
		for _, k := range slices.Sorted(maps.Keys(resp.Envs)) {
			if !envs.Has(k) {
				envs.Insert(k)
				opts.Envs = append(opts.Envs, &runtimeapi.KeyValue{Key: k, Value: []byte(resp.Envs[k])})
			}
		}
		for _, d := range resp.Devices {
			if !devs.Has(d.ContainerPath) {
				devs.Insert(d.ContainerPath)
				opts.Devices = append(opts.Devices, &runtimeapi.Device{ContainerPath: d.ContainerPath, HostPath: d.HostPath, Permissions: d.Permissions})
			}
		}
		for _, mt := range resp.Mounts {
			if !mounts.Has(mt.ContainerPath) {
				mounts.Insert(mt.ContainerPath)
				opts.Mounts = append(opts.Mounts, &runtimeapi.Mount{ContainerPath: mt.ContainerPath, HostPath: mt.HostPath, Readonly: mt.ReadOnly})
			}
		}
		for _, k := range slices.Sorted(maps.Keys(resp.Annotations)) {
			if _, ok := opts.Annotations[k]; !ok {
				if opts.Annotations == nil {
					opts.Annotations = map[string]string{}
				}
				opts.Annotations[k] = resp.Annotations[k]
			}
		}
		for _, d := range resp.CdiDevices {
			if !cdi.Has(d.Name) {
				cdi.Insert(d.Name)
				opts.CDIDevices = append(opts.CDIDevices, &runtimeapi.CDIDevice{Name: d.Name})
			}
		}
	}
	return opts
}

// InUse is, when pod has devices, the count of devices in use (by any
// pod) of each resource; nil when pod has none.
func (m *Manager) InUse(pod *v1.Pod) v1.ResourceList {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.pods[pod.UID]) == 0 {
		return nil
	}
	out := v1.ResourceList{}
	for _, containers := range m.pods {
		for _, resources := range containers {
			for r := range resources {
				if _, ok := out[v1.ResourceName(r)]; !ok {
					out[v1.ResourceName(r)] = *resource.NewQuantity(int64(m.inUseLocked(r).Len()), resource.DecimalSI)
				}
			}
		}
	}
	return out
}

// Devices are the device IDs of each resource allocated to container of
// pod uid (for tests and the node API).
func (m *Manager) Devices(uid types.UID, container string) map[string][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]string{}
	for r, cd := range m.pods[uid][container] {
		out[r] = sets.List(cd.ids)
	}
	return out
}
