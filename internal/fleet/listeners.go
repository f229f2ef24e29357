package fleet

import (
	"fmt"
	"net"
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// Listener is a TCP port the crivk process itself listens on. HostPorts
// counts it as held on this machine (HostPorts.Listening): a pod asking
// for it is refused as if a pod held it.
type Listener struct {
	// Port is the TCP port.
	Port int
	// HostIP is the address it is bound on: "" (or 0.0.0.0, ::) is
	// every address of the host, which clashes with any host IP.
	HostIP string
	// What names it in a refusal, e.g. "the node API of node crivk-0".
	What string
}

// Addresses are the process' listening settings besides the node ports
// of its Specs.
type Addresses struct {
	// Node is --address: the node API's and the read-only port's.
	Node string
	// HealthzPort (0: off) and HealthzBindAddress are /healthz's.
	HealthzPort        int
	HealthzBindAddress string
	// Profiling is --profiling-address (host:port, "" off).
	Profiling string
}

// Listeners are the TCP ports the process serving specs listens on: each
// node's API port and read-only port (when on) on a.Node, /healthz on its
// bind address, and the profiling server (net/http/pprof and, with
// --tracing, /debug/tracez). A profiling address whose port is 0 (chosen
// by the kernel when listening) or not a number (a service name, looked up
// only when listening) is left out: only a port known before the pods are
// admitted can be refused. A host that is
// not an IP address counts as every address ("localhost" as 127.0.0.1),
// which may refuse a pod that could have bound beside it, never the
// reverse.
func Listeners(specs []Spec, a Addresses) []Listener {
	var out []Listener
	for _, s := range specs {
		out = append(out, Listener{Port: s.Port, HostIP: hostIP(a.Node), What: "the node API of node " + s.Name})
		if s.ReadOnlyPort > 0 {
			out = append(out, Listener{Port: s.ReadOnlyPort, HostIP: hostIP(a.Node), What: "the read-only node API of node " + s.Name})
		}
	}
	if a.HealthzPort > 0 {
		out = append(out, Listener{Port: a.HealthzPort, HostIP: hostIP(a.HealthzBindAddress), What: "/healthz"})
	}
	if a.Profiling != "" {
		if host, port, err := net.SplitHostPort(a.Profiling); err == nil {
			if p, err := strconv.Atoi(port); err == nil && p > 0 {
				out = append(out, Listener{Port: p, HostIP: hostIP(host), What: "the profiling server (--profiling-address)"})
			}
		}
	}
	return out
}

// hostIP is the host IP a listener on host is bound on, in the form a
// pod's hostIP is compared with (admission.PortClash).
func hostIP(host string) string {
	if host == "localhost" {
		return "127.0.0.1"
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.IsUnspecified() {
		return ""
	}
	return ip.String()
}

// heldBy is a listener as a pod holding its port would be, so that a
// clash follows the NodePorts rule itself (admission.PortClash).
func (l Listener) heldBy() *v1.Pod {
	return &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "crivk", Ports: []v1.ContainerPort{{
		HostPort: int32(l.Port), ContainerPort: int32(l.Port), HostIP: l.HostIP, Protocol: v1.ProtocolTCP}}}}}}
}

// String is how the listener is named in a refusal.
func (l Listener) String() string {
	return fmt.Sprintf("crivk's own listener: %s", l.What)
}
