package fleet

import (
	"sync"

	"github.com/crivk/crivk/lifecycle/admission"
	v1 "k8s.io/api/core/v1"
)

// HostPorts is the host-wide admission of host ports for the nodes of one
// process (docs/scale.md): one machine has one set of ports, so a pod
// whose hostPort (or hostNetwork containerPort) another node's pod holds
// is refused, as the kubelet refuses a clash with its own pods (reason
// NodePorts), with a message naming the other node and pod
// (admission.PortUsedOnHost). A clash with a pod of the same node is that
// node's own admission (admission.Admit).
//
// Each node's engine gets its Node view as lifecycle.Config.Host. The
// view's Lock is the one host-wide lock: every node's admission decision
// and the insertion of the admitted pod into that node's engine happen
// under it, so two nodes admitting at once cannot both take a port. What
// a node holds is read from its engine at each decision (Node.Watch), not
// recorded here: a pod stops holding its ports when its worker knows it
// terminated, with nothing to release.
type HostPorts struct {
	// mu is the host-wide admission lock; it also guards nodes.
	mu    sync.Mutex
	nodes []*NodePorts
}

// NodePorts is one node's view of HostPorts: a lifecycle.HostAdmitter.
type NodePorts struct {
	host *HostPorts
	name string
	// holding lists the node's pods that hold its resources
	// (lifecycle.Engine.HoldingPods); nil until Watch. Guarded by host.mu.
	holding func() []*v1.Pod
}

// Node registers node name and returns its view. Every node is registered
// before any engine admits a pod.
func (h *HostPorts) Node(name string) *NodePorts {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := &NodePorts{host: h, name: name}
	h.nodes = append(h.nodes, n)
	return n
}

// Watch sets how the node's holding pods are listed, once its engine
// exists (the engine is built with the view, so the order is view, engine,
// Watch). Until then the node holds nothing.
func (n *NodePorts) Watch(holding func() []*v1.Pod) {
	n.host.mu.Lock()
	defer n.host.mu.Unlock()
	n.holding = holding
}

// Lock takes the host-wide admission lock.
func (n *NodePorts) Lock() { n.host.mu.Lock() }

// Unlock releases it.
func (n *NodePorts) Unlock() { n.host.mu.Unlock() }

// Admit refuses pod when one of its host ports is held by a pod of
// another node of the process. It must be called with the lock held
// (lifecycle.Engine does).
func (n *NodePorts) Admit(pod *v1.Pod) admission.Result {
	for _, other := range n.host.nodes {
		if other == n || other.holding == nil {
			continue
		}
		for _, p := range other.holding() {
			if p.UID == pod.UID {
				continue
			}
			if port, clash := admission.PortClash(pod, p); clash {
				return admission.PortUsedOnHost(port, p.Namespace+"/"+p.Name, other.name)
			}
		}
	}
	return admission.Result{Admit: true}
}
