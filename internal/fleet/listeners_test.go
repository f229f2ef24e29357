package fleet

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestListeners(t *testing.T) {
	three := func(ro int) []Spec {
		s := base()
		s.Count, s.ReadOnlyPort, s.HealthzPort = 3, ro, 10248
		specs, err := Specs(s)
		if err != nil {
			t.Fatal(err)
		}
		return specs
	}
	api := func(port int, ip, node string) Listener {
		return Listener{Port: port, HostIP: ip, What: "the node API of node " + node}
	}
	healthz := Listener{Port: 10248, HostIP: "127.0.0.1", What: "/healthz"}
	for name, tc := range map[string]struct {
		specs []Spec
		a     Addresses
		want  []Listener
	}{
		"defaults: every node's API on every address, /healthz on loopback": {
			specs: three(0), a: Addresses{Node: "0.0.0.0", HealthzPort: 10248, HealthzBindAddress: "127.0.0.1"},
			want: []Listener{api(10260, "", "crivk-0"), api(10261, "", "crivk-1"), api(10262, "", "crivk-2"), healthz},
		},
		"read-only ports, an address, no /healthz": {
			specs: three(10300), a: Addresses{Node: "10.0.0.5"},
			want: []Listener{
				api(10260, "10.0.0.5", "crivk-0"), {Port: 10300, HostIP: "10.0.0.5", What: "the read-only node API of node crivk-0"},
				api(10261, "10.0.0.5", "crivk-1"), {Port: 10301, HostIP: "10.0.0.5", What: "the read-only node API of node crivk-1"},
				api(10262, "10.0.0.5", "crivk-2"), {Port: 10302, HostIP: "10.0.0.5", What: "the read-only node API of node crivk-2"},
			},
		},
		"profiling on localhost, IPv6 any": {
			specs: three(0)[:1], a: Addresses{Node: "::", Profiling: "localhost:6060"},
			want: []Listener{api(10260, "", "crivk-0"), {Port: 6060, HostIP: "127.0.0.1", What: "the profiling server (--profiling-address)"}},
		},
		"profiling on every address": {
			specs: three(0)[:1], a: Addresses{Node: "0.0.0.0", Profiling: ":6060"},
			want: []Listener{api(10260, "", "crivk-0"), {Port: 6060, What: "the profiling server (--profiling-address)"}},
		},
		"profiling on a service name: not looked up, left out": {
			specs: three(0)[:1], a: Addresses{Node: "0.0.0.0", Profiling: "127.0.0.1:http"},
			want: []Listener{api(10260, "", "crivk-0")},
		},
		"profiling on a kernel-chosen port: unknown, left out": {
			specs: three(0)[:1], a: Addresses{Node: "0.0.0.0", Profiling: "127.0.0.1:0"},
			want: []Listener{api(10260, "", "crivk-0")},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Listeners(tc.specs, tc.a); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Listeners =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

// TestHostPortsOwnListeners: a pod asking for a port the process listens
// on is refused on every node, naming the listener, by the NodePorts rule
// (protocol, host IP, port).
func TestHostPortsOwnListeners(t *testing.T) {
	own := []Listener{
		{Port: 10250, What: "the node API of node a"},
		{Port: 10251, What: "the node API of node b"},
		{Port: 10248, HostIP: "127.0.0.1", What: "/healthz"},
	}
	withIP := func(p *v1.Pod, ip string) *v1.Pod { p.Spec.Containers[0].Ports[0].HostIP = ip; return p }
	udp := portPod("u-p", "p", true, 10250, 0)
	udp.Spec.Containers[0].Ports[0].Protocol = v1.ProtocolUDP
	const prefix = "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports: "
	for name, tc := range map[string]struct {
		pod     *v1.Pod // admitted on node a
		message string  // "": admitted
	}{
		"hostNetwork containerPort of its own node's API": {pod: portPod("u-p", "p", true, 10250, 0),
			message: prefix + "host port TCP/10250 (0.0.0.0) is used on this machine by crivk's own listener: the node API of node a"},
		"hostPort of another node's API": {pod: portPod("u-p", "p", false, 80, 10251),
			message: prefix + "host port TCP/10251 (0.0.0.0) is used on this machine by crivk's own listener: the node API of node b"},
		"hostPort on an IP of a port bound on every address": {pod: withIP(portPod("u-p", "p", false, 80, 10251), "10.0.0.5"),
			message: "host port TCP/10251 (10.0.0.5) is used on this machine by crivk's own listener: the node API of node b"},
		"/healthz's port on every address": {pod: portPod("u-p", "p", true, 10248, 0),
			message: "host port TCP/10248 (0.0.0.0) is used on this machine by crivk's own listener: /healthz"},
		"/healthz's port on loopback": {pod: withIP(portPod("u-p", "p", false, 80, 10248), "127.0.0.1"),
			message: "host port TCP/10248 (127.0.0.1) is used on this machine by crivk's own listener: /healthz"},
		"/healthz's port on another IP":       {pod: withIP(portPod("u-p", "p", false, 80, 10248), "10.0.0.5")},
		"UDP on a node API's TCP port":        {pod: udp},
		"a port crivk does not use":           {pod: portPod("u-p", "p", true, 10252, 0)},
		"a containerPort without hostNetwork": {pod: portPod("u-p", "p", false, 10250, 0)},
	} {
		t.Run(name, func(t *testing.T) {
			h := &HostPorts{}
			a, b := h.Node("a"), h.Node("b")
			h.Listening(own)
			a.Watch(func() []*v1.Pod { return nil })
			b.Watch(func() []*v1.Pod { return nil })
			a.Lock()
			r := a.Admit(tc.pod)
			a.Unlock()
			if tc.message == "" {
				if !r.Admit {
					t.Fatalf("refused: %+v", r)
				}
				return
			}
			if r.Admit || r.Reason != "NodePorts" || !strings.Contains(r.Message, tc.message) {
				t.Errorf("got %+v, want NodePorts with %q", r, tc.message)
			}
		})
	}
}
