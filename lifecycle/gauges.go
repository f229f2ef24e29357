package lifecycle

import "github.com/crivk/crivk/podutil"

// PodCounts are the engine's pod gauges at one moment, the kubelet's
// kubelet_desired_pods and kubelet_working_pods.
type PodCounts struct {
	// Desired is the number of pods the pod manager holds that came from
	// the API server; DesiredStatic the number of static pods it holds
	// (podutil.IsStaticPod), the kubelet's static="" and static="true".
	Desired, DesiredStatic int
	// Working counts the pods with a worker by the work their state calls
	// for ("sync", "terminating", "terminated"), by config: "desired"
	// (the pod manager holds the pod), "orphan" (it no longer does) or
	// "runtime_only" (a pod only the runtime had), and by static, the
	// kubelet's label value: "true" for a static pod, "" for an API pod,
	// "unknown" for a runtime_only pod (no spec).
	Working map[[3]string]int
}

// PodCounts returns the pod gauges now (read at each metrics scrape).
func (e *Engine) PodCounts() PodCounts {
	c := PodCounts{Working: map[[3]string]int{}}
	for _, p := range e.pods.list() {
		if podutil.IsStaticPod(p) {
			c.DesiredStatic++
		} else {
			c.Desired++
		}
	}
	for _, w := range e.workers.WorkingPods() {
		config, static := "desired", ""
		switch {
		case w.RuntimeOnly:
			config, static = "runtime_only", "unknown"
		case e.pods.pod(w.UID) == nil:
			config = "orphan"
		}
		if w.Static && !w.RuntimeOnly {
			static = "true"
		}
		c.Working[[3]string{w.Work.String(), config, static}]++
	}
	return c
}
