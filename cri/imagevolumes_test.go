package cri

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// objectRecorder keeps events as "<object> type reason message", the
// object being "pod" for the pod itself and the field path for a
// container's reference: the kubelet records an image volume's pull
// events on the pod, a container's image on the container.
type objectRecorder struct {
	mu     sync.Mutex
	events []string
}

func (r *objectRecorder) Eventf(obj runtime.Object, typ, reason, format string, args ...interface{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	who := "pod"
	if ref, ok := obj.(*v1.ObjectReference); ok && ref.FieldPath != "" {
		who = ref.FieldPath
	}
	r.events = append(r.events, who+" "+typ+" "+reason+" "+fmt.Sprintf(format, args...))
}

func (r *objectRecorder) has(event string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.events, event)
}

// imageVolumeHelper is the engine's RuntimeHelper as far as image volumes
// go: it records the image volumes each container was given and mounts
// them as the volume manager does (lifecycle/volume's Mounts, tested in
// TestImageVolumes).
type imageVolumeHelper struct {
	secrets []v1.Secret

	mu  sync.Mutex
	got map[string]ImageVolumes // by container
}

func (h *imageVolumeHelper) GenerateRunContainerOptions(_ context.Context, pod *v1.Pod, c *v1.Container, _ []string, vols ImageVolumes) (*RunContainerOptions, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.got == nil {
		h.got = map[string]ImageVolumes{}
	}
	h.got[c.Name] = vols
	opts := &RunContainerOptions{}
	for _, vm := range c.VolumeMounts {
		if imageVolume(pod, vm.Name) == nil {
			continue
		}
		spec, ok := vols[vm.Name]
		if !ok {
			return nil, fmt.Errorf("the image of image volume %q is not on the node", vm.Name)
		}
		opts.Mounts = append(opts.Mounts, &runtimeapi.Mount{ContainerPath: vm.MountPath, Image: spec,
			ImageSubPath: vm.SubPath, Readonly: true})
	}
	return opts, nil
}

func (h *imageVolumeHelper) PullSecrets(context.Context, *v1.Pod) []v1.Secret { return h.secrets }

func (h *imageVolumeHelper) given(name string) (ImageVolumes, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.got[name]
	return v, ok
}

// imageVolumePod is a pod whose container "app" mounts the image volume
// "tools" of image ref at /vol (and its bin directory at /bin-tools),
// beside a container "plain" that mounts nothing.
func imageVolumePod(ref string, policy v1.PullPolicy) *v1.Pod {
	app := image("app", "busybox:1.36")
	app.VolumeMounts = []v1.VolumeMount{{Name: "tools", MountPath: "/vol"}, {Name: "tools", MountPath: "/bin-tools", SubPath: "bin"}}
	pod := syncPod(v1.RestartPolicyAlways, app, image("plain", "busybox:1.36"))
	pod.Spec.Volumes = []v1.Volume{{Name: "tools", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: ref, PullPolicy: policy}}}}
	return pod
}

// imageVolumeFixture is a sync fixture with events and imageVolumeHelper.
func imageVolumeFixture(t *testing.T, cfg Config) (*syncFixture, *objectRecorder, *imageVolumeHelper) {
	t.Helper()
	f := newSyncFixture(t)
	rec := &objectRecorder{}
	cfg.PodLogDir, cfg.Recorder = f.dir, rec
	rt, err := New(cfg, f.rs, f.is)
	if err != nil {
		t.Fatal(err)
	}
	h := &imageVolumeHelper{}
	rt.SetRuntimeHelper(h)
	f.rt = rt
	f.is.SetFakeImages([]string{"busybox:1.36"})
	return f, rec, h
}

// createdMounts are the image mounts container name was created with.
func (f *syncFixture) createdMounts(name string) []*runtimeapi.Mount {
	f.rs.mu.Lock()
	defer f.rs.mu.Unlock()
	var out []*runtimeapi.Mount
	for _, cfg := range f.rs.created {
		if cfg.GetMetadata().GetName() != name {
			continue
		}
		for _, m := range cfg.GetMounts() {
			if m.GetImage() != nil {
				out = append(out, m)
			}
		}
	}
	return out
}

// TestSyncPodImageVolume: the image of an image volume is made available
// before any container starts, with the volume's pull policy and the
// pull events on the pod; the container that mounts it is created with
// the CRI image mount (the image as the runtime knows it, the subPath as
// ImageSubPath, read-only, no host path); the runtime's status of it
// keeps the image in use for the image GC (the kubelet's
// handleImageVolumes). A sync that starts nothing pulls nothing.
func TestSyncPodImageVolume(t *testing.T) {
	f, rec, h := imageVolumeFixture(t, Config{})
	pod := imageVolumePod("registry.example/tools:1", v1.PullIfNotPresent)

	res, plan := f.sync(t, pod)
	if err := res.Error(); err != nil {
		t.Fatalf("SyncPod: %v", err)
	}
	if !reflect.DeepEqual(plan.ImageVolumes, []string{"tools"}) {
		t.Errorf("plan's image volumes %v, want [tools]", plan.ImageVolumes)
	}
	if want := []string{"app", "plain"}; !reflect.DeepEqual(res.Started, want) {
		t.Fatalf("started %v, want %v", res.Started, want)
	}
	if !rec.has(`pod Normal Pulling Pulling image "registry.example/tools:1"`) {
		t.Errorf("events %q: want Pulling on the pod", rec.events)
	}
	if len(res.Pulls) != 1 {
		t.Errorf("pulls %v, want the image volume's", res.Pulls)
	}
	spec := &runtimeapi.ImageSpec{Image: "sha256:registry.example/tools:1", UserSpecifiedImage: "registry.example/tools:1"}
	if got, _ := h.given("app"); len(got) != 1 || got["tools"].String() != spec.String() {
		t.Errorf("app's image volumes %v, want tools: %v", got, spec)
	}
	if got, ok := h.given("plain"); !ok || len(got) != 0 {
		t.Errorf("plain's image volumes %v (given %v), want none", got, ok)
	}
	want := []*runtimeapi.Mount{
		{ContainerPath: "/vol", Image: spec, Readonly: true},
		{ContainerPath: "/bin-tools", Image: spec, ImageSubPath: "bin", Readonly: true},
	}
	got := f.createdMounts("app")
	if len(got) != len(want) {
		t.Fatalf("app created with image mounts %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i].String() {
			t.Errorf("mount %d: %v, want %v", i, got[i], want[i])
		}
	}

	refs, err := f.rt.ContainerImages(context.Background())
	if err != nil {
		t.Fatalf("ContainerImages: %v", err)
	}
	if !slices.Contains(refs, spec.Image) {
		t.Errorf("images in use %v: the image volume's %s is missing (the image GC would remove it)", refs, spec.Image)
	}

	// Every container runs: the next sync starts nothing and makes no
	// image available again (kubernetes#138655: no Pulled event per sync).
	pulls, events := f.is.count("PullImage")+f.is.count("ImageStatus"), len(rec.events)
	if _, plan := f.sync(t, pod); len(plan.ImageVolumes) != 0 {
		t.Errorf("plan of a running pod %s: image volumes %v, want none", plan, plan.ImageVolumes)
	}
	if n := f.is.count("PullImage") + f.is.count("ImageStatus"); n != pulls || len(rec.events) != events {
		t.Errorf("a sync that starts nothing asked the image service %d times and recorded %q", n-pulls, rec.events[events:])
	}
}

// TestSyncPodImageVolumeNeverMissing: pullPolicy Never and an image the
// node does not have: the container that mounts it waits in
// ErrImageNeverPull with the kubelet's message and is not created, the
// pod gets the ErrImageNeverPull event; no pull; the other container runs.
func TestSyncPodImageVolumeNeverMissing(t *testing.T) {
	f, rec, _ := imageVolumeFixture(t, Config{})
	pod := imageVolumePod("registry.example/none:1", v1.PullNever)

	res, _ := f.sync(t, pod)
	msg := `Container image "registry.example/none:1" is not present with pull policy of Never`
	if w := res.Waiting["app"]; w.Reason != ReasonErrImageNeverPull || w.Message != msg {
		t.Errorf("app waiting %+v, want %s %q", w, ReasonErrImageNeverPull, msg)
	}
	if !rec.has("pod Warning ErrImageNeverPull " + msg) {
		t.Errorf("events %q: want ErrImageNeverPull on the pod", rec.events)
	}
	if n := f.is.count("PullImage"); n != 0 {
		t.Errorf("%d pulls under Never", n)
	}
	if got := f.createdMounts("app"); len(got) != 0 || slices.Contains(res.Started, "app") {
		t.Errorf("app created (%v) or started (%v) without its image volume", got, res.Started)
	}
	if !reflect.DeepEqual(res.Started, []string{"plain"}) {
		t.Errorf("started %v, want the container that does not mount the volume", res.Started)
	}
}

// TestSyncPodImageVolumePullBackOff: a failed pull of an image volume
// leaves the container that mounts it in ErrImagePull with the pull's
// message (Pulling and Failed events on the pod), then, within the
// back-off, in ImagePullBackOff "Back-off pulling image ...: ErrImagePull:
// ..." without a pull; once the back-off ran out the pull is tried again
// and the container starts.
func TestSyncPodImageVolumePullBackOff(t *testing.T) {
	f, rec, _ := imageVolumeFixture(t, Config{})
	const img = "registry.example/tools:1"
	pod := imageVolumePod(img, v1.PullIfNotPresent)

	f.is.InjectError("PullImage", errors.New("manifest unknown"))
	res, _ := f.sync(t, pod)
	if w := res.Waiting["app"]; w.Reason != ReasonErrImagePull || w.Message != "manifest unknown" {
		t.Fatalf("first sync: app waiting %+v, want %s %q", w, ReasonErrImagePull, "manifest unknown")
	}
	for _, e := range []string{`pod Normal Pulling Pulling image "` + img + `"`, `pod Warning Failed Failed to pull image "` + img + `": manifest unknown`} {
		if !rec.has(e) {
			t.Errorf("events %q: want %q", rec.events, e)
		}
	}
	if !reflect.DeepEqual(res.Started, []string{"plain"}) {
		t.Errorf("started %v, want plain only", res.Started)
	}

	f.clock.Step(5 * time.Second)
	res, plan := f.sync(t, pod)
	want := Waiting{Reason: ReasonImagePullBackOff, Message: `Back-off pulling image "` + img + `": ErrImagePull: manifest unknown`}
	if plan.Waiting["app"] != want || res.Waiting["app"] != want {
		t.Errorf("within the back-off: plan holds %+v, sync reports %+v; want %+v", plan.Waiting["app"], res.Waiting["app"], want)
	}
	if len(plan.ImageVolumes) != 0 || f.is.count("PullImage") != 1 {
		t.Errorf("within the back-off: plan's image volumes %v, %d pulls; want none and 1", plan.ImageVolumes, f.is.count("PullImage"))
	}

	f.clock.Step(6 * time.Second)
	res, _ = f.sync(t, pod)
	if res.Error() != nil || !reflect.DeepEqual(res.Started, []string{"app"}) {
		t.Fatalf("after the back-off: started %v, err %v, waiting %v", res.Started, res.Error(), res.Waiting)
	}
	if len(f.createdMounts("app")) != 2 {
		t.Errorf("app created with image mounts %v, want its two", f.createdMounts("app"))
	}
}

// TestSyncPodImageVolumePrivateImage: KubeletEnsureSecretPulledImages holds
// for image volumes (the kubelet's getImageVolumes goes through
// EnsureImageExists). A private image pulled by pod A with its pull secret
// is on the node; pod B, without the secret, is not given it: under
// IfNotPresent it pulls anonymously, the registry refuses, and its
// container waits in ErrImagePull, never created; under Never it waits in
// ErrImageNeverPull as if the image were absent. Pod C, with A's secret,
// mounts it without a pull.
func TestSyncPodImageVolumePrivateImage(t *testing.T) {
	const private = "registry.example.com/team/tools:1"
	f, _, h := imageVolumeFixture(t, Config{PulledImages: PulledImagesConfig{Dir: filepath.Join(t.TempDir(), "image_manager")}})
	f.is.private = map[string]string{private: "alice"}
	secret := dockerJSONSecret("regcred", map[string]string{"registry.example.com": "alice"})
	secret.Namespace, secret.Name, secret.UID = "prod", "regcred", "secret-uid"
	podOf := func(name string, policy v1.PullPolicy) *v1.Pod {
		pod := imageVolumePod(private, policy)
		pod.Name, pod.UID = name, types.UID("uid-"+name)
		return pod
	}

	h.secrets = []v1.Secret{secret}
	a := podOf("a", v1.PullIfNotPresent)
	if res, _ := f.sync(t, a); res.Error() != nil || !slices.Contains(res.Started, "app") {
		t.Fatalf("pod A with the secret: started %v, %v", res.Started, res.Error())
	}

	h.secrets = nil
	for _, tc := range []struct {
		policy     v1.PullPolicy
		wantReason string
		wantPull   bool
	}{
		{policy: v1.PullIfNotPresent, wantReason: ReasonErrImagePull, wantPull: true},
		{policy: v1.PullNever, wantReason: ReasonErrImageNeverPull},
	} {
		t.Run("without the secret, "+string(tc.policy), func(t *testing.T) {
			b := podOf("b-"+string(tc.policy), tc.policy)
			pulls := f.is.count("PullImage")
			res, _ := f.sync(t, b)
			if w := res.Waiting["app"]; w.Reason != tc.wantReason {
				t.Errorf("app waiting %+v, want %s", w, tc.wantReason)
			}
			if slices.Contains(res.Started, "app") {
				t.Error("app started with a private image volume its pod has no credentials for")
			}
			if pulled := f.is.count("PullImage") - pulls; tc.wantPull != (pulled == 1) || (tc.wantPull && f.is.auths[len(f.is.auths)-1] != "") {
				t.Errorf("%d pulls, last with %q; want an anonymous pull: %v", pulled, f.is.auths[len(f.is.auths)-1], tc.wantPull)
			}
		})
	}

	h.secrets = []v1.Secret{secret}
	pulls := f.is.count("PullImage")
	c := podOf("c", v1.PullIfNotPresent)
	if res, _ := f.sync(t, c); res.Error() != nil || !slices.Contains(res.Started, "app") || f.is.count("PullImage") != pulls {
		t.Errorf("pod C with the secret: started %v, %v, %d pulls; want app started without a pull", res.Started, res.Error(), f.is.count("PullImage")-pulls)
	}
}

// TestComputePodActionsImageVolumes: the plan's image volumes are all the
// pod's whose pull back-off does not run, only when a container starts; a
// container mounting one whose back-off runs is held in ImagePullBackOff
// (before its own image's back-off, as the kubelet's order), the others
// start.
func TestComputePodActionsImageVolumes(t *testing.T) {
	pod := imageVolumePod("registry.example/tools:1", v1.PullIfNotPresent)
	pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: "other",
		VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "registry.example/other:1"}}})
	empty := &PodStatus{Ref: RefOf(pod)}
	volKey := ImageVolumeBackOffKey(pod, "registry.example/tools:1")

	plan := ComputePodActions(pod, empty, PlanInputs{BackOff: fakeBackOffView{}})
	if want := []string{"tools", "other"}; !reflect.DeepEqual(plan.ImageVolumes, want) {
		t.Errorf("new pod: image volumes %v, want %v", plan.ImageVolumes, want)
	}

	plan = ComputePodActions(pod, empty, PlanInputs{BackOff: fakeBackOffView{pull: map[string]string{
		volKey: "ErrImagePull: manifest unknown", BackOffKey(pod, "app"): "ErrImagePull: not this one"}}})
	want := Waiting{Reason: ReasonImagePullBackOff, Message: `Back-off pulling image "registry.example/tools:1": ErrImagePull: manifest unknown`}
	if plan.Waiting["app"] != want {
		t.Errorf("app held %+v, want %+v", plan.Waiting["app"], want)
	}
	if !reflect.DeepEqual(plan.ContainersToStart, []int{1}) || !reflect.DeepEqual(plan.ImageVolumes, []string{"other"}) {
		t.Errorf("volume in back-off: start %v, image volumes %v; want [1] (plain) and [other]", plan.ContainersToStart, plan.ImageVolumes)
	}

	if plan := ComputePodActions(pod, readyStatus(running("app"), running("plain")), PlanInputs{}); len(plan.ImageVolumes) != 0 {
		t.Errorf("running pod: image volumes %v, want none", plan.ImageVolumes)
	}
}
