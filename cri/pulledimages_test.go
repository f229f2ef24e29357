package cri

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/crivk/crivk/cri/pullrecords"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestEnsureImagePrivateImagePresent: KubeletEnsureSecretPulledImages with
// the default policy. Pod A pulls a private image with its secret; pod B,
// without it, IfNotPresent, is not given the image: it pulls with its own
// (no) credentials, which the registry refuses (ErrImagePull with the
// kubelet's "Failed to pull image" event); under Never it gets
// ErrImageNeverPull as if the image were absent; pod C, with A's secret,
// uses the image without a pull.
func TestEnsureImagePrivateImagePresent(t *testing.T) {
	const private = "registry.example.com/team/app:1"
	f := newSyncFixture(t)
	rec := &fakeRecorder{}
	rt, err := New(Config{PodLogDir: f.dir, Recorder: rec,
		PulledImages: PulledImagesConfig{Dir: filepath.Join(t.TempDir(), "image_manager")}}, f.rs, f.is)
	if err != nil {
		t.Fatal(err)
	}
	f.is.private = map[string]string{private: "alice"}
	secret := dockerJSONSecret("regcred", map[string]string{"registry.example.com": "alice"})
	secret.Namespace, secret.Name, secret.UID = "prod", "regcred", "secret-uid"
	podWith := func(name string, policy v1.PullPolicy, secrets ...v1.Secret) (*v1.Pod, RuntimeHelper) {
		c := image("app", private)
		c.ImagePullPolicy = policy
		pod := syncPod(v1.RestartPolicyAlways, c)
		pod.Name, pod.UID = name, types.UID("uid-"+name)
		return pod, secretsHelper{secrets: secrets}
	}
	ensure := func(pod *v1.Pod, h RuntimeHelper) (string, *PullSpan, error) {
		rt.SetRuntimeHelper(h)
		return rt.ensureImage(context.Background(), pod, &pod.Spec.Containers[0], nil)
	}

	a, h := podWith("a", v1.PullIfNotPresent, secret)
	ref, pulled, err := ensure(a, h)
	if err != nil || pulled == nil {
		t.Fatalf("pod A: %q, pulled %v, %v", ref, pulled, err)
	}

	b, h := podWith("b", v1.PullIfNotPresent)
	pulls := f.is.count("PullImage")
	_, _, err = ensure(b, h)
	var ie *ImageError
	if !errors.As(err, &ie) || ie.Reason != ReasonErrImagePull {
		t.Fatalf("pod B without the secret: %v, want %s", err, ReasonErrImagePull)
	}
	if f.is.count("PullImage") != pulls+1 || f.is.auths[len(f.is.auths)-1] != "" {
		t.Errorf("pod B's pull: %d calls, last with %q, want one anonymous", f.is.count("PullImage")-pulls, f.is.auths[len(f.is.auths)-1])
	}
	if want := fmt.Sprintf("Warning Failed Failed to pull image %q: ", private); !rec.has(want) {
		t.Errorf("events %v, want %q", rec.events, want)
	}

	bNever, h := podWith("b-never", v1.PullNever)
	_, _, err = ensure(bNever, h)
	if want := fmt.Sprintf("Container image %q is not present with pull policy of Never", private); !errors.As(err, &ie) || ie.Reason != ReasonErrImageNeverPull || err.Error() != want {
		t.Errorf("pod B, Never: %v, want %s %q", err, ReasonErrImageNeverPull, want)
	}

	c, h := podWith("c", v1.PullIfNotPresent, secret)
	pulls = f.is.count("PullImage")
	ref, pulled, err = ensure(c, h)
	if err != nil || pulled != nil || ref == "" || f.is.count("PullImage") != pulls {
		t.Errorf("pod C with the secret: %q, pulled %v, %v, %d pulls; want the image without a pull", ref, pulled, err, f.is.count("PullImage")-pulls)
	}
	if want := fmt.Sprintf("Normal Pulled Container image %q already present on machine and can be accessed by the pod", private); !rec.has(want) {
		t.Errorf("events %v, want %q", rec.events, want)
	}

	// An image crivk did not pull is not checked under the default
	// policy; under AlwaysVerify it is.
	f.is.SetFakeImages([]string{"preloaded.example/x:1"})
	p, h := podWith("p", v1.PullIfNotPresent)
	p.Spec.Containers[0].Image = "preloaded.example/x:1"
	if _, pulled, err := ensure(p, h); err != nil || pulled != nil {
		t.Errorf("preloaded image, default policy: pulled %v, %v", pulled, err)
	}
	strict, err := New(Config{PodLogDir: f.dir, PulledImages: PulledImagesConfig{Dir: filepath.Join(t.TempDir(), "im"), Policy: pullrecords.AlwaysVerify}}, f.rs, f.is)
	if err != nil {
		t.Fatal(err)
	}
	strict.SetRuntimeHelper(h)
	pulls = f.is.count("PullImage")
	if _, pulled, err := strict.ensureImage(context.Background(), p, &p.Spec.Containers[0], nil); err != nil || pulled == nil || f.is.count("PullImage") != pulls+1 {
		t.Errorf("preloaded image, AlwaysVerify: pulled %v, %v; want a pull", pulled, err)
	}

	if _, err := New(Config{PodLogDir: f.dir, PulledImages: PulledImagesConfig{Dir: t.TempDir(), Policy: "Sometimes"}}, f.rs, f.is); err == nil {
		t.Error("New accepted an unknown policy")
	}
}
