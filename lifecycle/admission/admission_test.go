package admission

import (
	"runtime"
	"strings"
	"testing"

	"github.com/crivk/crivk/internal/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node() *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"kubernetes.io/hostname": "n1", "disk": "ssd"}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi"), v1.ResourcePods: resource.MustParse("3"),
		}},
	}
}

func pod(name string, mutate ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c"}}}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func requests(cpu, mem string) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests = testutil.Resources(cpu, mem) }
}

func hostPort(port int32, ip string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: port, HostIP: ip}}
	}
}

func TestAdmit(t *testing.T) {
	other := "windows"
	if runtime.GOOS == "windows" {
		other = "linux"
	}
	tainted := node()
	tainted.Spec.Taints = []v1.Taint{{Key: "maintenance", Effect: v1.TaintEffectNoExecute}}
	noSchedule := node()
	noSchedule.Spec.Taints = []v1.Taint{{Key: "dedicated", Effect: v1.TaintEffectNoSchedule}}
	for name, tc := range map[string]struct {
		pod     *v1.Pod
		node    *v1.Node
		active  []*v1.Pod
		reason  string // "" admitted
		message string // substring
	}{
		"plain pod": {pod: pod("p")},
		"os label": {pod: pod("p", func(p *v1.Pod) { p.Labels = map[string]string{"kubernetes.io/os": other} }),
			reason: "PodOSSelectorNodeLabelDoesNotMatch", message: "`kubernetes.io/os` label doesn't match node label"},
		"os field": {pod: pod("p", func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: v1.OSName(other)} }),
			reason: "PodOSNotSupported", message: "OS field doesn't match node OS"},
		"memory beyond allocatable": {pod: pod("p", requests("", "10Ti")),
			reason: "OutOfmemory", message: "Node didn't have enough resource: memory, requested: 10995116277760, used: 0, capacity: 4294967296"},
		"cpu beyond what others leave": {pod: pod("p", requests("1500m", "")), active: []*v1.Pod{pod("a", requests("1", ""))},
			reason: "OutOfcpu", message: "cpu, requested: 1500, used: 1000, capacity: 2000"},
		"terminating pods still count": {pod: pod("p", requests("", "3Gi")), active: []*v1.Pod{pod("t", requests("", "2Gi"), func(p *v1.Pod) {
			now := metav1.Now()
			p.DeletionTimestamp = &now
		})}, reason: "OutOfmemory"},
		"fits beside others": {pod: pod("p", requests("500m", "1Gi")), active: []*v1.Pod{pod("a", requests("1", "2Gi"))}},
		"too many pods": {pod: pod("p"), active: []*v1.Pod{pod("a"), pod("b"), pod("c")},
			reason: "OutOfpods", message: "pods, requested: 1, used: 3, capacity: 3"},
		"init container peak counts": {pod: pod("p", requests("", "1Gi"), func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "i", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("5Gi")}}}}
		}), reason: "OutOfmemory"},
		"extended resource the node lacks": {pod: pod("p", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{"example.com/gpu": resource.MustParse("1")}
		}), reason: "OutOfexample.com/gpu"},
		"selector does not match": {pod: pod("p", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "hdd"} }),
			reason: "NodeAffinity", message: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"},
		"selector matches": {pod: pod("p", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} })},
		"required affinity does not match": {pod: pod("p", func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
				NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"a"}}}}}}}}
		}), reason: "NodeAffinity"},
		"another node's pod": {pod: pod("p", func(p *v1.Pod) { p.Spec.NodeName = "n2" }), reason: "NodeName",
			message: "Predicate NodeName failed: node(s) didn't match the requested node name"},
		"host port taken": {pod: pod("p", hostPort(8080, "")), active: []*v1.Pod{pod("a", hostPort(8080, "10.0.0.1"))},
			reason: "NodePorts", message: "didn't have free ports"},
		"host port on other IPs": {pod: pod("p", hostPort(8080, "10.0.0.2")), active: []*v1.Pod{pod("a", hostPort(8080, "10.0.0.1"))}},
		"NoExecute taint not tolerated": {pod: pod("p"), node: tainted, reason: "TaintToleration",
			message: "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"},
		"NoExecute taint tolerated": {pod: pod("p", func(p *v1.Pod) {
			p.Spec.Tolerations = []v1.Toleration{{Key: "maintenance", Operator: v1.TolerationOpExists}}
		}), node: tainted},
		"NoSchedule taints do not matter to the node": {pod: pod("p"), node: noSchedule},
	} {
		t.Run(name, func(t *testing.T) {
			n := tc.node
			if n == nil {
				n = node()
			}
			r := Admit(tc.pod, n, tc.active)
			if tc.reason == "" {
				if !r.Admit {
					t.Fatalf("rejected: %+v", r)
				}
				return
			}
			if r.Admit || r.Reason != tc.reason || !strings.Contains(r.Message, tc.message) {
				t.Errorf("got %+v, want reason %s with message containing %q", r, tc.reason, tc.message)
			}
		})
	}
}

func TestPortClash(t *testing.T) {
	hostNet := func(port int32) func(*v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: port}}
		}
	}
	udp := func(p *v1.Pod) { p.Spec.Containers[0].Ports[0].Protocol = v1.ProtocolUDP }
	for name, tc := range map[string]struct {
		pod, other *v1.Pod
		want       int32 // 0: no clash
	}{
		"same port, any IP":            {pod: pod("p", hostPort(8080, "")), other: pod("a", hostPort(8080, "10.0.0.1")), want: 8080},
		"same port, other IPs":         {pod: pod("p", hostPort(8080, "10.0.0.2")), other: pod("a", hostPort(8080, "10.0.0.1"))},
		"other port":                   {pod: pod("p", hostPort(8080, "")), other: pod("a", hostPort(8081, ""))},
		"other protocol":               {pod: pod("p", hostPort(8080, ""), udp), other: pod("a", hostPort(8080, ""))},
		"no host port":                 {pod: pod("p"), other: pod("a", hostPort(8080, ""))},
		"hostNetwork against hostPort": {pod: pod("p", hostNet(8080)), other: pod("a", hostPort(8080, "")), want: 8080},
		"hostPort against hostNetwork": {pod: pod("p", hostPort(9000, "")), other: pod("a", hostNet(9000)), want: 9000},
		"a container port is not a host port without hostNetwork": {pod: pod("p", func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 8080}}
		}), other: pod("a", hostNet(8080))},
	} {
		t.Run(name, func(t *testing.T) {
			p, clash := PortClash(tc.pod, tc.other)
			if clash != (tc.want != 0) || p.HostPort != tc.want {
				t.Errorf("PortClash = %+v, %v; want port %d", p, clash, tc.want)
			}
		})
	}
}

func TestPortUsedOnHost(t *testing.T) {
	r := PortUsedOnHost(v1.ContainerPort{HostPort: 8080, Protocol: v1.ProtocolTCP}, "ns/web", "crivk-1")
	want := "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports: host port TCP/8080 (0.0.0.0) is used on this machine by pod ns/web of node crivk-1"
	if r.Admit || r.Reason != "NodePorts" || r.Message != want {
		t.Errorf("got %+v, want reason NodePorts, message %q", r, want)
	}
	r = PortUsedBy(v1.ContainerPort{HostPort: 10251, HostIP: "127.0.0.1", Protocol: v1.ProtocolTCP}, "crivk's own listener: the node API of node crivk-1")
	want = "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports: host port TCP/10251 (127.0.0.1) is used on this machine by crivk's own listener: the node API of node crivk-1"
	if r.Admit || r.Reason != "NodePorts" || r.Message != want {
		t.Errorf("got %+v, want reason NodePorts, message %q", r, want)
	}
}
