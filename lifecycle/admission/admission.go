package admission

import (
	"fmt"
	"runtime"
	"sort"

	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// Result is an admission decision. Reason and Message say why a pod was
// rejected, in the kubelet's words.
type Result struct {
	Admit   bool
	Reason  string
	Message string
}

// The kubelet's rejection reasons (pkg/kubelet/lifecycle) and the
// scheduler plugins' names and messages it reports.
const (
	ReasonOSLabel   = "PodOSSelectorNodeLabelDoesNotMatch"
	ReasonOSField   = "PodOSNotSupported"
	ReasonAffinity  = "NodeAffinity"
	ReasonNodeName  = "NodeName"
	ReasonNodePorts = "NodePorts"
	ReasonTaint     = "TaintToleration"
	// outOfPrefix + resource name: OutOfcpu, OutOfmemory, OutOfpods, ...
	outOfPrefix = "OutOf"

	msgOSLabel   = "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"
	msgOSField   = "Failed to admit pod as the OS field doesn't match node OS"
	errAffinity  = "node(s) didn't match Pod's node affinity/selector"
	errNodeName  = "node(s) didn't match the requested node name"
	errNodePorts = "node(s) didn't have free ports for the requested pod ports"
	errTaint     = "node(s) had taints that the pod didn't tolerate"
)

var admitted = Result{Admit: true}

// Admit decides whether node may run pod while active (the other pods that
// still hold resources on the node, terminating ones included) run: the
// checks that no preemption can help (Precheck), then the first failure of
// the general predicates (Filter).
func Admit(pod *v1.Pod, node *v1.Node, active []*v1.Pod) Result {
	if r := Precheck(pod, node); !r.Admit {
		return r
	}
	if fs := Filter(pod, node, active); len(fs) > 0 {
		return fs[0].Result
	}
	return admitted
}

// Precheck is the part of Admit that evicting pods cannot help, which the
// kubelet runs before the predicates (and so before any preemption): the
// OS label and field, and supplementalGroupsPolicy.
func Precheck(pod *v1.Pod, node *v1.Node) Result {
	if os, ok := pod.Labels[v1.LabelOSStable]; ok && os != runtime.GOOS {
		return Result{Reason: ReasonOSLabel, Message: msgOSLabel}
	}
	if pod.Spec.OS != nil && string(pod.Spec.OS.Name) != runtime.GOOS {
		return Result{Reason: ReasonOSField, Message: msgOSField}
	}
	return supplementalGroupsPolicy(pod, node)
}

// Failure is one failed general predicate: Result in the kubelet's words,
// and, for a lack of a resource, Insufficient (which preemption can free).
type Failure struct {
	Result       Result
	Insufficient *Insufficient
}

// Insufficient is a resource pod does not fit in (the kubelet's
// InsufficientResourceError), in millicores for cpu, the plain value
// otherwise.
type Insufficient struct {
	Resource                  v1.ResourceName
	Requested, Used, Capacity int64
}

// Filter is the kubelet's generalFilter with every failure kept, in its
// order: each resource pod does not fit in (pods, cpu, memory,
// ephemeral-storage, the others by name), node affinity, node name, host
// ports, NoExecute taints. None: the predicates admit the pod.
func Filter(pod *v1.Pod, node *v1.Node, active []*v1.Pod) []Failure {
	var out []Failure
	for _, in := range fits(pod, node, active) {
		out = append(out, Failure{Result: insufficient(in), Insufficient: &in})
	}
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !ok {
		out = append(out, Failure{Result: predicateFailure(ReasonAffinity, errAffinity)})
	}
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
		out = append(out, Failure{Result: predicateFailure(ReasonNodeName, errNodeName)})
	}
	if portsInUse(pod, active) {
		out = append(out, Failure{Result: predicateFailure(ReasonNodePorts, errNodePorts)})
	}
	noExecute := func(t *v1.Taint) bool { return t.Effect == v1.TaintEffectNoExecute }
	if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, noExecute, false); untolerated {
		out = append(out, Failure{Result: predicateFailure(ReasonTaint, errTaint)})
	}
	return out
}

func predicateFailure(name, desc string) Result {
	return Result{Reason: name, Message: fmt.Sprintf("Predicate %s failed: %s", name, desc)}
}

// fits checks the pod's requests against the node's allocatable minus what
// the active pods request, resource by resource in the scheduler's order
// (pods, cpu, memory, ephemeral-storage, then the others by name), and
// returns every resource that does not fit.
func fits(pod *v1.Pod, node *v1.Node, active []*v1.Pod) []Insufficient {
	var out []Insufficient
	alloc := node.Status.Allocatable
	if maxPods, ok := alloc[v1.ResourcePods]; ok && int64(len(active))+1 > maxPods.Value() {
		out = append(out, Insufficient{Resource: v1.ResourcePods, Requested: 1, Used: int64(len(active)), Capacity: maxPods.Value()})
	}
	want := podutil.PodRequests(pod)
	used := v1.ResourceList{}
	for _, p := range active {
		for name, q := range podutil.PodRequests(p) {
			sum := q.DeepCopy()
			if prev, ok := used[name]; ok {
				sum.Add(prev)
			}
			used[name] = sum
		}
	}
	order := []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage}
	var others []string
	for name := range want {
		if name != v1.ResourceCPU && name != v1.ResourceMemory && name != v1.ResourceEphemeralStorage && name != v1.ResourcePods {
			others = append(others, string(name))
		}
	}
	sort.Strings(others)
	for _, name := range others {
		order = append(order, v1.ResourceName(name))
	}
	for _, name := range order {
		req, ok := want[name]
		if !ok || req.IsZero() {
			continue
		}
		capacity, u := alloc[name], used[name]
		if value(name, req) > value(name, capacity)-value(name, u) {
			out = append(out, Insufficient{Resource: name, Requested: value(name, req), Used: value(name, u), Capacity: value(name, capacity)})
		}
	}
	return out
}

// value is a quantity in the unit the kubelet reports it in: millicores
// for cpu, the plain value otherwise.
func value(name v1.ResourceName, q resource.Quantity) int64 {
	if name == v1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

func insufficient(in Insufficient) Result {
	return Result{Reason: outOfPrefix + string(in.Resource), Message: fmt.Sprintf(
		"Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d", in.Resource, in.Requested, in.Used, in.Capacity)}
}

// portsInUse reports whether a host port of pod (protocol, host IP, port)
// is taken by an active pod; host IP 0.0.0.0 or empty conflicts with all.
func portsInUse(pod *v1.Pod, active []*v1.Pod) bool {
	for _, p := range active {
		if _, clash := PortClash(pod, p); clash {
			return true
		}
	}
	return false
}

// PortClash returns the first host port of pod (protocol, host IP, port)
// that other holds too, the NodePorts predicate's rule: a host IP
// 0.0.0.0, :: or empty clashes with every IP. The ports are the
// containers' hostPorts; a hostNetwork pod's declared containerPorts are
// its host ports (as the API's defaulting makes them), and what it opens
// without declaring cannot be known.
func PortClash(pod, other *v1.Pod) (v1.ContainerPort, bool) {
	want := hostPorts(pod)
	if len(want) == 0 {
		return v1.ContainerPort{}, false
	}
	for _, have := range hostPorts(other) {
		for _, w := range want {
			if w.HostPort == have.HostPort && w.Protocol == have.Protocol &&
				(w.HostIP == have.HostIP || anyIP(w.HostIP) || anyIP(have.HostIP)) {
				return w, true
			}
		}
	}
	return v1.ContainerPort{}, false
}

// PortUsedOnHost is the refusal of a pod whose host port p is used on this
// machine by pod holder (namespace/name) of another node served by the
// same process (internal/fleet): the kubelet's NodePorts reason, and its
// message followed by where the port is used.
func PortUsedOnHost(p v1.ContainerPort, holder, node string) Result {
	return PortUsedBy(p, fmt.Sprintf("pod %s of node %s", holder, node))
}

// PortUsedBy is the refusal of a pod whose host port p is used on this
// machine by who (PortUsedOnHost's "pod <ns>/<name> of node <node>", or a
// listener of the crivk process itself, internal/fleet): the kubelet's
// NodePorts reason, and its message followed by where the port is used.
func PortUsedBy(p v1.ContainerPort, who string) Result {
	r := predicateFailure(ReasonNodePorts, errNodePorts)
	ip := p.HostIP
	if ip == "" {
		ip = "0.0.0.0"
	}
	r.Message += fmt.Sprintf(": host port %s/%d (%s) is used on this machine by %s", p.Protocol, p.HostPort, ip, who)
	return r
}

func anyIP(ip string) bool { return ip == "" || ip == "0.0.0.0" || ip == "::" }

func hostPorts(pod *v1.Pod) []v1.ContainerPort {
	var out []v1.ContainerPort
	all := append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range all {
		for _, p := range c.Ports {
			if pod.Spec.HostNetwork && p.HostPort <= 0 {
				p.HostPort = p.ContainerPort
			}
			if p.HostPort <= 0 {
				continue
			}
			if p.Protocol == "" {
				p.Protocol = v1.ProtocolTCP
			}
			out = append(out, p)
		}
	}
	return out
}
