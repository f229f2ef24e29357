package lifecycle

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/crivk/crivk/lifecycle/admission"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
)

// TestEngineRejectsWhatDoesNotFit: a pod asking for more memory than the
// node has is published Failed with the kubelet's reason and message and
// a Warning event, nothing of it reaches the runtime, a later update does
// not start it, and its deletion removes the object at once. A pod that
// fits beside it runs.
func TestEngineRejectsWhatDoesNotFit(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
		v1.ResourceMemory: resource.MustParse("1Gi"), v1.ResourceCPU: resource.MustParse("2"), v1.ResourcePods: resource.MustParse("110"),
	}}}
	rec := record.NewFakeRecorder(10)
	f := newEngineFixture(t, func(c *Config) {
		c.Node = func() *v1.Node { return node }
		c.Recorder = rec
	})
	big := enginePod("uid-big", "big", v1.RestartPolicyAlways)
	big.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("10Ti")}
	f.e.UpdatePod(context.Background(), big)
	f.eventually(t, "the rejection to be published", func() bool { return f.lastPhase("uid-big") == v1.PodFailed })
	p := f.lastPublished("uid-big")
	if p.Status.Reason != "OutOfmemory" || p.Status.Message != "Pod was rejected: Node didn't have enough resource: memory, requested: 10995116277760, used: 0, capacity: 1073741824" {
		t.Errorf("rejected status reason %q message %q", p.Status.Reason, p.Status.Message)
	}
	if ev := <-rec.Events; ev != "Warning OutOfmemory Node didn't have enough resource: memory, requested: 10995116277760, used: 0, capacity: 1073741824" {
		t.Errorf("event %q", ev)
	}
	f.e.UpdatePod(context.Background(), big) // a later update
	small := enginePod("uid-small", "small", v1.RestartPolicyAlways)
	f.startRunning(t, small)
	if n := len(f.rt.ops("uid-big", "SyncPod", "KillPod")); n != 0 {
		t.Errorf("the rejected pod reached the runtime %d times", n)
	}
	if got := f.e.PodByName(big.Namespace, "big"); got == nil || got.Status.Phase != v1.PodFailed {
		t.Errorf("PodByName of the rejected pod: %v", got)
	}
	if !f.e.Kill(context.Background(), deleted(big, f.clock.Now(), nil)) {
		t.Fatal("Kill of a rejected pod returned false")
	}
	f.eventually(t, "the rejected pod's object deleted", func() bool { return f.rt.count("uid-big", "OnTerminated") == 1 })
}

// TestEngineRejectsUnenforceableAppArmor: on a node without AppArmor a pod
// asking for a profile is published Failed with the kubelet's reason and
// message and never reaches the runtime; with AppArmor it runs. The check
// comes after the predicates, as the kubelet's handlers are ordered.
func TestEngineRejectsUnenforceableAppArmor(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
		v1.ResourceMemory: resource.MustParse("1Gi"), v1.ResourceCPU: resource.MustParse("2"), v1.ResourcePods: resource.MustParse("110"),
	}}}
	profile := func(uid types.UID, name string) *v1.Pod {
		p := enginePod(uid, name, v1.RestartPolicyAlways)
		p.Status.Phase = v1.PodPending
		p.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}
		return p
	}
	for name, tc := range map[string]struct {
		enabled bool
		mutate  func(*v1.Pod)
		reason  string
		message string
	}{
		"no AppArmor on the host": {reason: "AppArmor", message: "Cannot enforce AppArmor: AppArmor is not enabled on the host"},
		"predicates first": {mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("10Ti")}
		}, reason: "OutOfmemory", message: "Node didn't have enough resource: memory, requested: 10995116277760, used: 0, capacity: 1073741824"},
		"AppArmor on the host": {enabled: true},
	} {
		t.Run(name, func(t *testing.T) {
			rec := record.NewFakeRecorder(10)
			f := newEngineFixture(t, func(c *Config) {
				c.Node = func() *v1.Node { return node }
				c.Recorder = rec
				c.AppArmor = admission.NewAppArmor(tc.enabled)
			})
			p := profile("uid-aa", "aa")
			if tc.mutate != nil {
				tc.mutate(p)
			}
			if tc.reason == "" {
				f.startRunning(t, p)
				return
			}
			f.e.UpdatePod(context.Background(), p)
			f.eventually(t, "the rejection to be published", func() bool { return f.lastPhase("uid-aa") == v1.PodFailed })
			got := f.lastPublished("uid-aa")
			if got.Status.Reason != tc.reason || got.Status.Message != "Pod was rejected: "+tc.message {
				t.Errorf("rejected status reason %q message %q", got.Status.Reason, got.Status.Message)
			}
			if ev := <-rec.Events; ev != "Warning "+tc.reason+" "+tc.message {
				t.Errorf("event %q", ev)
			}
			if n := len(f.rt.ops("uid-aa", "SyncPod", "KillPod")); n != 0 {
				t.Errorf("the rejected pod reached the runtime %d times", n)
			}
		})
	}
}

// fakeHost is a HostAdmitter that refuses the pods named in refuse and
// counts how often its lock was taken.
type fakeHost struct {
	sync.Mutex
	locks  atomic.Int32
	refuse map[string]admission.Result
}

func (h *fakeHost) Lock() { h.locks.Add(1); h.Mutex.Lock() }

func (h *fakeHost) Admit(pod *v1.Pod) admission.Result {
	if r, ok := h.refuse[pod.Name]; ok {
		return r
	}
	return admission.Result{Admit: true}
}

// TestEngineHostAdmission: a node of many takes the host-wide lock for its
// admission decisions and refuses the pod the host refuses (a host port
// another node's pod holds) with that reason and message, after its own
// predicates; HoldingPods lists the admitted pod for the other nodes.
func TestEngineHostAdmission(t *testing.T) {
	clash := admission.PortUsedOnHost(v1.ContainerPort{HostPort: 8080, Protocol: v1.ProtocolTCP}, "ns/web", "node-1")
	host := &fakeHost{refuse: map[string]admission.Result{"clash": clash}}
	rec := record.NewFakeRecorder(10)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0"}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
		v1.ResourceMemory: resource.MustParse("1Gi"), v1.ResourceCPU: resource.MustParse("2"), v1.ResourcePods: resource.MustParse("110"),
	}}}
	f := newEngineFixture(t, func(c *Config) {
		c.Node = func() *v1.Node { return node }
		c.Recorder = rec
		c.Host = host
	})
	p := enginePod("uid-clash", "clash", v1.RestartPolicyAlways)
	f.e.UpdatePod(context.Background(), p)
	f.eventually(t, "the rejection to be published", func() bool { return f.lastPhase("uid-clash") == v1.PodFailed })
	got := f.lastPublished("uid-clash")
	if got.Status.Reason != "NodePorts" || got.Status.Message != "Pod was rejected: "+clash.Message {
		t.Errorf("rejected status reason %q message %q", got.Status.Reason, got.Status.Message)
	}
	if ev := <-rec.Events; ev != "Warning NodePorts "+clash.Message {
		t.Errorf("event %q", ev)
	}
	if host.locks.Load() == 0 {
		t.Error("the host-wide lock was never taken")
	}
	ok := enginePod("uid-ok", "ok", v1.RestartPolicyAlways)
	f.startRunning(t, ok)
	if n := len(f.rt.ops("uid-clash", "SyncPod", "KillPod")); n != 0 {
		t.Errorf("the rejected pod reached the runtime %d times", n)
	}
	var holding []string
	for _, h := range f.e.HoldingPods() {
		holding = append(holding, string(h.UID))
	}
	if len(holding) != 1 || holding[0] != "uid-ok" {
		t.Errorf("HoldingPods = %v, want [uid-ok]", holding)
	}
}
