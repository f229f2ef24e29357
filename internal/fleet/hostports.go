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
//
// The process' own listeners (Listening: every node's API port, /healthz,
// ...) are held too, by crivk itself, for as long as it runs: a pod asking
// for one is refused (admission.PortUsedBy), rather than started to fail
// to bind it (hostNetwork) or to take its traffic (a hostPort's NAT rule).
type HostPorts struct {
	// mu is the host-wide admission lock; it also guards nodes and own.
	mu    sync.Mutex
	nodes []*NodePorts
	// own are the process' listeners, each as a pod holding its port.
	own []ownPort
}

type ownPort struct {
	l   Listener
	pod *v1.Pod
}

// Listening records the TCP ports the process itself listens on
// (Listeners), replacing any recorded before; it is called before any
// engine admits a pod.
func (h *HostPorts) Listening(ls []Listener) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.own = make([]ownPort, len(ls))
	for i, l := range ls {
		h.own[i] = ownPort{l: l, pod: l.heldBy()}
	}
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

// Admit refuses pod when one of its host ports is one the process
// listens on, or is held by a pod of another node of the process. It must
// be called with the lock held (lifecycle.Engine does).
func (n *NodePorts) Admit(pod *v1.Pod) admission.Result {
	for _, o := range n.host.own {
		if port, clash := admission.PortClash(pod, o.pod); clash {
			return admission.PortUsedBy(port, o.l.String())
		}
	}
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
