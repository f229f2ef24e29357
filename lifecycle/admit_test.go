package lifecycle

import (
	"context"
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
