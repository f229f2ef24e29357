package nodestatus

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRuntimeHandlers: every handler the runtime reports becomes one of
// the Node's status.runtimeHandlers with both features said (false too),
// as the kubelet's setter; no answer from the runtime is nil.
func TestRuntimeHandlers(t *testing.T) {
	if got := RuntimeHandlers(nil); got != nil {
		t.Errorf("no answer: %+v, want nil", got)
	}
	got := RuntimeHandlers([]cri.RuntimeHandler{
		{Name: "", RecursiveReadOnlyMounts: true, UserNamespaces: true},
		{Name: "runc", UserNamespaces: true},
		{Name: "old"},
	})
	want := []struct {
		name     string
		rro, uns bool
	}{{"", true, true}, {"runc", false, true}, {"old", false, false}}
	if len(got) != len(want) {
		t.Fatalf("%d handlers, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		h := got[i]
		if h.Name != w.name || h.Features == nil || h.Features.RecursiveReadOnlyMounts == nil || h.Features.UserNamespaces == nil ||
			*h.Features.RecursiveReadOnlyMounts != w.rro || *h.Features.UserNamespaces != w.uns {
			t.Errorf("handler %d: %+v, want %+v", i, h, w)
		}
	}
}

// TestNodeReportsRuntimeHandlers: the status check reports the node when
// the runtime's handlers change (containerd restarted with another
// handler), keeps the last ones while the runtime does not answer, and
// reports nothing when they are the same.
func TestNodeReportsRuntimeHandlers(t *testing.T) {
	one := []cri.RuntimeHandler{{Name: "", UserNamespaces: true}}
	ready := cri.Readiness{RuntimeReady: true, NetworkReady: true, Handlers: one}
	rt := &switchableRuntime{rd: ready}
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	n.Status.Conditions = NodeConditions(nil, ready, nil, time.Now())
	n.Status.RuntimeHandlers = RuntimeHandlers(one)
	p := NewNodeProvider(rt, n, time.Hour, nil, nil, nil, nil)
	ctx := context.Background()
	if _, report := p.check(ctx); report {
		t.Error("the same handlers: reported")
	}
	two := append(append([]cri.RuntimeHandler(nil), one...), cri.RuntimeHandler{Name: "kata"})
	rt.set(cri.Readiness{RuntimeReady: true, NetworkReady: true, Handlers: two})
	got, report := p.check(ctx)
	if !report {
		t.Fatal("a new handler: not reported")
	}
	if len(got.Status.RuntimeHandlers) != 2 || got.Status.RuntimeHandlers[1].Name != "kata" {
		t.Fatalf("runtimeHandlers %+v, want the default and kata", got.Status.RuntimeHandlers)
	}
	rt.set(cri.Readiness{})
	rt.fail(errors.New("connection refused"))
	got, _ = p.check(ctx)
	if len(got.Status.RuntimeHandlers) != 2 {
		t.Errorf("runtime down: runtimeHandlers %+v, want the last ones kept", got.Status.RuntimeHandlers)
	}
}
