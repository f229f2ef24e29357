package provider

import (
	"context"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

func TestNodeConditions(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	ready := cri.Readiness{RuntimeReady: true, NetworkReady: true}
	noNet := cri.Readiness{RuntimeReady: true, Message: "container runtime not ready: NetworkReady=false reason:NetworkPluginNotReady message:cni config uninitialized"}

	get := func(cs []v1.NodeCondition, typ v1.NodeConditionType) v1.NodeCondition {
		for _, c := range cs {
			if c.Type == typ {
				return c
			}
		}
		t.Fatalf("condition %s missing", typ)
		return v1.NodeCondition{}
	}

	first := NodeConditions(nil, ready, t0)
	if c := get(first, v1.NodeReady); c.Status != v1.ConditionTrue || c.Reason != "KubeletReady" {
		t.Errorf("ready runtime: Ready %+v", c)
	}
	if len(first) != 4 {
		t.Errorf("%d conditions, want Ready, MemoryPressure, DiskPressure, PIDPressure (NetworkUnavailable is the network provider's)", len(first))
	}

	down := NodeConditions(first, noNet, t1)
	c := get(down, v1.NodeReady)
	if c.Status != v1.ConditionFalse || c.Reason != "KubeletNotReady" || c.Message != noNet.Message {
		t.Errorf("network not ready: Ready %+v", c)
	}
	if !c.LastTransitionTime.Time.Equal(t1) {
		t.Errorf("Ready changed status but kept transition time %v", c.LastTransitionTime)
	}
	for _, c := range down {
		if c.Type == v1.NodeNetworkUnavailable {
			t.Errorf("NetworkUnavailable reported: %+v", c)
		}
	}
	if m := get(down, v1.NodeMemoryPressure); !m.LastTransitionTime.Time.Equal(t0) || !m.LastHeartbeatTime.Time.Equal(t1) {
		t.Errorf("unchanged MemoryPressure: transition %v heartbeat %v, want %v and %v", m.LastTransitionTime, m.LastHeartbeatTime, t0, t1)
	}
	if sameConditionStatus(first, down) {
		t.Error("sameConditionStatus: a Ready flip counted as no change")
	}
	if !sameConditionStatus(first, NodeConditions(first, ready, t1)) {
		t.Error("sameConditionStatus: heartbeat-only change counted as a change")
	}
}

func TestBuildNode(t *testing.T) {
	n, err := BuildNode(NodeConfig{
		Name: "n1", InternalIP: "192.0.2.7", KubeletPort: 10250, MaxPods: 110, RootDir: t.TempDir(),
		AgentVersion: "v1.35.4-crivk.0", RuntimeVersion: cri.VersionInfo{RuntimeName: "containerd", RuntimeVersion: "1.6.20"},
	}, cri.Readiness{RuntimeReady: true, NetworkReady: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if n.Status.Capacity.Pods().Value() != 110 || n.Status.Capacity.Memory().IsZero() || n.Status.Capacity.StorageEphemeral().IsZero() {
		t.Errorf("capacity %v", n.Status.Capacity)
	}
	if n.Status.NodeInfo.ContainerRuntimeVersion != "containerd://1.6.20" || n.Status.NodeInfo.KubeletVersion != "v1.35.4-crivk.0" {
		t.Errorf("nodeInfo %+v", n.Status.NodeInfo)
	}
	if n.Status.Addresses[0] != (v1.NodeAddress{Type: v1.NodeInternalIP, Address: "192.0.2.7"}) {
		t.Errorf("addresses %v", n.Status.Addresses)
	}
	if n.Labels["kubernetes.io/hostname"] != "n1" || n.Status.DaemonEndpoints.KubeletEndpoint.Port != 10250 {
		t.Errorf("labels %v endpoints %v", n.Labels, n.Status.DaemonEndpoints)
	}
	if _, err := BuildNode(NodeConfig{Name: "n1", RootDir: "/does/not/exist"}, cri.Readiness{}, time.Now()); err == nil {
		t.Error("a missing root dir must be an error")
	}
}

// fakeEngine records what the provider asks of the engine.
type fakeEngine struct {
	known   map[string]*v1.Pod // by namespace/name
	updated []string
	killed  []string
	unknown []string
	notify  func(*v1.Pod)
}

func (f *fakeEngine) UpdatePod(_ context.Context, pod *v1.Pod) {
	f.updated = append(f.updated, pod.Name)
}

func (f *fakeEngine) Kill(_ context.Context, pod *v1.Pod) bool {
	if _, ok := f.known[pod.Namespace+"/"+pod.Name]; !ok {
		return false
	}
	f.killed = append(f.killed, pod.Name)
	return true
}

func (f *fakeEngine) KillUnknown(_ context.Context, pod *v1.Pod) {
	f.unknown = append(f.unknown, pod.Name)
}
func (f *fakeEngine) PodByName(ns, name string) *v1.Pod { return f.known[ns+"/"+name] }
func (f *fakeEngine) Pods() []*v1.Pod                   { return nil }
func (f *fakeEngine) NotifyPods(cb func(*v1.Pod))       { f.notify = cb }

func TestProviderHandsPodsToTheEngine(t *testing.T) {
	running := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1"}, Status: v1.PodStatus{Phase: v1.PodRunning}}
	e := &fakeEngine{known: map[string]*v1.Pod{"ns/web": running}}
	p := New(e, nil, "n1", t.TempDir(), nil)
	ctx := context.Background()
	if err := p.CreatePod(ctx, running); err != nil || len(e.updated) != 1 {
		t.Fatalf("CreatePod: %v, engine updates %v", err, e.updated)
	}
	if err := p.UpdatePod(ctx, running); err != nil || len(e.updated) != 2 {
		t.Fatalf("UpdatePod: %v, engine updates %v", err, e.updated)
	}
	if err := p.DeletePod(ctx, running); err != nil || len(e.killed) != 1 || len(e.unknown) != 0 {
		t.Errorf("DeletePod of a known pod: %v, killed %v, unknown %v", err, e.killed, e.unknown)
	}
	stranger := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ghost", UID: "u2"}}
	if err := p.DeletePod(ctx, stranger); err != nil || len(e.unknown) != 1 {
		t.Errorf("DeletePod of an unknown pod: %v, unknown %v", err, e.unknown)
	}
	if got, err := p.GetPod(ctx, "ns", "web"); err != nil || got.UID != "u1" {
		t.Errorf("GetPod: %v %v", got, err)
	}
	if _, err := p.GetPod(ctx, "ns", "ghost"); !errdefs.IsNotFound(err) {
		t.Errorf("GetPod of an unknown pod: %v, want NotFound", err)
	}
	if st, err := p.GetPodStatus(ctx, "ns", "web"); err != nil || st.Phase != v1.PodRunning {
		t.Errorf("GetPodStatus: %v %v", st, err)
	}
}

// TestProviderNotifyKeepsOtherWritersConditions: a status the engine
// publishes reaches virtual-kubelet with the API's conditions that the
// node does not own (a readiness gate), not rolled back.
func TestProviderNotifyKeepsOtherWritersConditions(t *testing.T) {
	e := &fakeEngine{}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	api := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1"},
		Status: v1.PodStatus{Conditions: []v1.PodCondition{{Type: "example.com/gate", Status: v1.ConditionTrue}}}}
	if err := indexer.Add(api); err != nil {
		t.Fatal(err)
	}
	p := New(e, nil, "n1", t.TempDir(), corev1listers.NewPodLister(indexer))
	var got []*v1.Pod
	p.NotifyPods(context.Background(), func(pod *v1.Pod) { got = append(got, pod) })
	ours := api.DeepCopy()
	ours.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	e.notify(ours)
	if len(got) != 1 || len(got[0].Status.Conditions) != 2 {
		t.Fatalf("handed on %v, want Ready and the API's gate", got)
	}
	if ours.Status.Conditions[0].Type != v1.PodReady || len(ours.Status.Conditions) != 1 {
		t.Error("the engine's copy was modified")
	}
}
