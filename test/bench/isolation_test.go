package main

import (
	"context"
	"errors"
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

// A lane's left-overs (API pods, CRI sandboxes, the Node) are removed by
// clean, and verify then passes; without clean it names each left-over.
func TestNodeCleanAndVerify(t *testing.T) {
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
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "crivk-local"}},
	)
	n := &node{cri: rs, client: client, ns: "crivk-bench", name: "crivk-local", poll: time.Millisecond}

	err := n.verify(ctx, 20*time.Millisecond)
	if err == nil {
		t.Fatal("verify passed on a node with left-overs")
	}
	for _, want := range []string{"sandbox crivk-bench/a", "sandbox crivk-bench/b", "pod crivk-bench/w2-30-1", "node crivk-local"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("verify error %q does not name %q", err, want)
		}
	}

	if err := n.clean(ctx); err != nil {
		t.Fatalf("clean: %v", err)
	}
	if err := n.verify(ctx, 20*time.Millisecond); err != nil {
		t.Fatalf("verify after clean: %v", err)
	}
	// Pods of other namespaces are not the benchmark's.
	if _, err := client.CoreV1().Pods("default").Get(ctx, "other", metav1.GetOptions{}); err != nil {
		t.Errorf("clean removed a pod outside the benchmark namespace: %v", err)
	}
	sbs, _ := rs.ListPodSandbox(ctx, nil)
	if len(sbs) != 0 {
		t.Errorf("%d sandboxes left after clean", len(sbs))
	}
}

// A sandbox the runtime refuses to stop is reported, and verify then fails.
func TestNodeCleanReportsRuntimeErrors(t *testing.T) {
	ctx := context.Background()
	rs := critest.NewFakeRuntimeService()
	if _, err := rs.RunPodSandbox(ctx, sandboxConfig("crivk-bench", "stuck"), ""); err != nil {
		t.Fatal(err)
	}
	rs.InjectError("StopPodSandbox", errors.New("device busy"))
	n := &node{cri: rs, client: fake.NewSimpleClientset(), ns: "crivk-bench", name: "crivk-local", poll: time.Millisecond}
	err := n.clean(ctx)
	if err == nil || !strings.Contains(err.Error(), "crivk-bench/stuck") || !strings.Contains(err.Error(), "device busy") {
		t.Fatalf("clean error %v, want one naming the sandbox and the runtime's error", err)
	}
	if err := n.verify(ctx, 10*time.Millisecond); err == nil || !strings.Contains(err.Error(), "lane isolation broken") {
		t.Fatalf("verify error %v, want lane isolation broken", err)
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
	// dirtyAfter makes verify fail from the nth call on (0: never).
	dirtyAfter int
	verifies   int
}

func (f *fakeIsolation) clean(context.Context) error {
	*f.calls = append(*f.calls, "clean")
	return nil
}
func (f *fakeIsolation) verify(context.Context, time.Duration) error {
	f.verifies++
	*f.calls = append(*f.calls, "verify")
	if f.dirtyAfter > 0 && f.verifies >= f.dirtyAfter {
		return errors.New("lane isolation broken, left behind: sandbox crivk-bench/w1-0")
	}
	return nil
}

func TestRunLanesIsolation(t *testing.T) {
	for _, tc := range []struct {
		name       string
		setupErr   map[string]error
		workErr    map[string]error
		dirtyAfter int
		wantCalls  []string
		wantErrs   map[string]string
	}{
		{
			name:      "each lane on a verified clean node, teardown after work",
			wantCalls: []string{"clean", "verify", "setup raw", "work raw", "teardown raw", "clean", "verify", "setup kubelet", "work kubelet", "teardown kubelet", "clean", "verify", "setup crivk", "work crivk", "teardown crivk", "clean"},
		},
		{
			name:      "a failing lane is torn down and the next lane still runs",
			workErr:   map[string]error{"kubelet": errors.New("W2 batch of 30: timed out")},
			wantCalls: []string{"clean", "verify", "setup raw", "work raw", "teardown raw", "clean", "verify", "setup kubelet", "work kubelet", "teardown kubelet", "clean", "verify", "setup crivk", "work crivk", "teardown crivk", "clean"},
			wantErrs:  map[string]string{"kubelet": "W2 batch of 30: timed out"},
		},
		{
			name:      "a failed setup skips the work but not the teardown",
			setupErr:  map[string]error{"raw": errors.New("no CRI")},
			wantCalls: []string{"clean", "verify", "setup raw", "teardown raw", "clean", "verify", "setup kubelet", "work kubelet", "teardown kubelet", "clean", "verify", "setup crivk", "work crivk", "teardown crivk", "clean"},
			wantErrs:  map[string]string{"raw": "no CRI"},
		},
		{
			name:       "a node that cannot be made clean stops the remaining lanes",
			dirtyAfter: 2,
			wantCalls:  []string{"clean", "verify", "setup raw", "work raw", "teardown raw", "clean", "verify", "clean"},
			wantErrs:   map[string]string{"kubelet": "not run: lane isolation broken", "crivk": "not run: lane isolation broken"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls []string
			var lanes []lane
			for _, n := range []string{"raw", "kubelet", "crivk"} {
				lanes = append(lanes, &fakeLane{name: n, setupErr: tc.setupErr[n], calls: &calls})
			}
			iso := &fakeIsolation{calls: &calls, dirtyAfter: tc.dirtyAfter}
			work := func(_ context.Context, _ driver, _ meters, res *LaneResult) error {
				calls = append(calls, "work "+res.Lane)
				return tc.workErr[res.Lane]
			}
			res := runLanes(context.Background(), iso, lanes, work, t.Logf)
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
