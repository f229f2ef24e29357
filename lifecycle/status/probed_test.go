package status

import (
	"testing"

	"github.com/crivk/crivk/lifecycle/prober"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestProbedState(t *testing.T) {
	yes := true
	probe := &v1.Probe{} // only whether a container has one counts here
	running := func(id string, ready bool, started *bool) v1.ContainerStatus {
		return v1.ContainerStatus{Name: "a", ContainerID: "containerd://" + id, Ready: ready, Started: started,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}}}
	}
	for _, tc := range []struct {
		name          string
		container     v1.Container
		results       map[prober.ProbeType]prober.Result
		previous      []v1.ContainerStatus
		nilProbes     bool
		started, want bool
	}{
		{name: "no probes", container: v1.Container{Name: "a"}, started: true, want: true},
		{name: "readiness unknown", container: v1.Container{Name: "a", ReadinessProbe: probe}, started: true, want: false},
		{name: "readiness success", container: v1.Container{Name: "a", ReadinessProbe: probe},
			results: map[prober.ProbeType]prober.Result{prober.Readiness: prober.Success}, started: true, want: true},
		{name: "readiness failure beats a ready previous status", container: v1.Container{Name: "a", ReadinessProbe: probe},
			results: map[prober.ProbeType]prober.Result{prober.Readiness: prober.Failure}, previous: []v1.ContainerStatus{running("c1", true, &yes)}, started: true, want: false},
		{name: "ready before a restart of crivk stays ready", container: v1.Container{Name: "a", ReadinessProbe: probe},
			previous: []v1.ContainerStatus{running("c1", true, &yes)}, started: true, want: true},
		{name: "previous ready of another container does not count", container: v1.Container{Name: "a", ReadinessProbe: probe},
			previous: []v1.ContainerStatus{running("c0", true, &yes)}, started: true, want: false},
		{name: "startup not yet succeeded", container: v1.Container{Name: "a", StartupProbe: probe}, started: false, want: false},
		{name: "startup succeeded", container: v1.Container{Name: "a", StartupProbe: probe},
			results: map[prober.ProbeType]prober.Result{prober.Startup: prober.Success}, started: true, want: true},
		{name: "readiness success but not started", container: v1.Container{Name: "a", StartupProbe: probe, ReadinessProbe: probe},
			results: map[prober.ProbeType]prober.Result{prober.Readiness: prober.Success}, started: false, want: false},
		{name: "nothing probes: readiness never ready", container: v1.Container{Name: "a", ReadinessProbe: probe, StartupProbe: probe},
			nilProbes: true, started: true, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Previous: v1.PodStatus{ContainerStatuses: tc.previous}}
			if !tc.nilProbes {
				in.Probes = fakeResults(tc.results)
			}
			started, ready := probedState(in, &tc.container, "containerd://c1", "c1")
			if started != tc.started || ready != tc.want {
				t.Errorf("(started, ready) = (%v, %v), want (%v, %v)", started, ready, tc.started, tc.want)
			}
		})
	}
}

type fakeResults map[prober.ProbeType]prober.Result

func (f fakeResults) Result(t prober.ProbeType, _ string) (prober.Result, bool) {
	r, ok := f[t]
	return r, ok
}
