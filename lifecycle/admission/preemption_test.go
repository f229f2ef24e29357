package admission

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func priority(p int32) func(*v1.Pod) { return func(pod *v1.Pod) { pod.Spec.Priority = ptr.To(p) } }

// guaranteed sets limits equal to the requests already set.
func guaranteed(p *v1.Pod) {
	p.Spec.Containers[0].Resources.Limits = p.Spec.Containers[0].Resources.Requests
}

func annotated(k, v string) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Annotations = map[string]string{k: v} }
}

func TestIsCritical(t *testing.T) {
	for name, tc := range map[string]struct {
		pod  *v1.Pod
		want bool
	}{
		"no priority":             {pod: pod("a"), want: false},
		"below system critical":   {pod: pod("a", priority(1999999999)), want: false},
		"system-cluster-critical": {pod: pod("a", priority(2000000000)), want: true},
		"system-node-critical":    {pod: pod("a", priority(2000001000)), want: true},
		"static (file source)":    {pod: pod("a", annotated("kubernetes.io/config.source", "file")), want: true},
		"API source":              {pod: pod("a", annotated("kubernetes.io/config.source", "api")), want: false},
		"mirror":                  {pod: pod("a", annotated("kubernetes.io/config.mirror", "h")), want: true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := IsCritical(tc.pod); got != tc.want {
				t.Errorf("IsCritical = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPodsToPreempt: the kubelet's choice of victims (getPodsToPreempt):
// classes spared in the order guaranteed, burstable, best-effort; the
// fewest pods, the nearest to what is needed, the smaller on a tie; never
// a pod the preemptor may not preempt.
func TestPodsToPreempt(t *testing.T) {
	critical := pod("critical", priority(2000001000))
	be1, be2 := pod("be1", priority(0)), pod("be2", priority(0))
	bu100 := pod("bu100", priority(0), requests("100m", "100Mi"))
	bu200 := pod("bu200", priority(0), requests("200m", "200Mi"))
	bu400 := pod("bu400", priority(0), requests("100m", "400Mi"))
	bu400cpu := pod("bu400cpu", priority(0), requests("300m", "400Mi"))
	g500 := pod("g500", priority(0), requests("500m", "500Mi"), guaranteed)
	static := pod("static", annotated("kubernetes.io/config.source", "file"), requests("1", "1Gi"))
	mib := int64(1 << 20)
	mem := func(n int64) Insufficient {
		return Insufficient{Resource: v1.ResourceMemory, Requested: n * mib, Used: 0, Capacity: 0}
	}
	for name, tc := range map[string]struct {
		candidates []*v1.Pod
		need       []Insufficient
		want       []string
		err        string
	}{
		"nothing needed": {candidates: []*v1.Pod{bu100}, want: []string{}},
		"one pod that frees it all beats two": {candidates: []*v1.Pod{bu100, bu200, bu400},
			need: []Insufficient{mem(300)}, want: []string{"bu400"}},
		"two pods when no one pod is enough": {candidates: []*v1.Pod{bu100, bu200},
			need: []Insufficient{mem(300)}, want: []string{"bu200", "bu100"}},
		"the smaller request on a tie": {candidates: []*v1.Pod{bu400cpu, bu400},
			need: []Insufficient{mem(300)}, want: []string{"bu400"}},
		"guaranteed spared while burstable pods suffice": {candidates: []*v1.Pod{g500, bu400},
			need: []Insufficient{mem(300)}, want: []string{"bu400"}},
		"guaranteed only as needed, then no burstable": {candidates: []*v1.Pod{g500, bu100, be1},
			need: []Insufficient{mem(450)}, want: []string{"g500"}},
		"a pod slot: best-effort first": {candidates: []*v1.Pod{g500, bu100, be1},
			need: []Insufficient{{Resource: v1.ResourcePods, Requested: 1, Used: 3, Capacity: 3}}, want: []string{"be1"}},
		"cpu and memory together": {candidates: []*v1.Pod{be2, bu100, bu200, bu400cpu},
			need: []Insufficient{{Resource: v1.ResourceCPU, Requested: 250, Used: 900, Capacity: 1000}, mem(300)},
			want: []string{"bu400cpu"}},
		"critical pods are never victims": {candidates: []*v1.Pod{static, bu100},
			need: []Insufficient{mem(300)}, err: "no set of running pods found to reclaim resources: [(res: memory, q: 209715200), ]"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := PodsToPreempt(critical, tc.candidates, tc.need)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			names := []string{}
			for _, p := range got {
				names = append(names, p.Name)
			}
			if !reflect.DeepEqual(names, tc.want) {
				t.Errorf("victims %v, want %v", names, tc.want)
			}
		})
	}
}

func TestPreemptable(t *testing.T) {
	for name, tc := range map[string]struct {
		preemptor, preemptee *v1.Pod
		want                 bool
	}{
		"critical over a non-critical":    {pod("a", priority(2000000000)), pod("b"), true},
		"critical over a critical":        {pod("a", priority(2000000000)), pod("b", priority(2000000000)), false},
		"higher priority over lower":      {pod("a", priority(10)), pod("b", priority(5)), true},
		"equal priority":                  {pod("a", priority(10)), pod("b", priority(10)), false},
		"no priority on the preemptee":    {pod("a", priority(10)), pod("b"), false},
		"node-critical over cluster-crit": {pod("a", priority(2000001000)), pod("b", priority(2000000000)), true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Preemptable(tc.preemptor, tc.preemptee); got != tc.want {
				t.Errorf("Preemptable = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestFilterKeepsEveryFailure: every failed predicate is returned in the
// kubelet's order, resources first, so that preemption knows whether only
// resources are missing.
func TestFilterKeepsEveryFailure(t *testing.T) {
	n := node()
	holder := pod("holder", requests("1500m", "3Gi"), hostPort(8080, ""))
	p := pod("p", requests("1", "2Gi"), hostPort(8080, ""))
	fs := Filter(p, n, []*v1.Pod{holder})
	var reasons []string
	for _, f := range fs {
		reasons = append(reasons, f.Result.Reason)
	}
	if want := []string{"OutOfcpu", "OutOfmemory", "NodePorts"}; !reflect.DeepEqual(reasons, want) {
		t.Fatalf("reasons %v, want %v", reasons, want)
	}
	if in := fs[0].Insufficient; in == nil || *in != (Insufficient{Resource: v1.ResourceCPU, Requested: 1000, Used: 1500, Capacity: 2000}) {
		t.Errorf("cpu failure %+v", in)
	}
	if fs[2].Insufficient != nil {
		t.Errorf("a port failure carries a resource: %+v", fs[2].Insufficient)
	}
	if r := Admit(p, n, []*v1.Pod{holder}); r.Reason != "OutOfcpu" {
		t.Errorf("Admit's reason %q, want the first failure", r.Reason)
	}
}
