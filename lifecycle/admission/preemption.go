package admission

import (
	"fmt"
	"math"
	"strings"

	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
)

// The critical pod admission (the kubelet's preemption package,
// CriticalPodAdmissionHandler): a critical pod refused only for lack of
// resources is admitted after lower-priority pods are evicted to free
// them. The engine (lifecycle/preempt.go) runs it; the choice of victims
// is here, pure.

// IsCritical is the kubelet's IsCriticalPod (podutil.IsCriticalPod): a
// static pod, a mirror pod, or a pod of priority 2*10^9 or more
// (system-cluster-critical, system-node-critical).
func IsCritical(pod *v1.Pod) bool { return podutil.IsCriticalPod(pod) }

// Preemptable is the kubelet's rule for whether preemptor may preempt
// preemptee: a critical pod preempts any pod that is not critical;
// otherwise only a strictly higher priority preempts (both set).
func Preemptable(preemptor, preemptee *v1.Pod) bool {
	if IsCritical(preemptor) && !IsCritical(preemptee) {
		return true
	}
	return preemptor.Spec.Priority != nil && preemptee.Spec.Priority != nil &&
		*preemptor.Spec.Priority > *preemptee.Spec.Priority
}

// requirement is an amount of one resource to free (the kubelet's
// admissionRequirement), in the unit of request.
type requirement struct {
	name     v1.ResourceName
	quantity int64
}

type requirements []requirement

// Requirements are what must be freed for the refusals in: for each, the
// requested amount minus what is free (the kubelet's
// GetInsufficientAmount).
func requirementsOf(in []Insufficient) requirements {
	out := make(requirements, 0, len(in))
	for _, i := range in {
		out = append(out, requirement{name: i.Resource, quantity: i.Requested - (i.Capacity - i.Used)})
	}
	return out
}

func (rs requirements) String() string {
	var b strings.Builder
	b.WriteString("[")
	for _, r := range rs {
		fmt.Fprintf(&b, "(res: %v, q: %d), ", r.name, r.quantity)
	}
	return b.String() + "]"
}

// minus is what would be left to free once pods are gone.
func (rs requirements) minus(pods ...*v1.Pod) requirements {
	var out requirements
	for _, r := range rs {
		q := r.quantity
		for _, p := range pods {
			q -= podutil.PodRequest(p, r.name)
			if q <= 0 {
				break
			}
		}
		if q > 0 {
			out = append(out, requirement{name: r.name, quantity: q})
		}
	}
	return out
}

// distance is how far pod's requests fall short of rs: the sum over the
// requirements of the squared fraction each leaves unmet, so that every
// resource weighs the same whatever its unit.
func (rs requirements) distance(pod *v1.Pod) float64 {
	d := 0.0
	for _, r := range rs {
		if left := float64(r.quantity - podutil.PodRequest(pod, r.name)); left > 0 {
			d += math.Pow(left/float64(r.quantity), 2)
		}
	}
	return d
}

// PodsToPreempt chooses, among candidates (the pods holding resources,
// with their allocations), the pods to evict so that pod fits where it was
// refused for the resources in need, by the kubelet's getPodsToPreempt:
// only pods pod may preempt (Preemptable) are taken; guaranteed pods are
// spared most, then burstable, then best-effort (as few guaranteed as
// are needed even if every other pod went, then as few burstable, then
// best-effort); within a class the fewest pods, each round the one whose
// requests come nearest to what is left to free, the smaller (memory, then
// cpu) on a tie. The order is best-effort, burstable, guaranteed. It
// returns an error naming what is left when no set of candidates frees
// enough.
func PodsToPreempt(pod *v1.Pod, candidates []*v1.Pod, need []Insufficient) ([]*v1.Pod, error) {
	reqs := requirementsOf(need)
	var bestEffort, burstable, guaranteed []*v1.Pod
	for _, p := range candidates {
		if !Preemptable(pod, p) {
			continue
		}
		switch podutil.QOSClass(p) {
		case v1.PodQOSBestEffort:
			bestEffort = append(bestEffort, p)
		case v1.PodQOSBurstable:
			burstable = append(burstable, p)
		case v1.PodQOSGuaranteed:
			guaranteed = append(guaranteed, p)
		}
	}
	all := append(append(append([]*v1.Pod{}, bestEffort...), burstable...), guaranteed...)
	if left := reqs.minus(all...); len(left) > 0 {
		return nil, fmt.Errorf("no set of running pods found to reclaim resources: %v", left)
	}
	g, err := nearest(guaranteed, reqs.minus(append(append([]*v1.Pod{}, bestEffort...), burstable...)...))
	if err != nil {
		return nil, err
	}
	b, err := nearest(burstable, reqs.minus(append(append([]*v1.Pod{}, bestEffort...), g...)...))
	if err != nil {
		return nil, err
	}
	be, err := nearest(bestEffort, reqs.minus(append(append([]*v1.Pod{}, b...), g...)...))
	if err != nil {
		return nil, err
	}
	return append(append(be, b...), g...), nil
}

// nearest picks pods until reqs are met, each round the pod at the
// smallest distance from what is left (the smaller request on a tie), the
// kubelet's getPodsToPreemptByDistance.
func nearest(pods []*v1.Pod, reqs requirements) ([]*v1.Pod, error) {
	pods = append([]*v1.Pod{}, pods...)
	out := []*v1.Pod{}
	for len(reqs) > 0 {
		if len(pods) == 0 {
			return nil, fmt.Errorf("no set of running pods found to reclaim resources: %v", reqs)
		}
		best, bestDist := 0, float64(len(reqs)+1)
		for i, p := range pods {
			d := reqs.distance(p)
			if d < bestDist || (d == bestDist && smallerRequest(p, pods[best])) {
				best, bestDist = i, d
			}
		}
		reqs = reqs.minus(pods[best])
		out = append(out, pods[best])
		pods[best] = pods[len(pods)-1]
		pods = pods[:len(pods)-1]
	}
	return out, nil
}

// smallerRequest: a requests less memory than b, or as much and less cpu
// (or the same of both).
func smallerRequest(a, b *v1.Pod) bool {
	for _, name := range []v1.ResourceName{v1.ResourceMemory, v1.ResourceCPU} {
		ra, rb := podutil.PodRequest(a, name), podutil.PodRequest(b, name)
		if ra != rb {
			return ra < rb
		}
	}
	return true
}
