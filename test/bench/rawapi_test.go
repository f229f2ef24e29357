package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	critest "k8s.io/cri-api/pkg/apis/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func TestRunningStatus(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC))
	p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a", Image: "pause"}, {Name: "b", Image: "busybox"}}},
		Status: v1.PodStatus{QOSClass: v1.PodQOSBestEffort}}
	for name, tc := range map[string]struct {
		ids, podIP string
		wantPhase  v1.PodPhase
		wantReady  v1.ConditionStatus
	}{
		"all running":  {ids: "c1,c2", podIP: "10.88.0.7", wantPhase: v1.PodRunning, wantReady: v1.ConditionTrue},
		"no IP":        {ids: "c1,c2", wantPhase: v1.PodRunning, wantReady: v1.ConditionTrue},
		"one missing":  {ids: "c1", wantPhase: v1.PodPending, wantReady: v1.ConditionFalse},
		"none created": {wantPhase: v1.PodPending, wantReady: v1.ConditionFalse},
	} {
		t.Run(name, func(t *testing.T) {
			var ids []string
			if tc.ids != "" {
				ids = strings.Split(tc.ids, ",")
			}
			st := runningStatus(p, "192.168.1.5", tc.podIP, ids, at, at)
			if st.Phase != tc.wantPhase {
				t.Errorf("phase %s, want %s", st.Phase, tc.wantPhase)
			}
			conds := map[v1.PodConditionType]v1.ConditionStatus{}
			for _, c := range st.Conditions {
				conds[c.Type] = c.Status
			}
			want := map[v1.PodConditionType]v1.ConditionStatus{v1.PodInitialized: v1.ConditionTrue, v1.PodScheduled: v1.ConditionTrue,
				v1.ContainersReady: tc.wantReady, v1.PodReady: tc.wantReady}
			if fmt.Sprint(conds) != fmt.Sprint(want) {
				t.Errorf("conditions %v, want %v", conds, want)
			}
			if st.PodIP != tc.podIP || (tc.podIP != "" && (len(st.PodIPs) != 1 || st.PodIPs[0].IP != tc.podIP)) {
				t.Errorf("pod IP %q %v, want %q", st.PodIP, st.PodIPs, tc.podIP)
			}
			if st.HostIP != "192.168.1.5" || st.QOSClass != v1.PodQOSBestEffort || st.StartTime == nil {
				t.Errorf("host IP %q, QoS %q, start %v", st.HostIP, st.QOSClass, st.StartTime)
			}
			if len(st.ContainerStatuses) != 2 {
				t.Fatalf("%d container statuses, want 2", len(st.ContainerStatuses))
			}
			for i, cs := range st.ContainerStatuses {
				running := i < len(ids)
				if cs.Name != p.Spec.Containers[i].Name || cs.Image != p.Spec.Containers[i].Image {
					t.Errorf("status %d: %s %s", i, cs.Name, cs.Image)
				}
				if running != (cs.State.Running != nil && cs.Ready && cs.ContainerID == "containerd://"+ids[min(i, len(ids)-1)]) {
					t.Errorf("status %d: %+v, running %v", i, cs, running)
				}
			}
			// The harness's tracker must see exactly the all-running case as
			// Running and ready.
			pp := p.DeepCopy()
			pp.Status = st
			if podReady(pp) != (tc.wantPhase == v1.PodRunning) {
				t.Errorf("podReady = %v", podReady(pp))
			}
		})
	}
}

func TestTerminatedStatus(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC))
	p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "pause"}}},
		Status: v1.PodStatus{PodIP: "10.88.0.7", PodIPs: []v1.PodIP{{IP: "10.88.0.7"}}, QOSClass: v1.PodQOSBestEffort}}
	st := terminatedStatus(p, "192.168.1.5", []string{"c1"}, at, at)
	if st.Phase != v1.PodSucceeded || st.PodIP != "10.88.0.7" {
		t.Errorf("phase %s, pod IP %q", st.Phase, st.PodIP)
	}
	cs := st.ContainerStatuses[0]
	if cs.State.Terminated == nil || cs.State.Terminated.ContainerID != "containerd://c1" || cs.Ready || cs.State.Running != nil {
		t.Errorf("container status %+v", cs)
	}
	for _, c := range st.Conditions {
		if (c.Type == v1.PodReady || c.Type == v1.ContainersReady) && c.Status != v1.ConditionFalse {
			t.Errorf("condition %s %s after termination", c.Type, c.Status)
		}
	}
	pp := p.DeepCopy()
	pp.Status = st
	if !podExited(pp) || podReady(pp) {
		t.Errorf("the tracker sees exited %v, ready %v", podExited(pp), podReady(pp))
	}
	// A pod never started has no start time.
	if st := terminatedStatus(p, "", nil, metav1.Time{}, at); st.StartTime != nil || st.ContainerStatuses[0].ContainerID != "" {
		t.Errorf("never started: %+v", st)
	}
}

// callLog records the CRI calls and API writes of the rawapi agent in one
// order.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, s)
}

func (l *callLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// loggedRuntime is the CRI fake with the removal calls logged.
type loggedRuntime struct {
	*critest.FakeRuntimeService
	log *callLog
}

func (r *loggedRuntime) StopContainer(ctx context.Context, id string, timeout int64) error {
	r.log.add(fmt.Sprintf("StopContainer %d", timeout))
	return r.FakeRuntimeService.StopContainer(ctx, id, timeout)
}

func (r *loggedRuntime) StopPodSandbox(ctx context.Context, id string) error {
	r.log.add("StopPodSandbox")
	return r.FakeRuntimeService.StopPodSandbox(ctx, id)
}

func (r *loggedRuntime) RemovePodSandbox(ctx context.Context, id string) error {
	r.log.add("RemovePodSandbox")
	return r.FakeRuntimeService.RemovePodSandbox(ctx, id)
}

var _ cri.RuntimeService = (*loggedRuntime)(nil)

// The rawapi agent registers the node and its lease, runs a new pod and
// writes it Running once; on the deletion it stops the containers and the
// sandbox before the terminal status and the object's deletion (grace 0,
// UID precondition).
func TestRawAPIAgent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	log := &callLog{}
	rs := &loggedRuntime{FakeRuntimeService: critest.NewFakeRuntimeService(), log: log}
	rt, err := cri.New(cri.Config{PodLogDir: t.TempDir()}, rs, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs := fake.NewClientset()
	cs.PrependReactor("*", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch a := a.(type) {
		case k8stesting.UpdateAction:
			p := a.GetObject().(*v1.Pod)
			log.add(fmt.Sprintf("update pods/%s %s", a.GetSubresource(), p.Status.Phase))
		case k8stesting.DeleteAction:
			o := a.GetDeleteOptions()
			log.add(fmt.Sprintf("delete pods grace %d uid %s", ptr.Deref(o.GracePeriodSeconds, -1), ptr.Deref(ptr.Deref(o.Preconditions, metav1.Preconditions{}).UID, "")))
		}
		return false, nil, nil
	})
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC))
	a := &rawAPIAgent{client: cs, rt: rt, rs: rs, node: "crivk-local", nodeIP: "192.168.1.5", maxPods: 250, clock: clk,
		leasePeriod: 10 * time.Second, logf: t.Logf}
	actx, stop := context.WithCancel(ctx)
	defer func() { stop(); a.wait() }()
	if err := a.start(actx); err != nil {
		t.Fatal(err)
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, "crivk-local", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !nodeIsReady(n) || n.Status.Capacity.Pods().Value() != 250 || n.Status.Addresses[0].Address != "192.168.1.5" {
		t.Errorf("node registered as %+v", n.Status)
	}
	l, err := cs.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, "crivk-local", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.RenewTime == nil || !l.Spec.RenewTime.Time.Equal(clk.Now()) || ptr.Deref(l.Spec.HolderIdentity, "") != "crivk-local" {
		t.Errorf("lease %+v", l.Spec)
	}
	poll := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("%s: %v; calls %v", what, err, log.get())
		}
	}
	// The lease is renewed every 10 s, by a ticker the lease loop creates
	// once its goroutine runs: the clock moves once the ticker waits on it.
	poll("the lease ticker", clk.HasWaiters)
	clk.Step(10 * time.Second)
	poll("lease renewed", func() bool {
		l, err := cs.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, "crivk-local", metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.Time.Equal(clk.Now())
	})

	f := podFactory{ns: "crivk-bench", node: "crivk-local", image: "pause", run: "r"}
	p := f.sleeper("w1-0")
	p.UID = types.UID("uid-1")
	if _, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll("pod Running", func() bool {
		got, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		return err == nil && podReady(got)
	})
	got, _ := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	sbs, _ := rs.ListPodSandbox(ctx, nil)
	if len(sbs) != 1 || sbs[0].GetMetadata().GetUid() != "uid-1" {
		t.Fatalf("sandboxes %v", sbs)
	}
	ctrs, _ := rs.ListContainers(ctx, nil)
	if len(ctrs) != 1 || got.Status.ContainerStatuses[0].ContainerID != "containerd://"+ctrs[0].Id || got.Status.HostIP != "192.168.1.5" {
		t.Errorf("status %+v for containers %v", got.Status, ctrs)
	}

	// The API server's graceful deletion: deletionTimestamp and the grace.
	now := metav1.NewTime(clk.Now())
	got.DeletionTimestamp, got.DeletionGracePeriodSeconds = &now, ptr.To[int64](30)
	if _, err := cs.CoreV1().Pods(p.Namespace).Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll("pod deleted", func() bool {
		_, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		return err != nil
	})
	var order []string
	for _, c := range log.get() {
		if strings.HasPrefix(c, "update pods/ ") { // the test's own update
			continue
		}
		order = append(order, c)
	}
	want := []string{"update pods/status Running", "StopContainer 30", "StopPodSandbox", "RemovePodSandbox",
		"update pods/status Succeeded", "delete pods grace 0 uid uid-1"}
	if !slices.Equal(order, want) {
		t.Errorf("calls\n%v\nwant\n%v", order, want)
	}
	if sbs, _ := rs.ListPodSandbox(ctx, nil); len(sbs) != 0 {
		t.Errorf("sandboxes left: %v", sbs)
	}
}
