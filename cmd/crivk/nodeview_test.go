package main

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
)

// nodeAPI is the API server's side of one node for the view's tests: lists
// return node (or listErr), each watch is a fake watcher the test drives
// (or fails with watchErr); the field selectors of both are recorded.
type nodeAPI struct {
	mu        sync.Mutex
	node      *v1.Node // nil: no node (not registered yet)
	listErr   error
	watchErr  error
	watcher   *watch.RaceFreeFakeWatcher // the latest watch
	selectors []string
}

func (a *nodeAPI) clientset() *fake.Clientset {
	cs := fake.NewClientset()
	cs.PrependReactor("list", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.selectors = append(a.selectors, "list "+action.(k8stesting.ListAction).GetListRestrictions().Fields.String())
		if a.listErr != nil {
			return true, nil, a.listErr
		}
		l := &v1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
		if a.node != nil {
			l.ResourceVersion = a.node.ResourceVersion
			l.Items = []v1.Node{*a.node.DeepCopy()}
		}
		return true, l, nil
	})
	cs.PrependWatchReactor("nodes", func(action k8stesting.Action) (bool, watch.Interface, error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.selectors = append(a.selectors, "watch "+action.(k8stesting.WatchAction).GetWatchRestrictions().Fields.String())
		if a.watchErr != nil {
			return true, nil, a.watchErr
		}
		a.watcher = watch.NewRaceFreeFake()
		return true, a.watcher, nil
	})
	return cs
}

// fakeNodes is the fake clientset's nodes client, saying as the clientset
// does that its watches have no watch-list semantics (initial events and a
// bookmark): the reflector lists, then watches.
type fakeNodes struct {
	corev1client.NodesGetter
	cs *fake.Clientset
}

func (f fakeNodes) IsWatchListSemanticsUnSupported() bool {
	return f.cs.IsWatchListSemanticsUnSupported()
}

func (a *nodeAPI) set(f func(a *nodeAPI)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f(a)
}

func testNode(rv string, labels map[string]string, taints ...v1.Taint) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: rv, Labels: labels},
		Spec: v1.NodeSpec{Taints: taints}}
}

// startView runs a view of the node crivk registers (label registered=yes)
// on api until the test ends. Call inside a synctest bubble.
func startView(t *testing.T, api *nodeAPI) *nodeView {
	t.Helper()
	v := newNodeView(testNode("", map[string]string{"registered": "yes"}))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		cs := api.clientset()
		v.run(ctx, ownNodeWatch(fakeNodes{cs.CoreV1(), cs}, "n1"))
	}()
	t.Cleanup(func() { cancel(); <-done })
	synctest.Wait()
	return v
}

func label(n *v1.Node, k string) string { return n.Labels[k] }

func TestNodeViewStartsWithTheRegisteredNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := &nodeAPI{listErr: errors.New("connection refused")}
		v := startView(t, api)
		time.Sleep(time.Minute) // the reflector retries with back-off meanwhile
		synctest.Wait()
		if got := label(v.Node(), "registered"); got != "yes" {
			t.Errorf("Node() before the API answered: labels %v, want the registered node's", v.Node().Labels)
		}
		if n, err := v.APINode(t.Context()); !errors.Is(err, errNodeNotSeen) {
			t.Errorf("APINode() before the API answered = %v, %v; want errNodeNotSeen", n, err)
		}
	})
}

func TestNodeViewFollowsTheWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		taint := v1.Taint{Key: "others", Effect: v1.TaintEffectNoSchedule}
		api := &nodeAPI{node: testNode("10", map[string]string{"registered": "yes"}, taint)}
		v := startView(t, api)
		if n := v.Node(); len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "others" {
			t.Fatalf("Node() after the list: taints %v, want the API's", n.Spec.Taints)
		}
		if n, err := v.APINode(t.Context()); err != nil || n.ResourceVersion != "10" {
			t.Fatalf("APINode() after the list = %v, %v; want the API's node", n, err)
		}

		api.watcher.Modify(testNode("11", map[string]string{"zone": "b"}))
		synctest.Wait()
		if got := label(v.Node(), "zone"); got != "b" {
			t.Errorf("Node() after a watch event: labels %v, want zone=b", v.Node().Labels)
		}
		if n, err := v.APINode(t.Context()); err != nil || label(n, "zone") != "b" {
			t.Errorf("APINode() after a watch event = %v, %v; want zone=b", n, err)
		}

		// Only the node's own object, with the selector the Node
		// authorizer allows.
		api.set(func(a *nodeAPI) {
			want := []string{"list metadata.name=n1", "watch metadata.name=n1"}
			if len(a.selectors) != len(want) || a.selectors[0] != want[0] || a.selectors[1] != want[1] {
				t.Errorf("requests %q, want %q", a.selectors, want)
			}
		})
	})
}

func TestNodeViewKeepsTheLastNodeOnErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := &nodeAPI{node: testNode("10", map[string]string{"zone": "a"})}
		v := startView(t, api)
		if got := label(v.Node(), "zone"); got != "a" {
			t.Fatalf("Node() after the list: labels %v, want zone=a", v.Node().Labels)
		}

		// The API server goes away: the watch ends, lists and watches fail.
		api.set(func(a *nodeAPI) {
			a.listErr, a.watchErr = errors.New("connection refused"), errors.New("connection refused")
			a.watcher.Stop()
		})
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if got := label(v.Node(), "zone"); got != "a" {
			t.Errorf("Node() while the API fails: labels %v, want the last node seen (zone=a)", v.Node().Labels)
		}
		if n, err := v.APINode(t.Context()); err != nil || label(n, "zone") != "a" {
			t.Errorf("APINode() while the API fails = %v, %v; want the last node seen", n, err)
		}

		// It comes back with a changed node: the reflector relists.
		api.set(func(a *nodeAPI) {
			a.listErr, a.watchErr = nil, nil
			a.node = testNode("20", map[string]string{"zone": "c"})
		})
		time.Sleep(2 * time.Minute) // longer than the reflector's longest back-off (30 s, up to twice that with jitter)
		synctest.Wait()
		if got := label(v.Node(), "zone"); got != "c" {
			t.Errorf("Node() once the API is back: labels %v, want zone=c", v.Node().Labels)
		}
	})
}

func TestNodeViewKeepsTheLastNodeWhenDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := &nodeAPI{node: testNode("10", map[string]string{"zone": "a"})}
		v := startView(t, api)
		api.watcher.Delete(testNode("11", map[string]string{"zone": "a"}))
		synctest.Wait()
		if got := label(v.Node(), "zone"); got != "a" {
			t.Errorf("Node() after the node's deletion: labels %v, want the last node seen", v.Node().Labels)
		}
	})
}

// The node status loop reads the watched node: no GET per period.
func TestNodeViewAPINodeDoesNotCallTheAPI(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := &nodeAPI{node: testNode("10", nil)}
		v := startView(t, api)
		for range 100 {
			if _, err := v.APINode(t.Context()); err != nil {
				t.Fatal(err)
			}
			_ = v.Node()
		}
		api.set(func(a *nodeAPI) {
			if len(a.selectors) != 2 {
				t.Errorf("requests %q, want one list and one watch", a.selectors)
			}
		})
	})
}
