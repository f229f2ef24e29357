package cri

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/crivk/crivk/credentialprovider"
	"github.com/crivk/crivk/cri/pullrecords"
	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// fakeProviders are credential providers answering by the pod's service
// account, and recording each lookup.
type fakeProviders struct {
	mu      sync.Mutex
	lookups []string // "<namespace>/<name>/<uid>/<service account> <repository>"
	// byServiceAccount are the credentials given to a pod of a service
	// account ("" for any other).
	byServiceAccount map[string][]credentialprovider.Credential
}

func (f *fakeProviders) Lookup(_ context.Context, pod credentialprovider.Pod, repository string) []credentialprovider.Credential {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lookups = append(f.lookups, fmt.Sprintf("%s/%s/%s/%s %s", pod.Namespace, pod.Name, pod.UID, pod.ServiceAccountName, repository))
	if c, ok := f.byServiceAccount[pod.ServiceAccountName]; ok {
		return c
	}
	return f.byServiceAccount[""]
}

// TestEnsureImageCredentialProviders: a pod's pull tries its pull secrets'
// credentials first, then the credential providers' (the kubelet's
// keyring order); the providers are asked for the image's repository
// (tag and digest off, Docker Hub's spelt out) with the pod's identity;
// the pulled record keeps a provider's credential as node-wide, or as its
// service account's in token mode, and another pod may then use the image
// as the kubelet's KubeletEnsureSecretPulledImages decides.
func TestEnsureImageCredentialProviders(t *testing.T) {
	const private = "registry.example.com/team/app:1"
	ctx := context.Background()
	newRuntime := func(t *testing.T, f *syncFixture, p CredentialProviders) (*Runtime, string) {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "image_manager")
		rt, err := New(Config{PodLogDir: f.dir, Recorder: &fakeRecorder{}, PulledImages: PulledImagesConfig{Dir: dir}}, f.rs, f.is)
		if err != nil {
			t.Fatal(err)
		}
		rt.SetCredentialProviders(p)
		return rt, dir
	}
	podOf := func(name, sa string, policy v1.PullPolicy) *v1.Pod {
		c := image("app", private)
		c.ImagePullPolicy = policy
		pod := syncPod(v1.RestartPolicyAlways, c)
		pod.Namespace, pod.Name, pod.UID, pod.Spec.ServiceAccountName = "prod", name, types.UID("uid-"+name), sa
		return pod
	}
	ensure := func(rt *Runtime, pod *v1.Pod, secrets ...v1.Secret) (*PullSpan, error) {
		rt.SetRuntimeHelper(secretsHelper{secrets: secrets})
		_, pulled, err := rt.ensureImage(ctx, pod, &pod.Spec.Containers[0], nil)
		return pulled, err
	}
	record := func(t *testing.T, dir string) pullrecords.Credentials {
		t.Helper()
		m, err := pullrecords.New(pullrecords.Config{Dir: dir, Policy: pullrecords.AlwaysVerify}, nil)
		if err != nil {
			t.Fatal(err)
		}
		// A pod with nothing must pull unless the record is node-wide.
		if !m.MustAttemptPull(ctx, private, "sha256:"+private, func() pullrecords.PodCredentials { return pullrecords.PodCredentials{} }) {
			return pullrecords.Credentials{NodePodsAccessible: true}
		}
		return pullrecords.Credentials{}
	}

	t.Run("secrets first, then the providers", func(t *testing.T) {
		f := newSyncFixture(t)
		f.is.private = map[string]string{private: "provider-user"}
		fp := &fakeProviders{byServiceAccount: map[string][]credentialprovider.Credential{"": {{Username: "provider-user", Password: "pw"}}}}
		rt, _ := newRuntime(t, f, fp)
		wrong := dockerJSONSecret("wrong", map[string]string{"registry.example.com": "alice"})
		if _, err := ensure(rt, podOf("a", "default", v1.PullAlways), wrong); err != nil {
			t.Fatal(err)
		}
		if want := []string{"alice@", "provider-user@"}; fmt.Sprint(f.is.auths) != fmt.Sprint(want) {
			t.Errorf("pulls with %v, want %v", f.is.auths, want)
		}
		if want := []string{"prod/a/uid-a/default registry.example.com/team/app"}; fmt.Sprint(fp.lookups) != fmt.Sprint(want) {
			t.Errorf("lookups %v, want %v", fp.lookups, want)
		}
		// A secret that works is used first: the provider's credential
		// is not tried.
		f.is.private[private] = "alice"
		f.is.auths = nil
		if _, err := ensure(rt, podOf("b", "default", v1.PullAlways), wrong); err != nil {
			t.Fatal(err)
		}
		if want := []string{"alice@"}; fmt.Sprint(f.is.auths) != fmt.Sprint(want) {
			t.Errorf("pulls with %v, want %v", f.is.auths, want)
		}
	})

	t.Run("a node-wide provider credential: every pod may use the image", func(t *testing.T) {
		f := newSyncFixture(t)
		f.is.private = map[string]string{private: "provider-user"}
		fp := &fakeProviders{byServiceAccount: map[string][]credentialprovider.Credential{"": {{Username: "provider-user", Password: "pw"}}}}
		rt, dir := newRuntime(t, f, fp)
		if pulled, err := ensure(rt, podOf("a", "default", v1.PullIfNotPresent)); err != nil || pulled == nil {
			t.Fatalf("pod a: pulled %v, %v", pulled, err)
		}
		if got := record(t, dir); !got.NodePodsAccessible {
			t.Errorf("record %+v, want node pods accessible", got)
		}
		fp.byServiceAccount = nil // the provider would give nothing now
		pulls := f.is.count("PullImage")
		if pulled, err := ensure(rt, podOf("b", "other", v1.PullIfNotPresent)); err != nil || pulled != nil || f.is.count("PullImage") != pulls {
			t.Errorf("pod b: pulled %v, %v; want the image without a pull", pulled, err)
		}
	})

	t.Run("token mode: the service account's pods", func(t *testing.T) {
		f := newSyncFixture(t)
		f.is.private = map[string]string{private: "provider-user"}
		saCred := func(name, uid string) []credentialprovider.Credential {
			return []credentialprovider.Credential{{Username: "provider-user", Password: "pw",
				ServiceAccount: &credentialprovider.ServiceAccountCoordinates{UID: uid, Namespace: "prod", Name: name}}}
		}
		fp := &fakeProviders{byServiceAccount: map[string][]credentialprovider.Credential{
			"builder": saCred("builder", "sa-uid-1"), "deployer": saCred("deployer", "sa-uid-2")}}
		rt, dir := newRuntime(t, f, fp)
		if pulled, err := ensure(rt, podOf("a", "builder", v1.PullIfNotPresent)); err != nil || pulled == nil {
			t.Fatalf("pod a: pulled %v, %v", pulled, err)
		}
		if got := record(t, dir); got.NodePodsAccessible {
			t.Errorf("a token-mode credential recorded as node-wide")
		}
		pulls := f.is.count("PullImage")
		if pulled, err := ensure(rt, podOf("b", "builder", v1.PullIfNotPresent)); err != nil || pulled != nil || f.is.count("PullImage") != pulls {
			t.Errorf("pod b, same service account: pulled %v, %v; want the image without a pull", pulled, err)
		}
		// Another service account the provider also gives a credential
		// for: pulled again with it, then recorded too.
		if pulled, err := ensure(rt, podOf("c", "deployer", v1.PullIfNotPresent)); err != nil || pulled == nil {
			t.Errorf("pod c, another service account: pulled %v, %v; want a pull", pulled, err)
		}
		m, err := pullrecords.New(pullrecords.Config{Dir: dir}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for sa, uid := range map[string]string{"builder": "sa-uid-1", "deployer": "sa-uid-2"} {
			pc := pullrecords.PodCredentials{ServiceAccount: &pullrecords.ServiceAccount{UID: uid, Namespace: "prod", Name: sa}}
			if m.MustAttemptPull(ctx, private, "sha256:"+private, func() pullrecords.PodCredentials { return pc }) {
				t.Errorf("service account %s not recorded", sa)
			}
		}
		// A service account the provider gives nothing: the pod must show
		// its own credentials, has none, and the registry refuses.
		_, err = ensure(rt, podOf("d", "intruder", v1.PullIfNotPresent))
		var ie *ImageError
		if !errors.As(err, &ie) || ie.Reason != ReasonErrImagePull {
			t.Errorf("pod d: %v, want %s", err, ReasonErrImagePull)
		}
		// Under Never: the kubelet's "not present".
		_, err = ensure(rt, podOf("e", "intruder", v1.PullNever))
		if !errors.As(err, &ie) || ie.Reason != ReasonErrImageNeverPull {
			t.Errorf("pod e: %v, want %s", err, ReasonErrImageNeverPull)
		}
	})

	t.Run("the repository asked for", func(t *testing.T) {
		f := newSyncFixture(t)
		fp := &fakeProviders{}
		rt, _ := newRuntime(t, f, fp)
		for _, img := range []string{"busybox", "busybox:1.36", "library/busybox@sha256:0123", "registry.example.com:5000/a/b:2"} {
			pod := podOf("p", "", v1.PullAlways)
			pod.Spec.Containers[0].Image = img
			if _, err := ensure(rt, pod); err != nil {
				t.Fatal(err)
			}
		}
		want := []string{"prod/p/uid-p/ docker.io/library/busybox", "prod/p/uid-p/ docker.io/library/busybox",
			"prod/p/uid-p/ docker.io/library/busybox", "prod/p/uid-p/ registry.example.com:5000/a/b"}
		if diff := cmp.Diff(want, fp.lookups); diff != "" {
			t.Errorf("lookups (-want +got):\n%s", diff)
		}
	})
}
