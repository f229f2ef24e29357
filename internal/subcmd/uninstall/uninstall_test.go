package uninstall

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestParseUninstallFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		err  string
	}{
		{nil, "usage"},
		{[]string{"purge"}, "usage"},
		{[]string{"drain"}, "--node-selector is required"},
		{[]string{"remove", "--node-selector=a=b"}, "remove needs --namespace"},
		{[]string{"drain", "--node-selector=a=b", "--timeout=0s"}, "must be positive"},
		{[]string{"drain", "--node-selector=a=b"}, ""},
		{[]string{"remove", "--node-selector=a=b", "--namespace=ns", "--agent-selector=x=y"}, ""},
	} {
		_, err := parseUninstallFlags(c.args)
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.err)
		}
	}
}

func labelledNode(name string, labels map[string]string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func podOn(ns, name, nodeName string, labels map[string]string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Labels: labels}, Spec: v1.PodSpec{NodeName: nodeName}}
}

var release = map[string]string{"crivk.io/release": "r", "crivk.io/release-namespace": "ns"}

// TestDrain cordons and taints the release's nodes and deletes their pods,
// and nothing else.
func TestDrain(t *testing.T) {
	c := fake.NewSimpleClientset(labelledNode("crivk-a", release), labelledNode("a", nil),
		podOn("default", "on-crivk", "crivk-a", nil), podOn("default", "on-a", "a", nil))
	u := &uninstaller{c: c.CoreV1(), log: logrus.NewEntry(logrus.New()), o: &uninstallOptions{phase: "drain",
		nodes: "crivk.io/release=r,crivk.io/release-namespace=ns", timeout: 5 * time.Second, poll: 10 * time.Millisecond}}
	if err := u.drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n, _ := c.CoreV1().Nodes().Get(ctx, "crivk-a", metav1.GetOptions{})
	if !n.Spec.Unschedulable || len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != uninstallTaint || n.Spec.Taints[0].Effect != v1.TaintEffectNoExecute {
		t.Errorf("crivk-a: unschedulable %v taints %v, want cordoned with %s:NoExecute", n.Spec.Unschedulable, n.Spec.Taints, uninstallTaint)
	}
	other, _ := c.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{})
	if other.Spec.Unschedulable || len(other.Spec.Taints) != 0 {
		t.Errorf("node a changed: %+v", other.Spec)
	}
	if _, err := c.CoreV1().Pods("default").Get(ctx, "on-crivk", metav1.GetOptions{}); err == nil {
		t.Error("the pod on crivk-a is still there")
	}
	if _, err := c.CoreV1().Pods("default").Get(ctx, "on-a", metav1.GetOptions{}); err != nil {
		t.Errorf("the pod on node a: %v", err)
	}
	// A second drain changes nothing (idempotent taint).
	if err := u.drain(ctx); err != nil {
		t.Fatal(err)
	}
	n, _ = c.CoreV1().Nodes().Get(ctx, "crivk-a", metav1.GetOptions{})
	if len(n.Spec.Taints) != 1 {
		t.Errorf("taints after a second drain: %v", n.Spec.Taints)
	}
}

// TestDrainTimesOut names the pods left when they do not go.
func TestDrainTimesOut(t *testing.T) {
	p := podOn("default", "stuck", "crivk-a", nil)
	now := metav1.Now()
	p.DeletionTimestamp = &now // being deleted: not deleted again, waited for
	c := fake.NewSimpleClientset(labelledNode("crivk-a", release), p)
	u := &uninstaller{c: c.CoreV1(), log: logrus.NewEntry(logrus.New()), o: &uninstallOptions{phase: "drain",
		nodes: "crivk.io/release=r", timeout: 50 * time.Millisecond, poll: 10 * time.Millisecond}}
	err := u.drain(context.Background())
	if err == nil || !strings.Contains(err.Error(), "crivk-a: default/stuck") || !strings.Contains(err.Error(), "--no-hooks") {
		t.Fatalf("drain: %v, want the pod left named and the way out", err)
	}
}

// TestRemove deletes the release's nodes once crivk's pods are gone.
func TestRemove(t *testing.T) {
	agent := podOn("ns", "crivk-xyz", "a", map[string]string{"app.kubernetes.io/instance": "r"})
	c := fake.NewSimpleClientset(labelledNode("crivk-a", release), labelledNode("a", nil), agent)
	u := &uninstaller{c: c.CoreV1(), log: logrus.NewEntry(logrus.New()), o: &uninstallOptions{phase: "remove", nodes: "crivk.io/release=r",
		namespace: "ns", agentPods: "app.kubernetes.io/instance=r", timeout: 5 * time.Second, poll: 10 * time.Millisecond}}
	ctx := context.Background()
	// crivk's pod goes once remove has looked for it twice; until then the
	// node must stay.
	var lists atomic.Int32
	looked := make(chan struct{})
	c.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if lists.Add(1) == 2 {
			close(looked)
		}
		return false, nil, nil
	})
	go func() {
		<-looked
		if _, err := c.CoreV1().Nodes().Get(ctx, "crivk-a", metav1.GetOptions{}); err != nil {
			t.Errorf("node deleted while crivk's pod still ran: %v", err)
		}
		_ = c.CoreV1().Pods("ns").Delete(ctx, "crivk-xyz", metav1.DeleteOptions{})
	}()
	if err := u.remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Nodes().Get(ctx, "crivk-a", metav1.GetOptions{}); err == nil {
		t.Error("node crivk-a still there")
	}
	if _, err := c.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{}); err != nil {
		t.Errorf("node a: %v", err)
	}
}
