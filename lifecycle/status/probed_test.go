package status

import (
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/lifecycle/prober"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestProbedState(t *testing.T) {
	yes, no := true, false
	probe := &v1.Probe{} // only whether a container has one counts here
	running := func(id string, ready bool, started *bool) v1.ContainerStatus {
		return v1.ContainerStatus{Name: "a", ContainerID: "containerd://" + id, Ready: ready, Started: started,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}}}
	}
	readyPod := func(s v1.ConditionStatus) *v1.Pod {
		return &v1.Pod{Status: v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: s}}}}
	}
	withContainers := func(p *v1.Pod, cs ...v1.ContainerStatus) *v1.Pod {
		p.Status.ContainerStatuses = cs
		return p
	}
	both := v1.Container{Name: "a", StartupProbe: probe, ReadinessProbe: probe}
	for _, tc := range []struct {
		name      string
		container v1.Container
		results   map[prober.ProbeType]prober.Result
		previous  []v1.ContainerStatus
		// apiPod is the pod object (its status is the API's); ranBefore:
		// the container ran before crivk started (RanBeforeStart).
		apiPod        *v1.Pod
		ranBefore     bool
		nilProbes     bool
		started, want bool
	}{
		{name: "no probes", container: v1.Container{Name: "a"}, started: true, want: true},
		{name: "readiness unknown", container: v1.Container{Name: "a", ReadinessProbe: probe}, started: true, want: false},
		{name: "readiness success", container: v1.Container{Name: "a", ReadinessProbe: probe},
			results: map[prober.ProbeType]prober.Result{prober.Readiness: prober.Success}, started: true, want: true},
		{name: "readiness failure beats a ready previous status", container: v1.Container{Name: "a", ReadinessProbe: probe},
			results: map[prober.ProbeType]prober.Result{prober.Readiness: prober.Failure}, previous: []v1.ContainerStatus{running("c1", true, &yes)},
			apiPod: readyPod(v1.ConditionTrue), ranBefore: true, started: true, want: false},
		{name: "startup not yet succeeded", container: v1.Container{Name: "a", StartupProbe: probe}, started: false, want: false},
		{name: "startup succeeded", container: v1.Container{Name: "a", StartupProbe: probe},
			results: map[prober.ProbeType]prober.Result{prober.Startup: prober.Success}, started: true, want: true},
		{name: "readiness success but not started", container: both,
			results: map[prober.ProbeType]prober.Result{prober.Readiness: prober.Success}, started: false, want: false},
		{name: "nothing probes: readiness never ready", container: both, nilProbes: true, started: true, want: false},

		// crivk restarted (the kubelet's isContainerStarted and
		// setReadyStateOnKubeletRestart): no probe ran since.
		{name: "restart: started and ready in the API stays started and ready", container: both,
			previous: []v1.ContainerStatus{running("c1", true, &yes)}, apiPod: readyPod(v1.ConditionTrue), ranBefore: true,
			started: true, want: true},
		{name: "restart: pod not Ready in the API: not ready", container: both,
			previous: []v1.ContainerStatus{running("c1", true, &yes)}, apiPod: readyPod(v1.ConditionFalse), ranBefore: true,
			started: true, want: false},
		{name: "restart: no PodReady condition in the API: not ready", container: v1.Container{Name: "a", ReadinessProbe: probe},
			apiPod: &v1.Pod{}, ranBefore: true, started: true, want: false},
		{name: "restart: not started in the API stays not started", container: both,
			previous: []v1.ContainerStatus{running("c1", false, &no)}, apiPod: readyPod(v1.ConditionTrue), ranBefore: true,
			started: false, want: false},
		{name: "restart: the API's Started of another container does not count", container: both,
			previous: []v1.ContainerStatus{running("c0", true, &yes)}, apiPod: readyPod(v1.ConditionTrue), ranBefore: true,
			started: false, want: false},
		{name: "restart: started in the API, the previous status generated without it: started and ready", container: both,
			previous: []v1.ContainerStatus{running("c1", false, &no)}, apiPod: withContainers(readyPod(v1.ConditionTrue), running("c1", true, &yes)),
			ranBefore: true, started: true, want: true},
		{name: "started after crivk: the API's Started does not count", container: both,
			apiPod: withContainers(readyPod(v1.ConditionTrue), running("c1", true, &yes)), started: false, want: false},
		{name: "restart: a settled startup Unknown (new container) is not started", container: both,
			results:  map[prober.ProbeType]prober.Result{prober.Startup: prober.Unknown},
			previous: []v1.ContainerStatus{running("c1", true, &yes)}, apiPod: readyPod(v1.ConditionTrue), ranBefore: true,
			started: false, want: false},
		{name: "started after crivk: not ready until its readiness probe succeeds", container: both,
			results:  map[prober.ProbeType]prober.Result{prober.Startup: prober.Success},
			previous: []v1.ContainerStatus{running("c1", true, &yes)}, apiPod: readyPod(v1.ConditionTrue),
			started: true, want: false},
		{name: "started after crivk: not started until its startup probe succeeds", container: both,
			results: map[prober.ProbeType]prober.Result{prober.Startup: prober.Unknown, prober.Readiness: prober.Failure},
			apiPod:  readyPod(v1.ConditionTrue), started: false, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Pod: tc.apiPod, Previous: v1.PodStatus{ContainerStatuses: tc.previous}}
			if !tc.nilProbes {
				in.Probes = fakeResults{results: tc.results, ranBefore: tc.ranBefore}
			}
			started, ready := probedState(in, &tc.container, "containerd://c1", "c1", time.Unix(1000, 0))
			if started != tc.started || ready != tc.want {
				t.Errorf("(started, ready) = (%v, %v), want (%v, %v)", started, ready, tc.started, tc.want)
			}
		})
	}
}

type fakeResults struct {
	results   map[prober.ProbeType]prober.Result
	ranBefore bool
}

func (f fakeResults) Result(t prober.ProbeType, _ string) (prober.Result, bool) {
	r, ok := f.results[t]
	return r, ok
}

func (f fakeResults) RanBeforeStart(time.Time) bool { return f.ranBefore }

// TestGenerateAfterRestartKeepsReady is the node e2e "MirrorPod when
// kubelet restarts should not change container status" at the level of
// one status generation: crivk just started, no probe ran, the API (the
// mirror pod's status) says started and Ready; the container keeps both
// and the pod stays Ready.
func TestGenerateAfterRestartKeepsReady(t *testing.T) {
	yes := true
	rt := rtStatus(true, reg("a", 0, cri.StateRunning, 0))
	api := v1.PodStatus{
		Phase: v1.PodRunning,
		Conditions: []v1.PodCondition{
			{Type: v1.PodReady, Status: v1.ConditionTrue}, {Type: v1.ContainersReady, Status: v1.ConditionTrue},
		},
		ContainerStatuses: []v1.ContainerStatus{{
			Name: "a", ContainerID: "containerd://" + rt.Containers[0].ID, Ready: true, Started: &yes,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(rt.Containers[0].StartedAt)}},
		}},
	}
	probe := &v1.Probe{}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod", UID: "uid-1"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "a", StartupProbe: probe, ReadinessProbe: probe}}},
		Status:     api,
	}
	for _, tc := range []struct {
		name      string
		ranBefore bool
		want      bool
	}{
		{name: "container ran before crivk", ranBefore: true, want: true},
		{name: "container started after crivk", ranBefore: false, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Generate(Input{Pod: pod, Previous: *api.DeepCopy(), Runtime: rt, RuntimeName: "containerd", Now: time.Now(),
				Probes: fakeResults{ranBefore: tc.ranBefore}})
			cs := s.ContainerStatuses[0]
			if cs.Started == nil || !*cs.Started {
				t.Errorf("started %v, want true (the API's word until the startup probe runs)", cs.Started)
			}
			if cs.Ready != tc.want {
				t.Errorf("ready %v, want %v", cs.Ready, tc.want)
			}
			if c := findCond(s, v1.PodReady); c == nil || (c.Status == v1.ConditionTrue) != tc.want {
				t.Errorf("PodReady %+v, want True: %v", c, tc.want)
			}
		})
	}
}
