package vknode

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

// The node controller's GET before each status PATCH is served from the
// watched node, as the kubelet's first try reads its node lister.
func TestViewedNodesGet(t *testing.T) {
	apiNode := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"from": "api"}}}
	other := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}
	watched := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"from": "watch"}}}
	seen := func() (*v1.Node, bool) { return watched, true }
	notSeen := func() (*v1.Node, bool) { return watched, false } // or not connected
	for name, tc := range map[string]struct {
		watched  func() (*v1.Node, bool)
		node     string
		opts     metav1.GetOptions
		conflict bool // the PATCH before the Get conflicted
		want     string
		wantGETs int
	}{
		"the watched node":             {watched: seen, node: "n1", want: "watch"},
		"not seen or not connected":    {watched: notSeen, node: "n1", want: "api", wantGETs: 1},
		"another node":                 {watched: seen, node: "n2", want: "", wantGETs: 1},
		"a resource version asked for": {watched: seen, node: "n1", opts: metav1.GetOptions{ResourceVersion: "0"}, want: "api", wantGETs: 1},
		"a retry after a conflict":     {watched: seen, node: "n1", conflict: true, want: "api", wantGETs: 1},
	} {
		t.Run(name, func(t *testing.T) {
			cs := fake.NewClientset(apiNode, other)
			gets := 0
			cs.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				gets++
				return false, nil, nil
			})
			cs.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				if tc.conflict {
					return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "n1", errors.New("changed"))
				}
				return false, nil, nil
			})
			c := &viewedNodes{NodeInterface: cs.CoreV1().Nodes(), name: "n1", watched: tc.watched}
			_, _ = c.Patch(t.Context(), "n1", types.StrategicMergePatchType, []byte(`{}`), metav1.PatchOptions{}, "status")
			n, err := c.Get(t.Context(), tc.node, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if n.Labels["from"] != tc.want || gets != tc.wantGETs {
				t.Errorf("Get(%s): labels %v with %d GETs, want from=%q with %d", tc.node, n.Labels, gets, tc.want, tc.wantGETs)
			}
			if !tc.conflict {
				return
			}
			// A conflict sends the next Get to the API, not the
			// following ones.
			if n, err := c.Get(t.Context(), "n1", metav1.GetOptions{}); err != nil || n.Labels["from"] != "watch" || gets != 1 {
				t.Errorf("the Get after the retry: %v, %v with %d GETs in all; want the watched node and 1 GET", n, err, gets)
			}
		})
	}
}

// The node controller may modify what Get returns: the view's node is
// copied.
func TestViewedNodesGetCopies(t *testing.T) {
	watched := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"a": "b"}}}
	c := &viewedNodes{NodeInterface: fake.NewClientset().CoreV1().Nodes(), name: "n1",
		watched: func() (*v1.Node, bool) { return watched, true }}
	n, err := c.Get(t.Context(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels["a"] = "changed"
	if watched.Labels["a"] != "b" {
		t.Errorf("modifying the node Get returned changed the view's: %v", watched.Labels)
	}
}

// quietNode is a node provider that never reports a change: the node
// controller's requests are its periodic ones only.
type quietNode struct{}

func (quietNode) Ping(ctx context.Context) error                   { return ctx.Err() }
func (quietNode) NotifyNodeStatus(context.Context, func(*v1.Node)) {}

// At idle virtual-kubelet's node controller, given viewedNodes, sends what
// the kubelet sends: a Lease renewal every 10 s and a node status PATCH
// every report period (5 minutes here), and no GET of the node once the
// watch has it.
func TestNodeControllerRequestsAtIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
		cs := fake.NewClientset()
		nodesGVR := v1.SchemeGroupVersion.WithResource("nodes")
		watched := func() (*v1.Node, bool) {
			obj, err := cs.Tracker().Get(nodesGVR, "", "n1")
			if err != nil {
				return nil, false
			}
			return obj.(*v1.Node), true
		}
		nodes := &viewedNodes{NodeInterface: cs.CoreV1().Nodes(), name: "n1", watched: watched}
		nc, err := node.NewNodeController(quietNode{}, n, nodes,
			node.WithNodeEnableLeaseV1(cs.CoordinationV1().Leases(v1.NamespaceNodeLease), node.DefaultLeaseDuration),
			node.WithNodeStatusUpdateInterval(5*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go nc.Run(ctx) //nolint:errcheck // ends with ctx
		<-nc.Ready()
		time.Sleep(time.Second) // registration and the first Lease
		synctest.Wait()
		cs.ClearActions()

		time.Sleep(10 * time.Minute)
		synctest.Wait()
		count := map[string]int{}
		for _, a := range cs.Actions() {
			k := a.GetVerb() + " " + a.GetResource().Resource
			if a.GetSubresource() != "" {
				k += "/" + a.GetSubresource()
			}
			count[k]++
		}
		want := map[string]int{"update leases": 60, "patch nodes/status": 2}
		if len(count) != len(want) || count["update leases"] != want["update leases"] || count["patch nodes/status"] != want["patch nodes/status"] {
			t.Errorf("requests in 10 idle minutes %v, want %v", count, want)
		}
		cancel()
		<-nc.Done()
	})
}

// New refuses a configuration without one of its required parts and
// builds the node from one that has them.
func TestNewValidates(t *testing.T) {
	valid := func() Config {
		cs := fake.NewClientset()
		return Config{
			Node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, Nodes: cs.CoreV1(), Leases: cs.CoordinationV1(),
			PodClient: cs.CoreV1(), Provider: &fakePodProvider{}, NodeProvider: quietNode{},
			Recorder:    record.NewFakeRecorder(1),
			PodInformer: NewPodInformer(cs.CoreV1(), "n1", 0),
		}
	}
	for name, tc := range map[string]struct {
		change func(*Config)
		ok     bool
	}{
		"valid":           {change: func(*Config) {}, ok: true},
		"no node":         {change: func(c *Config) { c.Node = nil }},
		"no pod client":   {change: func(c *Config) { c.PodClient = nil }},
		"no provider":     {change: func(c *Config) { c.Provider = nil }},
		"no pod informer": {change: func(c *Config) { c.PodInformer = PodInformer{} }},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := valid()
			tc.change(&cfg)
			n, err := New(cfg)
			if (err == nil) != tc.ok || (n != nil) != tc.ok {
				t.Errorf("New: %v, %v; want ok %v", n, err, tc.ok)
			}
		})
	}
}
