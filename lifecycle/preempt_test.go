package lifecycle

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

func preemptNode() *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
		v1.ResourceMemory: resource.MustParse("1Gi"), v1.ResourceCPU: resource.MustParse("2"), v1.ResourcePods: resource.MustParse("110"),
	}}}
}

func prioritised(uid types.UID, name string, prio int32, mem string) *v1.Pod {
	p := enginePod(uid, name, v1.RestartPolicyAlways)
	p.Status.Phase = v1.PodPending
	p.Spec.Priority = ptr.To(prio)
	if mem != "" {
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse(mem)}
	}
	return p
}

// drain returns the events recorded so far.
func drain(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case ev := <-rec.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// TestEngineCriticalPodPreemption: a critical pod refused only for lack of
// resources is admitted once the kubelet's choice of lower-priority pods
// is evicted with its own grace period, reason Preempting, the kubelet's
// message, DisruptionTarget condition and event; every other refusal
// stands, and nothing is evicted for it.
func TestEngineCriticalPodPreemption(t *testing.T) {
	const critical, low = int32(2000001000), int32(0)
	for name, tc := range map[string]struct {
		running []*v1.Pod
		pod     *v1.Pod
		// victims are the pods preempted; none: the pod is refused with
		// reason and message.
		victims         []types.UID
		reason, message string
		// killExit is the exit code of the victims' containers when
		// stopped: 0 (pause on SIGTERM), the victims end Succeeded
		// without reason and message; else Failed, Preempting (the
		// kubelet's SyncTerminatingPod and generateAPIPodStatus).
		killExit int32
	}{
		"critical pod: the one victim that frees enough": {
			running:  []*v1.Pod{prioritised("uid-small", "small", low, "300Mi"), prioritised("uid-big", "big", low, "600Mi")},
			pod:      prioritised("uid-crit", "crit", critical, "500Mi"),
			victims:  []types.UID{"uid-big"},
			killExit: 137,
		},
		"critical pod: two victims when one is not enough": {
			running:  []*v1.Pod{prioritised("uid-a", "a", low, "400Mi"), prioritised("uid-b", "b", low, "400Mi")},
			pod:      prioritised("uid-crit", "crit", critical, "900Mi"),
			victims:  []types.UID{"uid-a", "uid-b"},
			killExit: 137,
		},
		// The node e2e spec CriticalPod[WithPodLevelResources] "should be
		// able to create and delete a critical pod": pause victims.
		"critical pod: victims whose containers exit 0 end Succeeded": {
			running: []*v1.Pod{prioritised("uid-a", "a", low, "400Mi"), prioritised("uid-b", "b", low, "400Mi")},
			pod:     prioritised("uid-crit", "crit", critical, "900Mi"),
			victims: []types.UID{"uid-a", "uid-b"},
		},
		"not critical: refused, nothing preempted": {
			running: []*v1.Pod{prioritised("uid-big", "big", low, "600Mi")},
			pod:     prioritised("uid-hi", "hi", 1000000, "500Mi"),
			reason:  "OutOfmemory", message: "Node didn't have enough resource: memory, requested: 524288000, used: 629145600, capacity: 1073741824",
		},
		"critical pod refused for another reason too: that reason, nothing preempted": {
			running: []*v1.Pod{prioritised("uid-big", "big", low, "600Mi")},
			pod: func() *v1.Pod {
				p := prioritised("uid-crit", "crit", critical, "500Mi")
				p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
				return p
			}(),
			reason: "NodeAffinity", message: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
		},
		"critical pod and only critical pods to take from": {
			running: []*v1.Pod{prioritised("uid-big", "big", critical, "600Mi")},
			pod:     prioritised("uid-crit", "crit", critical, "500Mi"),
			reason:  "UnexpectedAdmissionError",
			message: "Unexpected error while attempting to recover from admission failure: preemption: error finding a set of pods to preempt: no set of running pods found to reclaim resources: [(res: memory, q: 79691776), ]",
		},
	} {
		t.Run(name, func(t *testing.T) {
			rec := record.NewFakeRecorder(100)
			f := newEngineFixture(t, func(c *Config) {
				c.Node = preemptNode
				c.Recorder = rec
			})
			f.rt.killExit = tc.killExit
			for _, p := range tc.running {
				f.startRunning(t, p)
			}
			drain(rec)
			done := make(chan struct{})
			go func() { f.e.UpdatePod(context.Background(), tc.pod); close(done) }()
			f.eventually(t, "UpdatePod to return", func() bool {
				select {
				case <-done:
					return true
				default:
					return false
				}
			})
			events := strings.Join(drain(rec), "\n")
			if tc.reason != "" {
				f.eventually(t, "the rejection", func() bool { return f.lastPhase(tc.pod.UID) == v1.PodFailed })
				got := f.lastPublished(tc.pod.UID)
				if got.Status.Reason != tc.reason || got.Status.Message != "Pod was rejected: "+tc.message {
					t.Errorf("status %q %q, want %q %q", got.Status.Reason, got.Status.Message, tc.reason, "Pod was rejected: "+tc.message)
				}
				if !strings.Contains(events, "Warning "+tc.reason+" "+tc.message) {
					t.Errorf("events %q, want the rejection's", events)
				}
				if n := len(f.rt.ops("", "KillPod")); n != 0 {
					t.Errorf("%d pods killed for a refused pod", n)
				}
				return
			}
			f.eventually(t, "the critical pod Running", func() bool { return f.lastPhase(tc.pod.UID) == v1.PodRunning })
			victims := map[types.UID]bool{}
			for _, uid := range tc.victims {
				victims[uid] = true
			}
			for _, p := range tc.running {
				kills := f.rt.ops(p.UID, "KillPod")
				if !victims[p.UID] {
					if len(kills) != 0 {
						t.Errorf("%s was killed, but it is no victim", p.Name)
					}
					continue
				}
				if len(kills) == 0 || kills[0].grace != 17 {
					t.Errorf("%s: kills %v, want one with the pod's own grace period 17", p.Name, kills)
				}
				// The victim was stopped before the critical pod was started.
				for _, e := range f.rt.ops("", "KillPod", "SyncPod") {
					if e.uid == tc.pod.UID {
						t.Errorf("the critical pod was synced before %s was killed", p.Name)
					}
					if e.uid == p.UID {
						break
					}
				}
				wantPhase, wantReason, wantMessage := v1.PodFailed, "Preempting", "Preempted in order to admit critical pod"
				if tc.killExit == 0 {
					wantPhase, wantReason, wantMessage = v1.PodSucceeded, "", ""
				}
				f.eventually(t, p.Name+" "+string(wantPhase), func() bool { return f.lastPhase(p.UID) == wantPhase })
				got := f.lastPublished(p.UID)
				if got.Status.Reason != wantReason || got.Status.Message != wantMessage {
					t.Errorf("%s: status %q %q, want %q %q", p.Name, got.Status.Reason, got.Status.Message, wantReason, wantMessage)
				}
				var dt *v1.PodCondition
				for i := range got.Status.Conditions {
					if got.Status.Conditions[i].Type == v1.DisruptionTarget {
						dt = &got.Status.Conditions[i]
					}
				}
				if dt == nil || dt.Status != v1.ConditionTrue || dt.Reason != "TerminationByKubelet" ||
					dt.Message != "Pod was preempted by Kubelet to accommodate a critical pod." {
					t.Errorf("%s: DisruptionTarget %+v", p.Name, dt)
				}
				if f.e.Pod(p.UID) == nil {
					t.Errorf("%s: a preempted pod stays until deleted", p.Name)
				}
			}
			if n := strings.Count(events, "Warning Preempting Preempted in order to admit critical pod"); n != len(tc.victims) {
				t.Errorf("%d Preempting events, want %d: %q", n, len(tc.victims), events)
			}
		})
	}
}

// TestEvictExceededGracePeriod: a pod whose containers are not stopped
// within 1.5 times its grace period (10 s at least) gets the kubelet's
// ExceededGracePeriod event (killPodNow), Evict returns an error, and a
// preemption goes on to admit the critical pod.
func TestEvictExceededGracePeriod(t *testing.T) {
	rec := record.NewFakeRecorder(100)
	f := newEngineFixture(t, func(c *Config) {
		c.Node = preemptNode
		c.Recorder = rec
	})
	stuck := prioritised("uid-stuck", "stuck", 0, "600Mi")
	f.startRunning(t, stuck)
	drain(rec)
	f.rt.mu.Lock()
	f.rt.blockKillAbove = 5 // the pod's 17 s: KillPod never returns
	f.rt.mu.Unlock()
	done := make(chan struct{})
	go func() {
		f.e.UpdatePod(context.Background(), prioritised("uid-crit", "crit", 2000001000, "500Mi"))
		close(done)
	}()
	f.eventually(t, "the victim's KillPod", func() bool { return f.rt.count("uid-stuck", "KillPod") > 0 })
	var events []string
	f.eventually(t, "ExceededGracePeriod after 1.5 x 17 s", func() bool {
		events = append(events, drain(rec)...)
		for _, ev := range events {
			if ev == "Warning ExceededGracePeriod Container runtime did not kill the pod within specified grace period." {
				return true
			}
		}
		f.clock.Step(time.Second)
		return false
	})
	if elapsed := f.clock.Since(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)); elapsed < 25*time.Second {
		t.Errorf("ExceededGracePeriod after %v, want no sooner than 25 s (1.5 x 17 s)", elapsed)
	}
	f.eventually(t, "UpdatePod to return", func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	f.eventually(t, "the critical pod Running", func() bool { return f.lastPhase("uid-crit") == v1.PodRunning })
}
