package cri

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// mountsHelper gives every container one read-only mount per volumeMount.
type mountsHelper struct{}

func (mountsHelper) GenerateRunContainerOptions(_ context.Context, _ *v1.Pod, c *v1.Container, _ []string, _ ImageVolumes) (*RunContainerOptions, error) {
	opts := &RunContainerOptions{}
	for _, vm := range c.VolumeMounts {
		opts.Mounts = append(opts.Mounts, &runtimeapi.Mount{ContainerPath: vm.MountPath, HostPath: "/host/" + vm.Name, Readonly: vm.ReadOnly})
	}
	return opts, nil
}
func (mountsHelper) PullSecrets(context.Context, *v1.Pod) []v1.Secret { return nil }

// TestSyncPodRecursiveReadOnly: recursiveReadOnly is resolved against the
// runtime handler's features in CRI Status, as the kubelet's makeMounts:
// Enabled where the runtime cannot (containerd 1.6 reports no handlers) is
// CreateContainerConfigError with the kubelet's message and no container;
// IfPossible falls back to a plain read-only mount; where the runtime can,
// the CRI mount is recursive.
func TestSyncPodRecursiveReadOnly(t *testing.T) {
	rroHandler := func(name string, ok bool) *runtimeapi.RuntimeHandler {
		return &runtimeapi.RuntimeHandler{Name: name, Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: ok}}
	}
	mode := func(m v1.RecursiveReadOnlyMode) *v1.RecursiveReadOnlyMode { return &m }
	for name, tc := range map[string]struct {
		mount    v1.VolumeMount
		handlers []*runtimeapi.RuntimeHandler
		wantRRO  bool
		wantErr  string
	}{
		"unset":                     {mount: v1.VolumeMount{ReadOnly: true}},
		"Disabled on a plain mount": {mount: v1.VolumeMount{RecursiveReadOnly: mode(v1.RecursiveReadOnlyDisabled)}},
		"Enabled, no handlers reported (containerd 1.6)": {mount: v1.VolumeMount{ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyEnabled)},
			wantErr: `failed to resolve recursive read-only mode: volume "data" requested recursive read-only mode, but it is not supported by the runtime`},
		"Enabled, handler without the feature": {mount: v1.VolumeMount{ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyEnabled)},
			handlers: []*runtimeapi.RuntimeHandler{rroHandler("", false)},
			wantErr:  `failed to resolve recursive read-only mode: volume "data" requested recursive read-only mode, but it is not supported by the runtime`},
		"Enabled, supported": {mount: v1.VolumeMount{ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyEnabled)},
			handlers: []*runtimeapi.RuntimeHandler{rroHandler("", true)}, wantRRO: true},
		"IfPossible, not supported: plain": {mount: v1.VolumeMount{ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyIfPossible)}},
		"IfPossible, supported": {mount: v1.VolumeMount{ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyIfPossible)},
			handlers: []*runtimeapi.RuntimeHandler{rroHandler("", true)}, wantRRO: true},
		"IfPossible on a writable mount": {mount: v1.VolumeMount{RecursiveReadOnly: mode(v1.RecursiveReadOnlyIfPossible)},
			wantErr: `failed to resolve recursive read-only mode: volume "data" requested recursive read-only mode, but it is not read-only`},
		"Enabled with propagation": {mount: v1.VolumeMount{ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyEnabled),
			MountPropagation: ptr.To(v1.MountPropagationHostToContainer)}, handlers: []*runtimeapi.RuntimeHandler{rroHandler("", true)},
			wantErr: `failed to resolve recursive read-only mode: volume "data" requested recursive read-only mode, but it is not compatible with propagation "HostToContainer"`},
	} {
		t.Run(name, func(t *testing.T) {
			f := newSyncFixture(t)
			f.is.SetFakeImages([]string{"busybox:1.36"})
			f.rt.SetRuntimeHelper(mountsHelper{})
			f.rs.handlers = tc.handlers
			c := image("a", "busybox:1.36")
			tc.mount.Name, tc.mount.MountPath = "data", "/data"
			c.VolumeMounts = []v1.VolumeMount{tc.mount}
			res, _ := f.sync(t, syncPod(v1.RestartPolicyAlways, c))
			if tc.wantErr != "" {
				w := res.Waiting["a"]
				if w.Reason != ReasonCreateConfigError || w.Message != tc.wantErr {
					t.Fatalf("waiting %+v, want %s %q", w, ReasonCreateConfigError, tc.wantErr)
				}
				if n := f.rs.count("CreateContainer"); n != 0 {
					t.Fatalf("%d containers created", n)
				}
				return
			}
			if err := res.Error(); err != nil {
				t.Fatalf("SyncPod: %v", err)
			}
			if len(f.rs.created) != 1 {
				t.Fatalf("created %d containers", len(f.rs.created))
			}
			for _, cfg := range f.rs.created {
				if ms := cfg.GetMounts(); len(ms) != 1 || ms[0].GetRecursiveReadOnly() != tc.wantRRO {
					t.Errorf("mounts %v, want recursive read-only %v", ms, tc.wantRRO)
				}
			}
		})
	}
}

// TestRecursiveReadOnlyMountsSupported: what the container statuses'
// volumeMounts are resolved against is the handler's feature as the last
// CRI Status reported it (the node status loop's), without a call of its
// own: nothing before a Status, the pod's RuntimeClass's handler after one,
// and no for a class that cannot be looked up.
func TestRecursiveReadOnlyMountsSupported(t *testing.T) {
	handlers := []*runtimeapi.RuntimeHandler{
		{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true}},
		{Name: "runc", Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true}},
		{Name: "kata", Features: &runtimeapi.RuntimeHandlerFeatures{}},
	}
	withClass := func(class string) *v1.Pod {
		p := syncPod(v1.RestartPolicyAlways, image("a", "busybox:1.36"))
		if class != "" {
			p.Spec.RuntimeClassName = ptr.To(class)
		}
		return p
	}
	for name, tc := range map[string]struct {
		handlers []*runtimeapi.RuntimeHandler
		noStatus bool
		pod      *v1.Pod
		want     bool
	}{
		"before any Status":                            {handlers: handlers, noStatus: true, pod: withClass("")},
		"default handler with the feature":             {handlers: handlers, pod: withClass(""), want: true},
		"class whose handler has it":                   {handlers: handlers, pod: withClass("fast"), want: true},
		"class whose handler has not":                  {handlers: handlers, pod: withClass("vm")},
		"unknown class":                                {handlers: handlers, pod: withClass("nope")},
		"runtime reports no handlers (containerd 1.6)": {pod: withClass("")},
	} {
		t.Run(name, func(t *testing.T) {
			f := newSyncFixture(t)
			f.rt.SetRuntimeClasses(fakeClasses{"fast": "runc", "vm": "kata"})
			f.rs.handlers = tc.handlers
			if !tc.noStatus {
				if _, err := f.rt.Status(context.Background()); err != nil {
					t.Fatalf("Status: %v", err)
				}
			}
			calls := f.rs.count("Status")
			if got := f.rt.RecursiveReadOnlyMountsSupported(tc.pod); got != tc.want {
				t.Errorf("= %v, want %v", got, tc.want)
			}
			if n := f.rs.count("Status"); n != calls {
				t.Errorf("asked the runtime's Status %d more times, want none", n-calls)
			}
		})
	}
}

// TestGetPodStatusUser: the CRI status' user reaches the pod status the
// engine reads (the status' user field); a runtime that reports none
// (containerd 1.6) gives none.
func TestGetPodStatusUser(t *testing.T) {
	user := &runtimeapi.ContainerUser{Linux: &runtimeapi.LinuxContainerUser{Uid: 1000, Gid: 3000, SupplementalGroups: []int64{3000, 4000}}}
	for name, want := range map[string]*runtimeapi.ContainerUser{"reported": user, "not reported": nil} {
		t.Run(name, func(t *testing.T) {
			f := newSyncFixture(t)
			f.is.SetFakeImages([]string{"busybox:1.36"})
			pod := syncPod(v1.RestartPolicyAlways, image("a", "busybox:1.36"))
			f.sync(t, pod)
			c := f.status(t, pod).Latest("a", ContainerTypeRegular)
			if c == nil {
				t.Fatal("container a was not created")
			}
			if err := f.rs.setContainer(c.ID, func(fc *fakeContainer) { fc.User = want }); err != nil {
				t.Fatal(err)
			}
			got := f.status(t, pod).Latest("a", ContainerTypeRegular).User
			if !proto.Equal(got, want) {
				t.Errorf("user = %v, want %v", got, want)
			}
		})
	}
}
