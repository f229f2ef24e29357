package lifecycle

// PodCounts are the engine's pod gauges at one moment, the kubelet's
// kubelet_desired_pods and kubelet_working_pods.
type PodCounts struct {
	// Desired is the number of pods the pod manager holds.
	Desired int
	// Working counts the pods with a worker by the work their state calls
	// for ("sync", "terminating", "terminated") and by config: "desired"
	// (the pod manager holds the pod), "orphan" (it no longer does) or
	// "runtime_only" (a pod only the runtime had).
	Working map[[2]string]int
}

// PodCounts returns the pod gauges now (read at each metrics scrape).
func (e *Engine) PodCounts() PodCounts {
	c := PodCounts{Desired: len(e.pods.list()), Working: map[[2]string]int{}}
	for _, w := range e.workers.WorkingPods() {
		config := "desired"
		switch {
		case w.RuntimeOnly:
			config = "runtime_only"
		case e.pods.pod(w.UID) == nil:
			config = "orphan"
		}
		c.Working[[2]string{w.Work.String(), config}]++
	}
	return c
}
