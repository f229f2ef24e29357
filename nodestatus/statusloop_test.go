package nodestatus

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
)

// switchableRuntime reports the readiness (or the error) it was last given.
type switchableRuntime struct {
	mu  sync.Mutex
	rd  cri.Readiness
	err error
}

func (s *switchableRuntime) Status(context.Context) (cri.Readiness, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rd, s.err
}

func (s *switchableRuntime) fail(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

func (s *switchableRuntime) set(rd cri.Readiness) {
	s.mu.Lock()
	s.rd = rd
	s.mu.Unlock()
}

func TestNodeEvents(t *testing.T) {
	ready := cri.Readiness{RuntimeReady: true, NetworkReady: true}
	rt := &switchableRuntime{rd: ready}
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	n.Status.Conditions = NodeConditions(nil, ready, nil, time.Now())
	rec := &refRecorder{FakeRecorder: record.NewFakeRecorder(100)}
	// The Node's UID becomes known after Starting and the first
	// NodeReady: the later events carry it (the kubelet's nodeRefWithUID).
	ref := NewNodeRef("n1")
	var uid atomic.Value
	uid.Store(types.UID(""))
	ref.ResolveFrom(func() types.UID { return uid.Load().(types.UID) })
	p := NewNodeProvider(rt, n, 5*time.Millisecond, nil, rec, ref, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p.NotifyNodeStatus(ctx, func(*v1.Node) {})

	var got []string
	next := func(want string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			select {
			case e := <-rec.Events:
				got = append(got, e)
				return e == want, nil
			default:
				return false, nil
			}
		})
		if err != nil {
			t.Fatalf("no event %q; got %q", want, got)
		}
	}
	next("Normal Starting Starting kubelet. on v1/Node n1 uid \"\"")
	next("Normal NodeReady Node n1 status is now: NodeReady on v1/Node n1 uid \"\"")
	uid.Store(types.UID("4d1b7c1e-0000-4000-8000-000000000001"))
	rt.set(cri.Readiness{RuntimeReady: false, NetworkReady: true, Message: "container runtime is down"})
	next("Normal NodeNotReady Node n1 status is now: NodeNotReady on v1/Node n1 uid \"4d1b7c1e-0000-4000-8000-000000000001\"")
	rt.set(ready)
	next("Normal NodeReady Node n1 status is now: NodeReady on v1/Node n1 uid \"4d1b7c1e-0000-4000-8000-000000000001\"")
}

// refRecorder is a FakeRecorder whose events also name the reference they
// are recorded on, with its UID.
type refRecorder struct{ *record.FakeRecorder }

func (r *refRecorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...interface{}) {
	ref := obj.(*v1.ObjectReference)
	r.FakeRecorder.Eventf(obj, eventtype, reason, messageFmt+" on %s/%s %s uid %q", append(args, ref.APIVersion, ref.Kind, ref.Name, ref.UID)...)
}

// TestNodeRef: NameOnly never has a UID; WithUID has none until its
// source knows one, then keeps the first one it saw (the kubelet's
// nodeRefWithUID: a Node created again keeps the first UID).
func TestNodeRef(t *testing.T) {
	r := NewNodeRef("n1")
	if got := r.WithUID(); got.UID != "" || got.Name != "n1" || got.Kind != "Node" || got.APIVersion != "v1" {
		t.Errorf("WithUID without a source = %+v, want v1 Node n1 without a UID", got)
	}
	uid := types.UID("")
	r.ResolveFrom(func() types.UID { return uid })
	if got := r.WithUID(); got.UID != "" {
		t.Errorf("WithUID before the Node is seen = %+v, want no UID", got)
	}
	uid = "uid-1"
	if got := r.WithUID(); got.UID != "uid-1" {
		t.Errorf("WithUID once the Node is seen = %+v, want UID uid-1", got)
	}
	uid = "uid-2"
	if got := r.WithUID(); got.UID != "uid-1" {
		t.Errorf("WithUID after the Node was created again = %+v, want the first UID uid-1", got)
	}
	if got := r.NameOnly(); got.UID != "" || got.Name != "n1" || got.Kind != "Node" || got.APIVersion != "v1" {
		t.Errorf("NameOnly = %+v, want v1 Node n1 without a UID", got)
	}
}

// TestNodeStatusFollowsTheAPI: the node is alive whatever the runtime does
// (Ping never fails), and a node the API shows differently (the node
// lifecycle controller's Unknown after an outage) is reported again at
// the next check, not at the next 5-minute report.
func TestNodeStatusFollowsTheAPI(t *testing.T) {
	ready := cri.Readiness{RuntimeReady: true, NetworkReady: true}
	rt := &switchableRuntime{rd: ready}
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	n.Status.Conditions = NodeConditions(nil, ready, nil, time.Now())
	var mu sync.Mutex
	api := n.DeepCopy()
	var apiErr error
	p := NewNodeProvider(rt, n, time.Hour, func(context.Context) (*v1.Node, error) {
		mu.Lock()
		defer mu.Unlock()
		return api.DeepCopy(), apiErr
	}, nil, nil, nil)
	ctx := context.Background()
	if err := p.Ping(ctx); err != nil {
		t.Fatalf("Ping with a ready runtime: %v", err)
	}
	if _, report := p.check(ctx); report {
		t.Error("nothing changed, yet the status is reported")
	}

	// The runtime goes away: Ready=False with the kubelet's message, and
	// the agent still answers Ping (the Lease is renewed).
	rt.set(cri.Readiness{})
	rt.fail(errors.New("connection refused"))
	got, report := p.check(ctx)
	if !report {
		t.Fatal("runtime down: not reported")
	}
	if c := readyOf(got); c.Status != v1.ConditionFalse || c.Reason != "KubeletNotReady" || !strings.HasPrefix(c.Message, "container runtime is down") {
		t.Errorf("runtime down: Ready %+v", c)
	}
	if err := p.Ping(ctx); err != nil {
		t.Errorf("Ping with the runtime down: %v; the Lease would not be renewed", err)
	}
	rt.fail(nil)
	rt.set(ready)
	got, report = p.check(ctx)
	if !report || readyOf(got).Status != v1.ConditionTrue {
		t.Fatalf("runtime back: reported %v, Ready %+v", report, readyOf(got))
	}

	// The API shows Unknown (the controller's, after missed heartbeats).
	mu.Lock()
	api = got.DeepCopy()
	for i := range api.Status.Conditions {
		api.Status.Conditions[i].Status = v1.ConditionUnknown
		api.Status.Conditions[i].Reason = "NodeStatusUnknown"
	}
	apiErr = nil
	mu.Unlock()
	if _, report := p.check(ctx); !report {
		t.Error("the API's Unknown is not corrected")
	}
	// The API is out of reach: nothing to report.
	mu.Lock()
	apiErr = errors.New("connection refused")
	mu.Unlock()
	if _, report := p.check(ctx); report {
		t.Error("reported while the API cannot be read")
	}
	// The API agrees again.
	mu.Lock()
	api, apiErr = got.DeepCopy(), nil
	mu.Unlock()
	if _, report := p.check(ctx); report {
		t.Error("reported although the API agrees")
	}
}

func readyOf(n *v1.Node) v1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c
		}
	}
	return v1.NodeCondition{}
}
