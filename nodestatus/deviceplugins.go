package nodestatus

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// DevicePluginCapacity is the device plugin manager's capacity
// (devicemanager's Manager.Capacity, the kubelet's
// GetDevicePluginResourceCapacity): each resource's count of devices and
// of healthy ones, and the resources removed since the last call.
type DevicePluginCapacity func() (capacity, allocatable v1.ResourceList, removed []string)

// SetDevicePlugins makes every check of the status loop write the device
// plugins' resources into the node's capacity and allocatable, as the
// kubelet's MachineInfo setter: capacity is the count of devices,
// allocatable that of the healthy ones (the capacity when the plugin has
// listed nothing), and a removed resource stays with capacity and
// allocatable 0, so that it is told apart from a cluster-level resource. A
// change is reported at once. Call it before NotifyNodeStatus.
func (p *NodeProvider) SetDevicePlugins(f DevicePluginCapacity) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.devicePlugins = f
}

// updateDevicePlugins sets p.node's device plugin resources and reports
// whether they changed; p.mu must be held.
func (p *NodeProvider) updateDevicePlugins() bool {
	if p.devicePlugins == nil {
		return false
	}
	capacity, allocatable, removed := p.devicePlugins()
	wantCap, wantAlloc := v1.ResourceList{}, v1.ResourceList{}
	for _, r := range removed {
		wantCap[v1.ResourceName(r)] = *resource.NewQuantity(0, resource.DecimalSI)
		wantAlloc[v1.ResourceName(r)] = *resource.NewQuantity(0, resource.DecimalSI)
	}
	for k, q := range capacity {
		wantCap[k], wantAlloc[k] = q, q
	}
	for k, q := range allocatable {
		wantAlloc[k] = q
	}
	if p.node.Status.Capacity == nil {
		p.node.Status.Capacity = v1.ResourceList{}
	}
	if p.node.Status.Allocatable == nil {
		p.node.Status.Allocatable = v1.ResourceList{}
	}
	changed := setQuantities(p.node.Status.Capacity, wantCap)
	return setQuantities(p.node.Status.Allocatable, wantAlloc) || changed
}

// setQuantities sets want's quantities into rl and reports whether any
// differed.
func setQuantities(rl, want v1.ResourceList) bool {
	changed := false
	for k, q := range want {
		if old, ok := rl[k]; !ok || old.Cmp(q) != 0 {
			rl[k] = q
			changed = true
		}
	}
	return changed
}
