package fleet

import (
	"strings"
	"sync"
	"testing"

	"github.com/crivk/crivk/lifecycle"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var _ lifecycle.HostAdmitter = (*NodePorts)(nil)

func portPod(uid, name string, hostNetwork bool, port int32, hostPort int32) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)},
		Spec: v1.PodSpec{HostNetwork: hostNetwork, Containers: []v1.Container{{Name: "c",
			Ports: []v1.ContainerPort{{ContainerPort: port, HostPort: hostPort, Protocol: v1.ProtocolTCP}}}}}}
}

func TestHostPortsAdmit(t *testing.T) {
	web := portPod("u-web", "web", false, 80, 8080)
	for name, tc := range map[string]struct {
		a, b    []*v1.Pod // the pods nodes a and b hold
		pod     *v1.Pod   // admitted on node a
		message string    // "": admitted
	}{
		"free port": {b: []*v1.Pod{web}, pod: portPod("u-p", "p", false, 80, 8081)},
		"held by another node": {b: []*v1.Pod{web}, pod: portPod("u-p", "p", false, 80, 8080),
			message: "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports: host port TCP/8080 (0.0.0.0) is used on this machine by pod ns/web of node b"},
		"hostNetwork port held by another node": {b: []*v1.Pod{web}, pod: portPod("u-p", "p", true, 8080, 0),
			message: "host port TCP/8080 (0.0.0.0) is used on this machine by pod ns/web of node b"},
		"held by the same node: its own admission's": {a: []*v1.Pod{web}, pod: portPod("u-p", "p", false, 80, 8080)},
		"the pod itself (a resize)":                  {b: []*v1.Pod{web}, pod: web},
		"no host port":                               {b: []*v1.Pod{web}, pod: portPod("u-p", "p", false, 8080, 0)},
	} {
		t.Run(name, func(t *testing.T) {
			h := &HostPorts{}
			a, b := h.Node("a"), h.Node("b")
			a.Watch(func() []*v1.Pod { return tc.a })
			b.Watch(func() []*v1.Pod { return tc.b })
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

// TestHostPortsOneLock: every node's view takes the same lock, so two
// nodes' decisions and insertions never interleave.
func TestHostPortsOneLock(t *testing.T) {
	h := &HostPorts{}
	a, b := h.Node("a"), h.Node("b")
	var held []*v1.Pod // what node a inserted, under the lock
	a.Watch(func() []*v1.Pod { return held })
	b.Watch(func() []*v1.Pod { return nil })
	var wg sync.WaitGroup
	admitted := make(chan string, 2)
	for _, n := range []*NodePorts{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := portPod("u-"+n.name, n.name, false, 80, 8080)
			n.Lock()
			defer n.Unlock()
			if n.Admit(p).Admit {
				if n == a {
					held = append(held, p)
				} else {
					// b's admitted pod is what b holds from now on.
					b.holding = func() []*v1.Pod { return []*v1.Pod{p} }
				}
				admitted <- n.name
			}
		}()
	}
	wg.Wait()
	close(admitted)
	var got []string
	for n := range admitted {
		got = append(got, n)
	}
	if len(got) != 1 {
		t.Errorf("admitted on %v, want exactly one node", got)
	}
}
