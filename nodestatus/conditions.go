package nodestatus

import (
	"strings"
	"time"

	"github.com/crivk/crivk/cri"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Node condition reasons and messages, the kubelet's (pkg/kubelet/nodestatus).
const (
	reasonReady    = "KubeletReady"
	reasonNotReady = "KubeletNotReady"
	// RuntimeDownMessage is the kubelet's Ready message while its
	// container runtime does not answer (pkg/kubelet/kubelet_node_status.go):
	// the NotReadyReporter's before the runtime first answers, the
	// NodeProvider's when it stops answering.
	RuntimeDownMessage = "container runtime is down"
)

// PressureSource reports the node's resource pressure: the eviction
// manager (package eviction), which decides it from its signals and
// thresholds, with the transition period. nodestatus only reports it.
type PressureSource interface {
	IsUnderMemoryPressure() bool
	IsUnderDiskPressure() bool
	IsUnderPIDPressure() bool
}

// NodeConditions computes the conditions the node owns from the runtime's
// readiness and the pressure (nil: none, as before the eviction manager
// first ran), keeping the transition time of those that did not change.
// NetworkUnavailable is not among them: it belongs to the network provider
// (the kubelet never sets it); a runtime network that is not ready makes
// the node NotReady, as on the kubelet. The pressure conditions have the
// kubelet's reasons and messages (its MemoryPressureCondition,
// DiskPressureCondition and PIDPressureCondition setters).
func NodeConditions(prev []v1.NodeCondition, rd cri.Readiness, pressure PressureSource, now time.Time) []v1.NodeCondition {
	t := metav1.NewTime(now)
	ready := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: reasonReady, Message: "kubelet is posting ready status"}
	if !rd.RuntimeReady || !rd.NetworkReady {
		ready = v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: reasonNotReady, Message: rd.Message}
	}
	under := func(f func(PressureSource) bool) bool { return pressure != nil && f(pressure) }
	conds := []v1.NodeCondition{
		pressureCondition(v1.NodeMemoryPressure, under(PressureSource.IsUnderMemoryPressure)),
		pressureCondition(v1.NodeDiskPressure, under(PressureSource.IsUnderDiskPressure)),
		pressureCondition(v1.NodePIDPressure, under(PressureSource.IsUnderPIDPressure)),
		ready,
	}
	for i := range conds {
		conds[i].LastHeartbeatTime = t
		conds[i].LastTransitionTime = t
		for _, p := range prev {
			if p.Type == conds[i].Type && p.Status == conds[i].Status {
				conds[i].LastTransitionTime = p.LastTransitionTime
			}
		}
	}
	return conds
}

// pressureConditions are the kubelet's reasons and messages of each
// pressure condition: [False, True].
var pressureConditions = map[v1.NodeConditionType][2]struct{ reason, message string }{
	v1.NodeMemoryPressure: {{"KubeletHasSufficientMemory", "kubelet has sufficient memory available"}, {"KubeletHasInsufficientMemory", "kubelet has insufficient memory available"}},
	v1.NodeDiskPressure:   {{"KubeletHasNoDiskPressure", "kubelet has no disk pressure"}, {"KubeletHasDiskPressure", "kubelet has disk pressure"}},
	v1.NodePIDPressure:    {{"KubeletHasSufficientPID", "kubelet has sufficient PID available"}, {"KubeletHasInsufficientPID", "kubelet has insufficient PID available"}},
}

func pressureCondition(t v1.NodeConditionType, under bool) v1.NodeCondition {
	if under {
		w := pressureConditions[t][1]
		return v1.NodeCondition{Type: t, Status: v1.ConditionTrue, Reason: w.reason, Message: w.message}
	}
	w := pressureConditions[t][0]
	return v1.NodeCondition{Type: t, Status: v1.ConditionFalse, Reason: w.reason, Message: w.message}
}

// ownConditions returns the conditions of the types in own, in own's
// order; a missing one is left out (so it differs).
func ownConditions(api, own []v1.NodeCondition) []v1.NodeCondition {
	var out []v1.NodeCondition
	for _, o := range own {
		for _, c := range api {
			if c.Type == o.Type {
				out = append(out, c)
			}
		}
	}
	return out
}

// conditionSummary prints conditions as Type=Status pairs for a log line.
func conditionSummary(cs []v1.NodeCondition) string {
	parts := make([]string, 0, len(cs))
	for _, c := range cs {
		parts = append(parts, string(c.Type)+"="+string(c.Status))
	}
	return strings.Join(parts, ",")
}

// sameConditionStatus reports whether a and b hold the same conditions in
// the same order with the same status, reason and message: only their
// times differ (a heartbeat is no change).
func sameConditionStatus(a, b []v1.NodeCondition) bool {
	strip := func(cs []v1.NodeCondition) []v1.NodeCondition {
		out := make([]v1.NodeCondition, len(cs))
		for i, c := range cs {
			out[i] = v1.NodeCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}
		}
		return out
	}
	return equality.Semantic.DeepEqual(strip(a), strip(b))
}

// hasCondition reports whether conds holds a condition of type t.
func hasCondition(conds []v1.NodeCondition, t v1.NodeConditionType) bool {
	for _, c := range conds {
		if c.Type == t {
			return true
		}
	}
	return false
}
