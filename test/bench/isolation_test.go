package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

func sandboxConfig(ns, name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: ns, Uid: ns + "-" + name}}
}

// testNode is a node polled every millisecond. A test that must pass gives
// a timeout it does not reach even under -race on a loaded machine (isolate
// returns as soon as the node stayed empty); one that must run out the
// clock gives a short one.
func testNode(rs sandboxes, client *fake.Clientset, timeout time.Duration) *node {
	return &node{cri: rs, client: client, ns: "crivk-bench", name: "crivk-local", poll: time.Millisecond, timeout: timeout, quiet: 3}
}

// A lane's left-overs (API pods, CRI sandboxes, the Node) are named by
// leftovers, removed by isolate, and pods of other namespaces are kept.
func TestNodeIsolate(t *testing.T) {
	ctx := context.Background()
	rs := critest.NewFakeRuntimeService()
	for _, n := range []string{"a", "b"} {
		if _, err := rs.RunPodSandbox(ctx, sandboxConfig("crivk-bench", n), ""); err != nil {
			t.Fatal(err)
		}
	}
	client := fake.NewSimpleClientset(
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w2-30-1", Namespace: "crivk-bench"}},
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "default"}},
		// Another suite's pod left on the node: it would hold one of
		// maxPods' places.
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "left", Namespace: "e2e-x"}, Spec: v1.PodSpec{NodeName: "crivk-local"}},
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "crivk-local"}},
	)
	n := testNode(rs, client, 10*time.Second)

	left, err := n.leftovers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(left, ", "), "node crivk-local, pod crivk-bench/w2-30-1, pod e2e-x/left, sandbox crivk-bench/a, sandbox crivk-bench/b"; got != want {
		t.Errorf("leftovers %q, want %q", got, want)
	}
	if err := n.isolate(ctx); err != nil {
		t.Fatalf("isolate: %v", err)
	}
	if _, err := client.CoreV1().Pods("default").Get(ctx, "other", metav1.GetOptions{}); err != nil {
		t.Errorf("isolate removed a pod outside the benchmark namespace not bound to the node: %v", err)
	}
	if _, err := client.CoreV1().Pods("e2e-x").Get(ctx, "left", metav1.GetOptions{}); err == nil {
		t.Error("isolate left another namespace's pod bound to the node")
	}
	if sbs, _ := rs.ListPodSandbox(ctx, nil); len(sbs) != 0 {
		t.Errorf("%d sandboxes left after isolate", len(sbs))
	}
}

// lateRuntime is a containerd with a backlog: its listings time out at
// first, and a sandbox whose RunPodSandbox had timed out for the caller
// appears after the first listing that found the node empty.
type lateRuntime struct {
	*critest.FakeRuntimeService
	lists    int
	lateAt   int // the listing after which the late sandbox appears
	timeouts int // the first listings that time out
}

func (r *lateRuntime) ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	r.lists++
	if r.lists <= r.timeouts {
		return nil, context.DeadlineExceeded
	}
	sbs, err := r.FakeRuntimeService.ListPodSandbox(ctx, f)
	if r.lists == r.lateAt {
		if _, err := r.FakeRuntimeService.RunPodSandbox(ctx, sandboxConfig("crivk-bench", "w2-110-7"), ""); err != nil {
			return nil, err
		}
	}
	return sbs, err
}

// Listing errors are retried, and a sandbox that appears after the node
// looked empty once is still removed before isolate returns.
func TestNodeIsolateBacklog(t *testing.T) {
	ctx := context.Background()
	rs := &lateRuntime{FakeRuntimeService: critest.NewFakeRuntimeService(), timeouts: 3, lateAt: 5}
	n := testNode(rs, fake.NewSimpleClientset(), 10*time.Second)
	if err := n.isolate(ctx); err != nil {
		t.Fatalf("isolate: %v", err)
	}
	if sbs, _ := rs.FakeRuntimeService.ListPodSandbox(ctx, nil); len(sbs) != 0 {
		t.Errorf("the late sandbox is left: %d sandboxes", len(sbs))
	}
	if rs.lists <= rs.lateAt {
		t.Errorf("isolate returned after %d listings, before the late sandbox appeared", rs.lists)
	}
}

// A sandbox the runtime refuses to stop is named, with the runtime's error,
// once the timeout passes.
func TestNodeIsolateStuck(t *testing.T) {
	ctx := context.Background()
	rs := critest.NewFakeRuntimeService()
	if _, err := rs.RunPodSandbox(ctx, sandboxConfig("crivk-bench", "stuck"), ""); err != nil {
		t.Fatal(err)
	}
	n := testNode(rs, fake.NewSimpleClientset(), 200*time.Millisecond)
	for i := 0; i < 1000; i++ {
		rs.InjectError("StopPodSandbox", errors.New("device busy"))
	}
	err := n.isolate(ctx)
	if err == nil {
		t.Fatal("isolate passed with a sandbox that cannot be stopped")
	}
	for _, want := range []string{"lane isolation broken", "sandbox crivk-bench/stuck", "device busy"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("isolate error %q does not say %q", err, want)
		}
	}
}

// fakeLane records the calls; failing setups and workloads are set per lane.
type fakeLane struct {
	name     string
	setupErr error
	calls    *[]string
	tornDown bool
}

func (l *fakeLane) Name() string { return l.name }
func (l *fakeLane) setup(context.Context) (driver, meters, error) {
	*l.calls = append(*l.calls, "setup "+l.name)
	return nil, meters{}, l.setupErr
}
func (l *fakeLane) teardown(context.Context) error {
	*l.calls = append(*l.calls, "teardown "+l.name)
	l.tornDown = true
	return nil
}

type fakeIsolation struct {
	calls *[]string
	// dirty makes those calls of isolate fail (1: the first).
	dirty map[int]bool
	n     int
}

func (f *fakeIsolation) isolate(context.Context) error {
	f.n++
	*f.calls = append(*f.calls, "isolate")
	if f.dirty[f.n] {
		return errors.New("lane isolation broken, left behind: sandbox crivk-bench/w1-0")
	}
	return nil
}

func TestRunLanesIsolation(t *testing.T) {
	for _, tc := range []struct {
		name      string
		setupErr  map[string]error
		workErr   map[string]error
		dirty     map[int]bool
		wantCalls []string
		wantErrs  map[string]string
	}{
		{
			name:      "each lane on a verified clean node, teardown after work",
			wantCalls: []string{"isolate", "setup raw", "work raw", "teardown raw", "isolate", "setup kubelet", "work kubelet", "teardown kubelet", "isolate", "setup crivk", "work crivk", "teardown crivk", "isolate"},
		},
		{
			name:      "a failing lane is torn down and the next lane still runs",
			workErr:   map[string]error{"kubelet": errors.New("W2 batch of 30: timed out")},
			wantCalls: []string{"isolate", "setup raw", "work raw", "teardown raw", "isolate", "setup kubelet", "work kubelet", "teardown kubelet", "isolate", "setup crivk", "work crivk", "teardown crivk", "isolate"},
			wantErrs:  map[string]string{"kubelet": "W2 batch of 30: timed out"},
		},
		{
			name:      "a failed setup skips the work but not the teardown",
			setupErr:  map[string]error{"raw": errors.New("no CRI")},
			wantCalls: []string{"isolate", "setup raw", "teardown raw", "isolate", "setup kubelet", "work kubelet", "teardown kubelet", "isolate", "setup crivk", "work crivk", "teardown crivk", "isolate"},
			wantErrs:  map[string]string{"raw": "no CRI"},
		},
		{
			name:      "a lane whose node cannot be made empty is not run, the next lane tries again",
			dirty:     map[int]bool{2: true},
			wantCalls: []string{"isolate", "setup raw", "work raw", "teardown raw", "isolate", "isolate", "setup crivk", "work crivk", "teardown crivk", "isolate"},
			wantErrs:  map[string]string{"kubelet": "not run: lane isolation broken"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls []string
			var lanes []lane
			for _, n := range []string{"raw", "kubelet", "crivk"} {
				lanes = append(lanes, &fakeLane{name: n, setupErr: tc.setupErr[n], calls: &calls})
			}
			iso := &fakeIsolation{calls: &calls, dirty: tc.dirty}
			work := func(_ context.Context, _ driver, _ meters, res *LaneResult) error {
				calls = append(calls, "work "+res.Lane)
				return tc.workErr[res.Lane]
			}
			var saved []int
			res := runLanes(context.Background(), iso, lanes, work, t.Logf, func(r []LaneResult) { saved = append(saved, len(r)) })
			if fmt.Sprint(saved) != "[1 2 3]" {
				t.Errorf("results saved with %v lanes, want after each lane [1 2 3]", saved)
			}
			if strings.Join(calls, ", ") != strings.Join(tc.wantCalls, ", ") {
				t.Errorf("calls:\n got %v\nwant %v", calls, tc.wantCalls)
			}
			if len(res) != 3 {
				t.Fatalf("%d results, want one per lane", len(res))
			}
			for _, r := range res {
				want := tc.wantErrs[r.Lane]
				if (want == "") != (r.Error == "") || !strings.Contains(r.Error, want) {
					t.Errorf("lane %s error %q, want %q", r.Lane, r.Error, want)
				}
			}
		})
	}
}
