package nodestatus

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

// getter is the view's fallback read of the node from the API: it
// counts its calls and returns node, or err.
type getter struct {
	mu    sync.Mutex
	calls int
	node  *v1.Node
	err   error
}

func (g *getter) get(context.Context) (*v1.Node, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls++
	return g.node, g.err
}

func (g *getter) set(node *v1.Node, err error) (calls int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.node, g.err = node, err
	return g.calls
}

// startView runs a view of the node crivk registers (label registered=yes)
// on api until the test ends, with g as its fallback read (nil: none).
// Call inside a synctest bubble.
func startView(t *testing.T, api *nodeAPI, g *getter) *View {
	t.Helper()
	var get func(context.Context) (*v1.Node, error)
	if g != nil {
		get = g.get
	}
	v := NewView(testNode("", map[string]string{"registered": "yes"}), get)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		cs := api.clientset()
		v.Run(ctx, v.ListWatch(fakeNodes{cs.CoreV1(), cs}, "n1"))
	}()
	t.Cleanup(func() { cancel(); <-done })
	synctest.Wait()
	return v
}

func label(n *v1.Node, k string) string { return n.Labels[k] }

func TestNodeViewStartsWithTheRegisteredNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := &nodeAPI{listErr: errors.New("connection refused")}
		g := &getter{err: errors.New("connection refused")}
		v := startView(t, api, g)
		time.Sleep(time.Minute) // the reflector retries with back-off meanwhile
		synctest.Wait()
		if got := label(v.Node(), "registered"); got != "yes" {
			t.Errorf("Node() before the API answered: labels %v, want the registered node's", v.Node().Labels)
		}
		if _, ok := v.Watched(); ok {
			t.Error("Watched() before the API answered: ok, want not")
		}
		// The status loop never compares with crivk's own registration:
		// it reads the API, or gets an error.
		if n, err := v.APINode(t.Context()); err == nil {
			t.Errorf("APINode() while the API fails = %v, want the read's error", n)
		}
		g.set(testNode("5", map[string]string{"from": "get"}), nil)
		if n, err := v.APINode(t.Context()); err != nil || label(n, "from") != "get" {
			t.Errorf("APINode() before the watch delivered the node = %v, %v; want the node read from the API", n, err)
		}
		noGet := NewView(testNode("", nil), nil)
		if n, err := noGet.APINode(t.Context()); !errors.Is(err, ErrNodeNotSeen) {
			t.Errorf("APINode() of a view without a read = %v, %v; want ErrNodeNotSeen", n, err)
		}
	})
}

func TestNodeViewFollowsTheWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		taint := v1.Taint{Key: "others", Effect: v1.TaintEffectNoSchedule}
		api := &nodeAPI{node: testNode("10", map[string]string{"registered": "yes"}, taint)}
		g := &getter{}
		v := startView(t, api, g)
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
		for range 100 { // the node status loop's checks
			if n, err := v.APINode(t.Context()); err != nil || label(n, "zone") != "b" {
				t.Fatalf("APINode() after a watch event = %v, %v; want zone=b", n, err)
			}
		}
		if calls := g.set(nil, nil); calls != 0 {
			t.Errorf("%d reads of the node while the watch is connected, want none", calls)
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
		g := &getter{}
		v := startView(t, api, g)
		if got := label(v.Node(), "zone"); got != "a" {
			t.Fatalf("Node() after the list: labels %v, want zone=a", v.Node().Labels)
		}

		// The API server goes away: the watch ends, lists and watches fail.
		api.set(func(a *nodeAPI) {
			a.listErr, a.watchErr = errors.New("connection refused"), errors.New("connection refused")
			a.watcher.Stop()
		})
		g.set(nil, errors.New("connection refused"))
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if got := label(v.Node(), "zone"); got != "a" {
			t.Errorf("Node() while the API fails: labels %v, want the last node seen (zone=a)", v.Node().Labels)
		}
		if n, ok := v.Watched(); ok || label(n, "zone") != "a" {
			t.Errorf("Watched() while the API fails = %v, %v; want the last node seen, not connected", n, ok)
		}
		if n, err := v.APINode(t.Context()); err == nil {
			t.Errorf("APINode() while the API fails = %v, want the read's error", n)
		}

		// The API server is back, the reflector not yet: the status loop
		// reads the node (the node lifecycle controller's Unknown) at once.
		g.set(testNode("19", map[string]string{"zone": "unknown"}), nil)
		if n, err := v.APINode(t.Context()); err != nil || label(n, "zone") != "unknown" {
			t.Errorf("APINode() once the API is back, before the watch = %v, %v; want the node read from the API", n, err)
		}

		// The reflector relists and watches again.
		api.set(func(a *nodeAPI) {
			a.listErr, a.watchErr = nil, nil
			a.node = testNode("20", map[string]string{"zone": "c"})
		})
		time.Sleep(2 * time.Minute) // longer than the reflector's longest back-off (30 s, up to twice that with jitter)
		synctest.Wait()
		if got := label(v.Node(), "zone"); got != "c" {
			t.Errorf("Node() once the watch is back: labels %v, want zone=c", v.Node().Labels)
		}
		calls := g.set(nil, errors.New("must not be read"))
		if n, err := v.APINode(t.Context()); err != nil || label(n, "zone") != "c" {
			t.Errorf("APINode() once the watch is back = %v, %v; want the watched node", n, err)
		}
		if now := g.set(nil, nil); now != calls {
			t.Errorf("APINode() read the API once the watch was back")
		}
	})
}

func TestNodeViewKeepsTheLastNodeWhenDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := &nodeAPI{node: testNode("10", map[string]string{"zone": "a"})}
		v := startView(t, api, nil)
		api.watcher.Delete(testNode("11", map[string]string{"zone": "a"}))
		synctest.Wait()
		if got := label(v.Node(), "zone"); got != "a" {
			t.Errorf("Node() after the node's deletion: labels %v, want the last node seen", v.Node().Labels)
		}
	})
}

// The end of a watch the reflector already replaced leaves its successor
// connected.
func TestNodeViewConnection(t *testing.T) {
	v := NewView(testNode("", nil), nil)
	v.set(testNode("1", nil))
	first := v.called(nil)
	second := v.called(nil)
	v.watchEnded(first)
	if _, ok := v.Watched(); !ok {
		t.Error("the end of a replaced watch disconnected the view")
	}
	v.watchEnded(second)
	if _, ok := v.Watched(); ok {
		t.Error("the end of the current watch left the view connected")
	}
	v.called(nil)
	v.called(errors.New("forbidden"))
	if _, ok := v.Watched(); ok {
		t.Error("a failed call left the view connected")
	}
}

// trackedWatch forwards events, says once when the stream ends or errs,
// and its goroutine ends with Stop (synctest.Test fails on a leak).
func TestTrackedWatch(t *testing.T) {
	for name, tc := range map[string]struct {
		act       func(w *watch.RaceFreeFakeWatcher, tw *trackedWatch)
		wantEvent watch.EventType // "": none read
		wantEnded int             // before Stop
	}{
		"events pass":              {act: func(w *watch.RaceFreeFakeWatcher, _ *trackedWatch) { w.Modify(testNode("2", nil)) }, wantEvent: watch.Modified},
		"an error event ends":      {act: func(w *watch.RaceFreeFakeWatcher, _ *trackedWatch) { w.Error(&metav1.Status{Message: "gone"}) }, wantEvent: watch.Error, wantEnded: 1},
		"an unread error ends":     {act: func(w *watch.RaceFreeFakeWatcher, _ *trackedWatch) { w.Error(&metav1.Status{Message: "gone"}) }, wantEnded: 1},
		"the stream ends":          {act: func(w *watch.RaceFreeFakeWatcher, _ *trackedWatch) { w.Stop() }, wantEnded: 1},
		"stopped by the reflector": {act: func(_ *watch.RaceFreeFakeWatcher, tw *trackedWatch) { tw.Stop() }, wantEnded: 1},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := watch.NewRaceFreeFake()
				ended := 0
				tw := newTrackedWatch(w, func() { ended++ })
				tc.act(w, tw)
				if tc.wantEvent != "" {
					if ev := <-tw.ResultChan(); ev.Type != tc.wantEvent {
						t.Errorf("event %s, want %s", ev.Type, tc.wantEvent)
					}
				}
				synctest.Wait()
				if ended != tc.wantEnded {
					t.Errorf("ended called %d times before Stop, want %d", ended, tc.wantEnded)
				}
				tw.Stop()
				tw.Stop()
				synctest.Wait()
				if ended != 1 {
					t.Errorf("ended called %d times in all, want once", ended)
				}
			})
		})
	}
}
