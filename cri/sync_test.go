package cri

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/crivk/crivk/internal/testutil"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

type syncFixture struct {
	rt    *Runtime
	rs    *fakeRuntimeService
	is    *fakeImageService
	clock *testingclock.FakeClock
	b     *BackOffs
	dir   string
}

func newSyncFixture(t *testing.T) *syncFixture {
	t.Helper()
	clk := testingclock.NewFakeClock(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))
	rs := newFakeRuntimeService(clk)
	is := newFakeImageService()
	dir := t.TempDir()
	rt, err := New(Config{PodLogDir: dir, DNS: DNSConfig{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local"}}, rs, is)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &syncFixture{
		rt: rt, rs: rs, is: is, clock: clk, dir: dir,
		b: &BackOffs{
			Restart: flowcontrol.NewFakeBackOff(10*time.Second, 300*time.Second, clk),
			Pull:    flowcontrol.NewFakeBackOff(10*time.Second, 300*time.Second, clk),
		},
	}
}

// sync reads the pod's status, plans and carries out the plan once.
func (f *syncFixture) sync(t *testing.T, pod *v1.Pod) (*SyncResult, PodActions) {
	t.Helper()
	st := f.status(t, pod)
	plan := ComputePodActions(pod, st, PlanInputs{BackOff: f.b.View(f.clock.Now())})
	return f.rt.SyncPod(context.Background(), pod, st, plan, f.b, f.clock.Now()), plan
}

func (f *syncFixture) status(t *testing.T, pod *v1.Pod) *PodStatus {
	t.Helper()
	st, err := f.rt.GetPodStatus(context.Background(), RefOf(pod))
	if err != nil {
		t.Fatalf("GetPodStatus: %v", err)
	}
	return st
}

func syncPod(policy v1.RestartPolicy, containers ...v1.Container) *v1.Pod {
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "web", "prod", "uid-1"
	pod.Spec.RestartPolicy = policy
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	pod.Spec.Containers = containers
	return pod
}

func image(name, img string) v1.Container { return v1.Container{Name: name, Image: img} }

func TestSyncPodCreatesSandboxThenContainers(t *testing.T) {
	f := newSyncFixture(t)
	f.is.SetFakeImages([]string{"busybox:1.36", "nginx:1.27"})
	pod := syncPod(v1.RestartPolicyAlways, image("a", "busybox:1.36"), image("b", "nginx:1.27"))

	res, plan := f.sync(t, pod)
	if err := res.Error(); err != nil {
		t.Fatalf("SyncPod: %v", err)
	}
	if !plan.CreateSandbox {
		t.Fatalf("plan %s, want a new sandbox", plan)
	}
	if want := []string{"a", "b"}; !reflect.DeepEqual(res.Started, want) {
		t.Errorf("started %v, want %v", res.Started, want)
	}
	if len(res.Waiting) != 0 {
		t.Errorf("waiting %v, want none", res.Waiting)
	}
	// The sandbox comes before any container, and each container is
	// created then started.
	var order []string
	for _, c := range f.rs.GetCalls() {
		switch c {
		case "RunPodSandbox", "CreateContainer", "StartContainer":
			order = append(order, c)
		}
	}
	if want := []string{"RunPodSandbox", "CreateContainer", "StartContainer", "CreateContainer", "StartContainer"}; !reflect.DeepEqual(order, want) {
		t.Errorf("calls %v, want %v", order, want)
	}
	if n := f.is.count("PullImage"); n != 0 {
		t.Errorf("PullImage called %d times: present images must not be pulled", n)
	}

	st := f.status(t, pod)
	if len(st.Sandboxes) != 1 || !st.Sandboxes[0].Ready || st.Sandboxes[0].Attempt != 0 {
		t.Fatalf("sandboxes %+v, want one ready attempt 0", st.Sandboxes)
	}
	if got := st.IPs(); !reflect.DeepEqual(got, []string{fakePodIP}) {
		t.Errorf("pod IPs %v, want %v", got, []string{fakePodIP})
	}
	for _, name := range []string{"a", "b"} {
		c := st.Latest(name, ContainerTypeRegular)
		if c == nil || c.State != StateRunning || c.Attempt != 0 {
			t.Errorf("container %s = %+v, want running attempt 0", name, c)
			continue
		}
		if c.LogPath != name+"/0.log" {
			t.Errorf("container %s log path %q, want %s/0.log", name, c.LogPath, name)
		}
		if _, err := os.Stat(filepath.Join(f.dir, "prod_web_uid-1", name)); err != nil {
			t.Errorf("log directory of %s: %v", name, err)
		}
		if sb := f.rs.sandboxOf(c.ID); sb != st.Sandboxes[0].ID {
			t.Errorf("container %s is in sandbox %q, want %q", name, sb, st.Sandboxes[0].ID)
		}
	}

	// A second sync has nothing to do.
	before := len(f.rs.GetCalls())
	res, plan = f.sync(t, pod)
	if plan.String() != "none" || len(res.Started) != 0 {
		t.Errorf("second sync: plan %s, started %v, want nothing", plan, res.Started)
	}
	for _, c := range f.rs.GetCalls()[before:] {
		if c == "RunPodSandbox" || c == "CreateContainer" || c == "StartContainer" {
			t.Errorf("second sync called %s", c)
		}
	}
}

func TestSyncPodInitContainersInOrder(t *testing.T) {
	f := newSyncFixture(t)
	f.is.SetFakeImages([]string{"busybox:1.36"})
	pod := syncPod(v1.RestartPolicyAlways, image("app", "busybox:1.36"))
	pod.Spec.InitContainers = []v1.Container{image("init", "busybox:1.36")}

	res, _ := f.sync(t, pod)
	if want := []string{"init"}; !reflect.DeepEqual(res.Started, want) || res.Error() != nil {
		t.Fatalf("first sync started %v (err %v), want only %v", res.Started, res.Error(), want)
	}
	init := f.status(t, pod).Latest("init", ContainerTypeInit)
	if init == nil || init.State != StateRunning {
		t.Fatalf("init container %+v, want running with type init", init)
	}

	res, _ = f.sync(t, pod)
	if len(res.Started) != 0 {
		t.Fatalf("sync while init runs started %v, want nothing", res.Started)
	}

	if err := f.rs.setContainer(init.ID, func(c *fakeContainer) {
		c.State = runtimeapi.ContainerState_CONTAINER_EXITED
		c.ExitCode = 0
		c.FinishedAt = f.clock.Now().UnixNano()
	}); err != nil {
		t.Fatal(err)
	}
	res, _ = f.sync(t, pod)
	if want := []string{"app"}; !reflect.DeepEqual(res.Started, want) || res.Error() != nil {
		t.Fatalf("sync after init started %v (err %v), want %v", res.Started, res.Error(), want)
	}
	if app := f.status(t, pod).Latest("app", ContainerTypeRegular); app == nil || app.State != StateRunning {
		t.Errorf("app container %+v, want running", app)
	}
}

func TestSyncPodFailures(t *testing.T) {
	tests := map[string]struct {
		container   v1.Container
		securityCtx *v1.SecurityContext
		setup       func(f *syncFixture)
		wantReason  string
		wantMessage string // substring
		wantCalls   map[string]int
		sandboxErr  bool
	}{
		"image missing with PullNever": {
			container:   v1.Container{Name: "a", Image: "busybox:1.36", ImagePullPolicy: v1.PullNever},
			wantReason:  ReasonErrImageNeverPull,
			wantMessage: `Container image "busybox:1.36" is not present with pull policy of Never`,
			wantCalls:   map[string]int{"CreateContainer": 0, "PullImage": 0},
		},
		"pull error": {
			container: image("a", "registry.example/app:v1"),
			setup: func(f *syncFixture) {
				f.is.InjectError("PullImage", errors.New("rpc error: code = NotFound desc = manifest unknown"))
			},
			wantReason:  ReasonErrImagePull,
			wantMessage: "manifest unknown",
			wantCalls:   map[string]int{"CreateContainer": 0, "PullImage": 1},
		},
		"image inspect error": {
			container: image("a", "busybox:1.36"),
			setup: func(f *syncFixture) {
				f.is.InjectError("ImageStatus", errors.New("runtime is confused"))
			},
			wantReason:  ReasonImageInspectError,
			wantMessage: "runtime is confused",
			wantCalls:   map[string]int{"CreateContainer": 0, "PullImage": 0},
		},
		"invalid image name": {
			container:  image("a", "busybox:"),
			wantReason: ReasonInvalidImageName,
			wantCalls:  map[string]int{"CreateContainer": 0, "PullImage": 0},
		},
		"no tag means Always: pulled although present": {
			container: image("a", "busybox"),
			setup:     func(f *syncFixture) { f.is.SetFakeImages([]string{"busybox"}) },
			wantCalls: map[string]int{"CreateContainer": 1, "StartContainer": 1, "PullImage": 1},
		},
		"runAsNonRoot with root user": {
			container: v1.Container{Name: "a", Image: "busybox:1.36",
				SecurityContext: &v1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](0)}},
			setup:       func(f *syncFixture) { f.is.SetFakeImages([]string{"busybox:1.36"}) },
			wantReason:  ReasonCreateConfigError,
			wantMessage: "container's runAsUser breaks non-root policy",
			wantCalls:   map[string]int{"CreateContainer": 0},
		},
		"runAsNonRoot without runAsUser, image names no user: refused as root": {
			container: v1.Container{Name: "a", Image: "busybox:1.36",
				SecurityContext: &v1.SecurityContext{RunAsNonRoot: ptr.To(true)}},
			setup:       func(f *syncFixture) { f.is.SetFakeImages([]string{"busybox:1.36"}) },
			wantReason:  ReasonCreateConfigError,
			wantMessage: "container has runAsNonRoot and image will run as root",
			wantCalls:   map[string]int{"CreateContainer": 0},
		},
		"create fails": {
			container: image("a", "busybox:1.36"),
			setup: func(f *syncFixture) {
				f.is.SetFakeImages([]string{"busybox:1.36"})
				f.rs.InjectError("CreateContainer", errors.New("no space left"))
			},
			wantReason:  ReasonCreateContainerErr,
			wantMessage: "no space left",
			wantCalls:   map[string]int{"CreateContainer": 1, "StartContainer": 0},
		},
		"start fails": {
			container: image("a", "busybox:1.36"),
			setup: func(f *syncFixture) {
				f.is.SetFakeImages([]string{"busybox:1.36"})
				f.rs.InjectError("StartContainer", errors.New("exec format error"))
			},
			wantReason:  ReasonRunContainerError,
			wantMessage: "exec format error",
			wantCalls:   map[string]int{"CreateContainer": 1, "StartContainer": 1},
		},
		"sandbox fails: nothing else is tried": {
			container: image("a", "busybox:1.36"),
			setup: func(f *syncFixture) {
				f.is.SetFakeImages([]string{"busybox:1.36"})
				f.rs.InjectError("RunPodSandbox", errors.New("cni plugin not initialized"))
			},
			sandboxErr: true,
			wantCalls:  map[string]int{"CreateContainer": 0, "PullImage": 0, "ImageStatus": 0},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newSyncFixture(t)
			if tc.setup != nil {
				tc.setup(f)
			}
			pod := syncPod(v1.RestartPolicyAlways, tc.container)
			res, _ := f.sync(t, pod)
			if tc.sandboxErr {
				if res.SandboxErr == nil || !strings.Contains(res.Error().Error(), "cni plugin not initialized") {
					t.Errorf("sandbox error %v, want the runtime's", res.SandboxErr)
				}
			} else if res.SandboxErr != nil {
				t.Fatalf("sandbox error: %v", res.SandboxErr)
			}
			w, ok := res.Waiting["a"]
			switch {
			case tc.wantReason == "" && ok:
				t.Errorf("waiting %+v, want none", w)
			case tc.wantReason != "" && w.Reason != tc.wantReason:
				t.Errorf("waiting reason %q (%q), want %q", w.Reason, w.Message, tc.wantReason)
			case !strings.Contains(w.Message, tc.wantMessage):
				t.Errorf("waiting message %q, want it to contain %q", w.Message, tc.wantMessage)
			}
			if tc.wantReason != "" && res.Error() == nil {
				t.Errorf("SyncResult.Error() is nil, want the step error")
			}
			for call, want := range tc.wantCalls {
				got := f.rs.count(call)
				if call == "PullImage" || call == "ImageStatus" {
					got = f.is.count(call)
				}
				if got != want {
					t.Errorf("%s called %d times, want %d", call, got, want)
				}
			}
		})
	}
}

func TestSyncPodImagePullBackOff(t *testing.T) {
	f := newSyncFixture(t)
	pod := syncPod(v1.RestartPolicyAlways, image("a", "registry.example/app:v1"))
	pullCalls := func() int { return f.is.count("PullImage") }

	f.is.InjectError("PullImage", errors.New("manifest unknown"))
	res, _ := f.sync(t, pod)
	if w := res.Waiting["a"]; w.Reason != ReasonErrImagePull {
		t.Fatalf("first sync: waiting %+v, want %s", w, ReasonErrImagePull)
	}

	// Within the 10s back-off the pull is not retried.
	f.clock.Step(5 * time.Second)
	res, _ = f.sync(t, pod)
	w := res.Waiting["a"]
	if w.Reason != ReasonImagePullBackOff {
		t.Fatalf("sync within back-off: waiting %+v, want %s", w, ReasonImagePullBackOff)
	}
	if want := `Back-off pulling image "registry.example/app:v1": ErrImagePull: manifest unknown`; w.Message != want {
		t.Errorf("back-off message %q, want %q", w.Message, want)
	}
	if n := pullCalls(); n != 1 {
		t.Errorf("PullImage called %d times within back-off, want 1", n)
	}
	if n := f.rs.count("CreateContainer"); n != 0 {
		t.Errorf("CreateContainer called %d times, want 0", n)
	}

	// Once it ran out, the pull is tried again and the container starts.
	f.clock.Step(6 * time.Second)
	res, _ = f.sync(t, pod)
	if res.Error() != nil || !reflect.DeepEqual(res.Started, []string{"a"}) {
		t.Fatalf("sync after back-off: started %v, err %v, waiting %v", res.Started, res.Error(), res.Waiting)
	}
	if n := pullCalls(); n != 2 {
		t.Errorf("PullImage called %d times, want 2", n)
	}
	// The successful pull is reported for the pod start SLI; a failed one
	// is not.
	if len(res.Pulls) != 1 || res.Pulls[0].End.Before(res.Pulls[0].Start) {
		t.Errorf("pulls %v, want the one that succeeded", res.Pulls)
	}
}

func TestSyncPodCrashLoopBackOff(t *testing.T) {
	f := newSyncFixture(t)
	f.is.SetFakeImages([]string{"busybox:1.36"})
	pod := syncPod(v1.RestartPolicyAlways, image("a", "busybox:1.36"))

	crash := func(exit int32) {
		t.Helper()
		c := f.status(t, pod).Latest("a", ContainerTypeRegular)
		if c == nil || c.State != StateRunning {
			t.Fatalf("container %+v, want running", c)
		}
		if err := f.rs.setContainer(c.ID, func(fc *fakeContainer) {
			fc.State = runtimeapi.ContainerState_CONTAINER_EXITED
			fc.ExitCode = exit
			fc.FinishedAt = f.clock.Now().UnixNano()
		}); err != nil {
			t.Fatal(err)
		}
	}

	if res, _ := f.sync(t, pod); res.Error() != nil {
		t.Fatalf("first sync: %v", res.Error())
	}
	// The first crash restarts at once: no back-off entry yet.
	crash(1)
	f.clock.Step(time.Second)
	res, _ := f.sync(t, pod)
	if !reflect.DeepEqual(res.Started, []string{"a"}) {
		t.Fatalf("after the first crash: started %v, waiting %v, want a restarted", res.Started, res.Waiting)
	}
	if len(res.Pulls) != 0 {
		t.Errorf("pulls %v for an image already present", res.Pulls)
	}
	if c := f.status(t, pod).Latest("a", ContainerTypeRegular); c.Attempt != 1 {
		t.Errorf("restarted container attempt %d, want 1", c.Attempt)
	}

	// The second crash is within 10s of the first restart: back off.
	crash(2)
	f.clock.Step(time.Second)
	creates := f.rs.count("CreateContainer")
	res, _ = f.sync(t, pod)
	w := res.Waiting["a"]
	if w.Reason != ReasonCrashLoopBackOff {
		t.Fatalf("after the second crash: waiting %+v, want %s", w, ReasonCrashLoopBackOff)
	}
	if want := "back-off 10s restarting failed container=a pod=web_prod(uid-1)"; w.Message != want {
		t.Errorf("message %q, want %q", w.Message, want)
	}
	if n := f.rs.count("CreateContainer"); n != creates {
		t.Errorf("CreateContainer called during back-off")
	}

	// 10s after it finished, it restarts, and the next back-off doubles.
	f.clock.Step(10 * time.Second)
	res, _ = f.sync(t, pod)
	if !reflect.DeepEqual(res.Started, []string{"a"}) {
		t.Fatalf("after back-off: started %v, waiting %v", res.Started, res.Waiting)
	}
	crash(3)
	f.clock.Step(time.Second)
	res, _ = f.sync(t, pod)
	if w := res.Waiting["a"]; !strings.HasPrefix(w.Message, "back-off 20s restarting failed container=a ") {
		t.Errorf("third crash: waiting %+v, want a 20s back-off", w)
	}
}

func TestSyncPodReplacesNotReadySandbox(t *testing.T) {
	f, rec := hookFixture(t)
	pod := syncPod(v1.RestartPolicyAlways, image("a", "busybox:1.36"))
	if res, _ := f.sync(t, pod); res.Error() != nil {
		t.Fatal(res.Error())
	}
	if rec.has("Normal SandboxChanged") {
		t.Errorf("SandboxChanged for a pod's first sandbox: %v", rec.events)
	}
	old := f.status(t, pod)
	if err := f.rs.StopPodSandbox(context.Background(), old.Sandboxes[0].ID); err != nil {
		t.Fatal(err)
	}

	res, plan := f.sync(t, pod)
	if !plan.KillPod || !plan.CreateSandbox || plan.Attempt != 1 {
		t.Fatalf("plan %s, want kill and a new sandbox attempt 1", plan)
	}
	if res.Error() != nil {
		t.Fatalf("SyncPod: %v", res.Error())
	}
	// The kubelet's event, recorded once (by the runtime layer only).
	n := 0
	for _, e := range rec.events {
		if e == "Normal SandboxChanged Pod sandbox changed, it will be killed and re-created." {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d SandboxChanged events, want 1: %v", n, rec.events)
	}
	if got := f.rs.stopTimeouts()[old.Containers[0].ID]; got != 30 {
		t.Errorf("old container stopped with %ds, want the pod's 30s", got)
	}
	st := f.status(t, pod)
	if len(st.Sandboxes) != 2 || !st.Sandboxes[0].Ready || st.Sandboxes[0].Attempt != 1 {
		t.Fatalf("sandboxes %+v, want the new ready attempt 1 first", st.Sandboxes)
	}
	if c := st.Latest("a", ContainerTypeRegular); c == nil || c.State != StateRunning || c.Attempt != 1 {
		t.Errorf("container %+v, want running attempt 1 in the new sandbox", c)
	}
}

func TestGetPodStatus(t *testing.T) {
	f := newSyncFixture(t)
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	sec := int64(time.Second)
	labels := func(uid, name, typ string) map[string]string {
		l := map[string]string{LabelPodUID: uid, LabelContainerName: name}
		if typ != "" {
			l[LabelContainerType] = typ
		}
		return l
	}
	sb := func(id, uid string, attempt uint32, created int64, state runtimeapi.PodSandboxState, ip string) *runtimeapi.PodSandboxStatus {
		s := &runtimeapi.PodSandboxStatus{
			Id: id, Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "prod", Uid: uid, Attempt: attempt},
			State: state, CreatedAt: created, Labels: map[string]string{LabelPodUID: uid},
		}
		if ip != "" {
			s.Network = &runtimeapi.PodSandboxNetworkStatus{Ip: ip, AdditionalIps: []*runtimeapi.PodIP{{Ip: "fd00::" + ip[len(ip)-1:]}}}
		}
		return s
	}
	ctr := func(id, uid, name, typ string, attempt uint32, created int64, state runtimeapi.ContainerState, restarts string) *fakeContainer {
		c := &fakeContainer{ContainerStatus: runtimeapi.ContainerStatus{
			Id: id, Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: attempt},
			State: state, CreatedAt: created, StartedAt: created + sec, Labels: labels(uid, name, typ),
			Image: &runtimeapi.ImageSpec{Image: "sha256:1", UserSpecifiedImage: "busybox:1.36"}, ImageRef: "sha256:1",
		}}
		if state == runtimeapi.ContainerState_CONTAINER_EXITED {
			c.FinishedAt, c.ExitCode = created+2*sec, 3
		}
		if restarts != "" {
			c.Annotations = map[string]string{AnnotationRestartCount: restarts}
		}
		return c
	}
	ready, notReady := runtimeapi.PodSandboxState_SANDBOX_READY, runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	run, exit := runtimeapi.ContainerState_CONTAINER_RUNNING, runtimeapi.ContainerState_CONTAINER_EXITED
	for _, s := range []*runtimeapi.PodSandboxStatus{
		sb("sb0", "uid-1", 0, base, notReady, "10.0.0.1"),
		sb("sb2", "uid-1", 2, base+20*sec, notReady, ""),
		sb("sb1", "uid-1", 1, base+10*sec, ready, "10.0.0.2"),
		sb("other", "uid-2", 0, base+30*sec, ready, "10.0.0.3"),
	} {
		f.rs.addSandbox(s)
	}
	for _, c := range []*fakeContainer{
		ctr("a0", "uid-1", "a", "container", 0, base+1*sec, exit, ""),
		ctr("a2", "uid-1", "a", "container", 2, base+12*sec, run, ""),
		ctr("a1", "uid-1", "a", "container", 1, base+11*sec, exit, ""),
		ctr("i0", "uid-1", "i", "init", 0, base, exit, ""),
		ctr("legacy", "uid-1", "b", "", 0, base+5*sec, run, "4"), // no type label, restart count annotation
		ctr("x0", "uid-2", "a", "container", 0, base+40*sec, run, ""),
	} {
		f.rs.addContainer(c)
	}

	st, err := f.rt.GetPodStatus(context.Background(), PodRef{UID: "uid-1", Name: "web", Namespace: "prod"})
	if err != nil {
		t.Fatalf("GetPodStatus: %v", err)
	}
	var sbIDs, cIDs []string
	for _, s := range st.Sandboxes {
		sbIDs = append(sbIDs, s.ID)
	}
	for _, c := range st.Containers {
		cIDs = append(cIDs, c.ID)
	}
	if want := []string{"sb2", "sb1", "sb0"}; !reflect.DeepEqual(sbIDs, want) {
		t.Errorf("sandboxes %v, want newest first %v", sbIDs, want)
	}
	if want := []string{"a2", "a1", "legacy", "a0", "i0"}; !reflect.DeepEqual(cIDs, want) {
		t.Errorf("containers %v, want newest first %v", cIDs, want)
	}
	if got, want := st.IPs(), []string{"10.0.0.2", "fd00::2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("IPs %v, want those of the newest ready sandbox %v", got, want)
	}

	tests := map[string]struct {
		get  func() *ContainerStatus
		want string // container ID, "" for nil
	}{
		"latest a":              {func() *ContainerStatus { return st.Latest("a", ContainerTypeRegular) }, "a2"},
		"previous a":            {func() *ContainerStatus { return st.Previous("a", ContainerTypeRegular) }, "a1"},
		"latest init i":         {func() *ContainerStatus { return st.Latest("i", ContainerTypeInit) }, "i0"},
		"no previous init i":    {func() *ContainerStatus { return st.Previous("i", ContainerTypeInit) }, ""},
		"i is no regular":       {func() *ContainerStatus { return st.Latest("i", ContainerTypeRegular) }, ""},
		"untyped is regular":    {func() *ContainerStatus { return st.Latest("b", ContainerTypeRegular) }, "legacy"},
		"unknown name":          {func() *ContainerStatus { return st.Latest("zzz", ContainerTypeRegular) }, ""},
		"other pod not visible": {func() *ContainerStatus { return st.Previous("a", ContainerTypeRegular).self("x0") }, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := tc.get()
			id := ""
			if got != nil {
				id = got.ID
			}
			if id != tc.want {
				t.Errorf("got %q, want %q", id, tc.want)
			}
		})
	}

	t.Run("fields", func(t *testing.T) {
		a1 := st.Previous("a", ContainerTypeRegular)
		if a1.State != StateExited || a1.ExitCode != 3 || a1.FinishedAt.UnixNano() != base+13*sec || a1.StartedAt.UnixNano() != base+12*sec {
			t.Errorf("exited container %+v", a1)
		}
		if a1.Image != "busybox:1.36" || a1.ImageRef != "sha256:1" {
			t.Errorf("image %q ref %q, want the user's image and the ID", a1.Image, a1.ImageRef)
		}
		a2 := st.Latest("a", ContainerTypeRegular)
		if !a2.FinishedAt.IsZero() {
			t.Errorf("running container has FinishedAt %v", a2.FinishedAt)
		}
		if b := st.Latest("b", ContainerTypeRegular); b.Attempt != 4 {
			t.Errorf("attempt %d, want 4 from the restart count annotation", b.Attempt)
		}
		if !st.Running() {
			t.Errorf("Running() = false with running containers")
		}
	})
}

// self returns c when it has the given ID, else nil; it lets a table case
// ask whether another pod's container leaked into this pod's status.
func (c *ContainerStatus) self(id string) *ContainerStatus {
	if c != nil && c.ID == id {
		return c
	}
	return nil
}

func TestKillPod(t *testing.T) {
	notFound := grpcstatus.Error(codes.NotFound, "gone")
	tests := map[string]struct {
		inject      map[string]error
		wantErr     bool
		wantStopped []string // containers given StopContainer
		wantSandbox int      // StopPodSandbox calls
	}{
		"running and created containers stopped, then the sandbox": {
			wantStopped: []string{"run", "created"}, wantSandbox: 1,
		},
		"NotFound is success": {
			inject:      map[string]error{"StopContainer": notFound},
			wantStopped: []string{"run", "created"}, wantSandbox: 1,
		},
		"a container that does not stop keeps the sandbox": {
			inject:      map[string]error{"StopContainer": errors.New("deadline exceeded")},
			wantErr:     true,
			wantStopped: []string{"run", "created"}, wantSandbox: 0,
		},
		"a sandbox that does not stop is an error": {
			inject:      map[string]error{"StopPodSandbox": errors.New("network teardown failed")},
			wantErr:     true,
			wantStopped: []string{"run", "created"}, wantSandbox: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newSyncFixture(t)
			for call, err := range tc.inject {
				f.rs.InjectError(call, err)
			}
			f.rs.addSandbox(&runtimeapi.PodSandboxStatus{Id: "sb", State: runtimeapi.PodSandboxState_SANDBOX_READY})
			for _, c := range []struct {
				id    string
				state runtimeapi.ContainerState
			}{{"run", runtimeapi.ContainerState_CONTAINER_RUNNING}, {"created", runtimeapi.ContainerState_CONTAINER_CREATED}, {"done", runtimeapi.ContainerState_CONTAINER_EXITED}} {
				f.rs.addContainer(&fakeContainer{ContainerStatus: runtimeapi.ContainerStatus{Id: c.id, State: c.state}})
			}
			st := &PodStatus{
				Ref:       PodRef{UID: "uid-1", Name: "web", Namespace: "prod"},
				Sandboxes: []SandboxStatus{{ID: "sb", Ready: true}},
				Containers: []ContainerStatus{
					{ID: "run", Name: "a", State: StateRunning},
					{ID: "created", Name: "b", State: StateCreated},
					{ID: "done", Name: "c", State: StateExited},
				},
			}
			err := f.rt.KillPod(context.Background(), nil, st, 17)
			if (err != nil) != tc.wantErr {
				t.Fatalf("KillPod error %v, want error %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "prod/web (uid-1)") {
				t.Errorf("error %q does not name the pod", err)
			}
			stops := f.rs.stopTimeouts()
			if len(stops) != len(tc.wantStopped) {
				t.Errorf("stopped %v, want %v", stops, tc.wantStopped)
			}
			for _, id := range tc.wantStopped {
				if g, ok := stops[id]; !ok || g != 17 {
					t.Errorf("container %s stopped=%v with grace %d, want 17", id, ok, g)
				}
			}
			if n := f.rs.count("StopPodSandbox"); n != tc.wantSandbox {
				t.Errorf("StopPodSandbox called %d times, want %d", n, tc.wantSandbox)
			}
			if n := f.rs.count("RemoveContainer") + f.rs.count("RemovePodSandbox"); n != 0 {
				t.Errorf("KillPod removed %d objects, want none (logs stay until RemovePod)", n)
			}
		})
	}
}

func TestRemovePod(t *testing.T) {
	tests := map[string]struct {
		inject         map[string]error
		wantErr        bool
		wantLogDir     bool // log directory still there
		leftContainers int
	}{
		"everything removed with the log directory": {},
		"NotFound is success": {
			// The fake keeps the object; a real runtime has it gone already.
			inject:         map[string]error{"RemoveContainer": grpcstatus.Error(codes.NotFound, "gone")},
			leftContainers: 1,
		},
		"a failure keeps the log directory": {
			inject:  map[string]error{"RemovePodSandbox": errors.New("busy")},
			wantErr: true, wantLogDir: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newSyncFixture(t)
			f.is.SetFakeImages([]string{"busybox:1.36"})
			pod := syncPod(v1.RestartPolicyAlways, image("a", "busybox:1.36"), image("b", "busybox:1.36"))
			if res, _ := f.sync(t, pod); res.Error() != nil {
				t.Fatal(res.Error())
			}
			st := f.status(t, pod)
			if err := f.rt.KillPod(context.Background(), nil, st, 2); err != nil {
				t.Fatal(err)
			}
			for call, err := range tc.inject {
				f.rs.InjectError(call, err)
			}
			err := f.rt.RemovePod(context.Background(), f.status(t, pod))
			if (err != nil) != tc.wantErr {
				t.Fatalf("RemovePod error %v, want error %v", err, tc.wantErr)
			}
			after := f.status(t, pod)
			if !tc.wantErr && (len(after.Containers) != tc.leftContainers || len(after.Sandboxes) != 0) {
				t.Errorf("left %d containers and %d sandboxes", len(after.Containers), len(after.Sandboxes))
			}
			_, statErr := os.Stat(f.rt.PodLogDir(RefOf(pod)))
			if exists := statErr == nil; exists != tc.wantLogDir {
				t.Errorf("log directory exists=%v, want %v", exists, tc.wantLogDir)
			}
		})
	}
}

func TestBackOffsForget(t *testing.T) {
	f := newSyncFixture(t)
	now := f.clock.Now()
	pod := testutil.Pod(v1.RestartPolicyAlways, nil, "a")
	other := testutil.Pod(v1.RestartPolicyAlways, nil, "a")
	other.UID = "uid-2"
	key, otherKey := BackOffKey(pod, "a"), BackOffKey(other, "a")
	f.b.Restart.Next(key, now)
	f.b.pullFailed(key, now, "ErrImagePull: x")
	f.b.Restart.Next(otherKey, now)
	f.b.Forget(pod)
	if f.b.Restart.Get(key) != 0 {
		t.Errorf("restart back-off of the forgotten pod kept")
	}
	if _, ok := f.b.View(now).Pull(key); ok {
		t.Errorf("pull back-off of the forgotten pod kept")
	}
	if f.b.Restart.Get(otherKey) == 0 {
		t.Errorf("restart back-off of another pod forgotten")
	}
}

// TestBackOffKeyHoldsTheSpec: a container's back-off key holds its spec's
// image and resources (the kubelet's GetBackoffKey): the same spec the
// same key, another image or a resize another key, so that either starts
// with no back-off.
func TestBackOffKeyHoldsTheSpec(t *testing.T) {
	pod := testutil.Pod(v1.RestartPolicyAlways, []string{"i"}, "a")
	same := testutil.Pod(v1.RestartPolicyAlways, []string{"i"}, "a")
	if BackOffKey(pod, "a") != BackOffKey(same, "a") {
		t.Errorf("the same spec: keys %q and %q", BackOffKey(pod, "a"), BackOffKey(same, "a"))
	}
	updated := pod.DeepCopy()
	updated.Spec.Containers[0].Image = "busybox:2"
	if BackOffKey(pod, "a") == BackOffKey(updated, "a") {
		t.Errorf("an image update kept the key %q", BackOffKey(pod, "a"))
	}
	resized := pod.DeepCopy()
	resized.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
	if BackOffKey(pod, "a") == BackOffKey(resized, "a") {
		t.Errorf("a resize kept the key %q", BackOffKey(pod, "a"))
	}
	if BackOffKey(pod, "i") == BackOffKey(pod, "a") {
		t.Errorf("two containers share the key %q", BackOffKey(pod, "a"))
	}
}

// TestSyncPodKeepsOneDeadInstance checks the container GC: however often a
// container restarts, only the running instance and the newest dead one
// (for logs --previous) remain, and the removed instances' logs go too.
func TestSyncPodKeepsOneDeadInstance(t *testing.T) {
	f := newSyncFixture(t)
	f.is.SetFakeImages([]string{"busybox:1.36"})
	pod := syncPod(v1.RestartPolicyAlways, image("a", "busybox:1.36"))
	if res, _ := f.sync(t, pod); res.Error() != nil {
		t.Fatal(res.Error())
	}
	logs := map[string]string{} // container ID -> its log file
	for restart := 1; restart <= 4; restart++ {
		c := f.status(t, pod).Latest("a", ContainerTypeRegular)
		log := filepath.Join(f.dir, c.ID+".log")
		if err := os.WriteFile(log, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		logs[c.ID] = log
		if err := f.rs.setContainer(c.ID, func(fc *fakeContainer) {
			fc.State = runtimeapi.ContainerState_CONTAINER_EXITED
			fc.ExitCode = 1
			fc.FinishedAt = f.clock.Now().UnixNano()
			fc.LogPath = log
		}); err != nil {
			t.Fatal(err)
		}
		f.clock.Step(10 * time.Minute) // past any back-off
		if res, _ := f.sync(t, pod); res.Error() != nil || len(res.Started) != 1 {
			t.Fatalf("restart %d: started %v, error %v", restart, res.Started, res.Error())
		}
		st := f.status(t, pod)
		if n := len(st.Containers); n > 2 {
			t.Fatalf("after restart %d: %d instances, want at most 2", restart, n)
		}
		if p := st.Previous("a", ContainerTypeRegular); p == nil || p.ID != c.ID {
			t.Errorf("after restart %d: previous %+v, want the instance that just exited (%s)", restart, p, c.ID)
		}
	}
	kept := 0
	for id, log := range logs {
		if _, err := os.Stat(log); err == nil {
			kept++
			if st := f.status(t, pod); st.Previous("a", ContainerTypeRegular).ID != id {
				t.Errorf("log of removed instance %s kept", id)
			}
		}
	}
	if kept != 1 {
		t.Errorf("%d dead instances' logs kept, want 1", kept)
	}
}

// TestRemoveInterrupted: a container created but never started by a
// previous agent (killed between CreateContainer and StartContainer) is
// removed before planning, so that the same attempt is created again and
// started: no second instance, no restart counted. One this agent created
// is left to the plan (the kubelet's replacement).
func TestRemoveInterrupted(t *testing.T) {
	f := newSyncFixture(t)
	f.is.SetFakeImages([]string{"busybox:1.36"})
	pod := syncPod(v1.RestartPolicyAlways, image("a", "busybox:1.36"))
	f.rs.InjectError("StartContainer", errors.New("agent killed here"))
	f.sync(t, pod)
	st := f.status(t, pod)
	if c := st.Latest("a", ContainerTypeRegular); c == nil || c.State != StateCreated {
		t.Fatalf("container %+v, want one created and not started", c)
	}
	// This agent's own created container is not touched.
	mine, err := New(Config{PodLogDir: f.dir, Clock: f.clock}, f.rs, f.is)
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Step(time.Second)
	// "After the restart": a Runtime made later than the container.
	if removed, err := mine.RemoveInterrupted(context.Background(), st); err != nil || removed {
		t.Fatalf("RemoveInterrupted by an agent older than the container: %v, %v; want nothing removed", removed, err)
	}
	later, err := New(Config{PodLogDir: f.dir, Clock: f.clock}, f.rs, f.is)
	if err != nil {
		t.Fatal(err)
	}
	if removed, err := later.RemoveInterrupted(context.Background(), st); err != nil || !removed {
		t.Fatalf("RemoveInterrupted: %v, %v; want the interrupted container removed", removed, err)
	}
	f.rt = later
	res, plan := f.sync(t, pod)
	if res.Error() != nil || len(plan.ContainersToKill) != 0 {
		t.Fatalf("sync after removal: plan %s, error %v", plan, res.Error())
	}
	st = f.status(t, pod)
	if len(st.Containers) != 1 || st.Containers[0].State != StateRunning || st.Containers[0].Attempt != 0 {
		t.Errorf("containers %+v, want one running attempt 0", st.Containers)
	}
}

// TestRemoveInterruptedStartError: killing the agent during StartContainer
// makes containerd fail the start (exited, reason StartError, exit code
// 128, never started): such a container of a previous agent is removed
// too; a container that ran and exited is not.
func TestRemoveInterruptedStartError(t *testing.T) {
	f := newSyncFixture(t)
	f.is.SetFakeImages([]string{"busybox:1.36"})
	pod := syncPod(v1.RestartPolicyAlways, image("a", "busybox:1.36"), image("b", "busybox:1.36"))
	f.sync(t, pod)
	st := f.status(t, pod)
	f.rs.mu.Lock()
	for _, c := range f.rs.containers {
		c.State = runtimeapi.ContainerState_CONTAINER_EXITED
		c.FinishedAt = c.CreatedAt + 1
		c.ExitCode = 128
		if c.Metadata.Name == "a" {
			c.StartedAt, c.Reason, c.Message = 0, "StartError", "failed to start containerd task: context canceled"
		} else {
			c.Reason = "Error" // ran and exited: a real restart
		}
	}
	f.rs.mu.Unlock()
	f.clock.Step(time.Second)
	later, err := New(Config{PodLogDir: f.dir, Clock: f.clock}, f.rs, f.is)
	if err != nil {
		t.Fatal(err)
	}
	st = f.status(t, pod)
	if removed, err := later.RemoveInterrupted(context.Background(), st); err != nil || !removed {
		t.Fatalf("RemoveInterrupted: %v, %v", removed, err)
	}
	st = f.status(t, pod)
	if st.Latest("a", ContainerTypeRegular) != nil {
		t.Errorf("the never-started container a is still there: %+v", st.Containers)
	}
	if c := st.Latest("b", ContainerTypeRegular); c == nil || c.State != StateExited {
		t.Errorf("container b that ran and exited: %+v, want it kept", c)
	}
}

// TestRemoveContainerDeletesALostTask: containerd refuses to remove a
// container whose task its CRI plugin lost track of (FailedPrecondition,
// "cannot delete running task"): the task is killed and deleted through
// Config.DeleteTask and the container removed; without DeleteTask the
// error is returned, never taken for success.
func TestRemoveContainerDeletesALostTask(t *testing.T) {
	for _, withReaper := range []bool{true, false} {
		f := newSyncFixture(t)
		var reaped []string
		if withReaper {
			f.rt.cfg.DeleteTask = func(_ context.Context, id string) error { reaped = append(reaped, id); return nil }
		}
		f.is.SetFakeImages([]string{"busybox:1.36"})
		pod := syncPod(v1.RestartPolicyAlways, image("a", "busybox:1.36"))
		f.sync(t, pod)
		st := f.status(t, pod)
		if err := f.rt.KillPod(context.Background(), pod, st, 1); err != nil {
			t.Fatal(err)
		}
		st = f.status(t, pod)
		f.rs.InjectError("RemoveContainer", grpcstatus.Error(codes.FailedPrecondition, "failed to delete containerd container: cannot delete running task x: failed precondition"))
		err := f.rt.RemovePod(context.Background(), st)
		if withReaper {
			if err != nil || len(reaped) != 1 || reaped[0] != st.Containers[0].ID {
				t.Errorf("with DeleteTask: RemovePod %v, tasks deleted %v; want the container's task deleted and the pod removed", err, reaped)
			}
			if left := f.status(t, pod); len(left.Containers) != 0 {
				t.Errorf("containers left: %+v", left.Containers)
			}
		} else if grpcstatus.Code(err) != codes.FailedPrecondition {
			t.Errorf("without DeleteTask: RemovePod %v, want the FailedPrecondition error", err)
		}
	}
}

// After a reboot, or a purge of the runtime's containers, the runtime knows
// no earlier attempt of a container but its logs are still there: the new
// attempt goes on from them (the kubelet's calcRestartCountByLogDir), so
// that the restart count does not fall back to 0 and 0.log is not written
// again.
func TestSyncPodAttemptGoesOnFromTheLogDirectory(t *testing.T) {
	f := newSyncFixture(t)
	f.is.SetFakeImages([]string{"busybox:1.36"})
	pod := syncPod(v1.RestartPolicyAlways, image("a", "busybox:1.36"), image("b", "busybox:1.36"))
	logs := filepath.Join(f.dir, "prod_web_uid-1", "a")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"0.log", "1.log", "2.log.20250601-110000.gz"} {
		if err := os.WriteFile(filepath.Join(logs, name), []byte("earlier\n"), 0o640); err != nil {
			t.Fatal(err)
		}
	}

	res, _ := f.sync(t, pod)
	if err := res.Error(); err != nil {
		t.Fatalf("SyncPod: %v", err)
	}
	st := f.status(t, pod)
	for name, want := range map[string]uint32{"a": 3, "b": 0} {
		c := st.Latest(name, ContainerTypeRegular)
		if c == nil || c.Attempt != want {
			t.Fatalf("container %s = %+v, want attempt %d", name, c, want)
		}
		if wantLog := fmt.Sprintf("%s/%d.log", name, want); c.LogPath != wantLog {
			t.Errorf("container %s log path %q, want %s", name, c.LogPath, wantLog)
		}
	}
	if b, err := os.ReadFile(filepath.Join(logs, "0.log")); err != nil || string(b) != "earlier\n" {
		t.Errorf("0.log of the earlier attempt = %q, %v; want it kept", b, err)
	}
	// Once the runtime knows an attempt, it counts from the runtime again.
	if err := os.WriteFile(filepath.Join(logs, "9.log"), nil, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := f.rs.setContainer(st.Latest("a", ContainerTypeRegular).ID, func(c *fakeContainer) {
		c.State = runtimeapi.ContainerState_CONTAINER_EXITED
		c.ExitCode = 1
		c.FinishedAt = f.clock.Now().UnixNano()
	}); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(time.Minute)
	if res, _ := f.sync(t, pod); res.Error() != nil {
		t.Fatalf("SyncPod after the exit: %v", res.Error())
	}
	if c := f.status(t, pod).Latest("a", ContainerTypeRegular); c == nil || c.Attempt != 4 {
		t.Errorf("container a after a restart = %+v, want attempt 4 (the runtime's 3 + 1)", c)
	}
}
