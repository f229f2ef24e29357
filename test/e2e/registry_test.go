package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/cri/pullrecords"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// The local registry (hack/local-up.sh, REGISTRY=1): TLS with the cluster
// CA and htpasswd authentication; the busybox test image is there as
// <REGISTRY_HOST>/e2e/busybox:1.37.0-2.
func registry(t *testing.T) (host, password, digest string) {
	t.Helper()
	host = os.Getenv("REGISTRY_HOST")
	dir := filepath.Join(mustEnv("LOCAL_DIR"), "registry")
	pw, err1 := os.ReadFile(filepath.Join(dir, "password"))
	dg, err2 := os.ReadFile(filepath.Join(dir, "busybox.digest"))
	if host == "" || err1 != nil || err2 != nil {
		t.Fatalf("the local registry is not set up (REGISTRY=1 hack/local-up.sh): REGISTRY_HOST=%q, %v, %v", host, err1, err2)
	}
	return host, strings.TrimSpace(string(pw)), strings.TrimSpace(string(dg))
}

// forgetBusyboxPulls removes, when the test ends, crivk's pulled record
// of the registry's busybox image. That image is BUSYBOX_IMAGE pushed as
// is (hack/local-up.sh), so it has the same image ID as the preloaded
// BUSYBOX_IMAGE every other test runs (imported, not pullable from
// registry.k8s.io). While a pulled record of that ID exists, the default
// policy (NeverVerifyPreloadedImages) counts the ID as pulled by crivk and
// makes every BUSYBOX_IMAGE pod pull it again with its own credentials, as
// the kubelet would; without the record it is a preloaded image again.
func forgetBusyboxPulls(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rt, err := cri.Connect(ctx, cri.Config{Endpoint: mustEnv("CRI_ENDPOINT"), PodLogDir: filepath.Join(mustEnv("LOCAL_DIR"), "pods")})
		if err != nil {
			t.Errorf("forgetting the busybox pulls: %v", err)
			return
		}
		defer rt.Close()
		ref, ok, err := rt.ImagePresent(ctx, busybox)
		if err != nil || !ok {
			t.Errorf("forgetting the busybox pulls: %s present %v, %v", busybox, ok, err)
			return
		}
		// hack/run-crivk.sh: --root-dir=$LOCAL_DIR/crivk.
		f := pullrecords.PulledRecordFile(filepath.Join(mustEnv("LOCAL_DIR"), "crivk", "image_manager"), ref)
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			t.Errorf("forgetting the busybox pulls: %v", err)
		}
	})
}

// untagRegistryImage removes names from containerd (its images service,
// in the CRI's namespace k8s.io), not the image they name: the CRI's
// RemoveImage would remove every name of the image, BUSYBOX_IMAGE's among
// them, which the other tests run and cannot pull. It waits until the
// CRI no longer finds them.
func untagRegistryImage(t *testing.T, names ...string) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	conn, err := grpc.NewClient(mustEnv("CRI_ENDPOINT"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rt, err := cri.Connect(ctx, cri.Config{Endpoint: mustEnv("CRI_ENDPOINT"), PodLogDir: filepath.Join(mustEnv("LOCAL_DIR"), "pods")})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	nsCtx := metadata.AppendToOutgoingContext(ctx, "containerd-namespace", "k8s.io")
	for _, name := range names {
		if _, err := imagesapi.NewImagesClient(conn).Delete(nsCtx, &imagesapi.DeleteImageRequest{Name: name}); err != nil && status.Code(err) != codes.NotFound {
			t.Fatalf("untagging %s: %v", name, err)
		}
		err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
			_, ok, err := rt.ImagePresent(ctx, name)
			return err == nil && !ok, nil
		})
		if err != nil {
			t.Fatalf("the CRI still finds %s after its name was removed: %v", name, err)
		}
	}
}

// pullSecret creates a kubernetes.io/dockerconfigjson Secret for host.
func pullSecret(t *testing.T, ns, name, host, user, password string) {
	t.Helper()
	cfg := map[string]any{"auths": map[string]any{host: map[string]string{
		"username": user, "password": password, "auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password)),
	}}}
	b, _ := json.Marshal(cfg)
	s := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Type: v1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{v1.DockerConfigJsonKey: b}}
	if _, err := client.CoreV1().Secrets(ns).Create(testContext(t, 10*time.Second), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestRegistryPulls pulls from the local registry for real, through the
// pods' imagePullSecrets: by tag and by digest with policy Always (a pull
// every start), the image ID the runtime reports is the pushed digest, and
// the kubelet's Pulling/Pulled events are recorded.
func TestRegistryPulls(t *testing.T) {
	host, pw, digest := registry(t)
	forgetBusyboxPulls(t)
	ns := newNamespace(t)
	pullSecret(t, ns, "regcred", host, "crivk", pw)
	for name, image := range map[string]string{
		"by-tag":    host + "/e2e/busybox:1.37.0-2",
		"by-digest": host + "/e2e/busybox@" + digest,
	} {
		pod := busyboxPod(name, v1.RestartPolicyAlways, "sleep 3600")
		pod.Spec.Containers[0].Image = image
		pod.Spec.Containers[0].ImagePullPolicy = v1.PullAlways
		pod.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "regcred"}}
		p := runningPod(t, ns, pod)
		st := p.Status.ContainerStatuses[0]
		t.Logf("%s: image %s, imageID %s", name, st.Image, st.ImageID)
		if !strings.HasSuffix(st.ImageID, digest) {
			t.Errorf("%s: imageID %q, want the pushed digest %s", name, st.ImageID, digest)
		}
		waitEvent(t, ns, name, v1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", image))
		waitEvent(t, ns, name, v1.EventTypeNormal, "Pulled", fmt.Sprintf("Successfully pulled image %q", image))
	}
}

// TestRegistryPullWithoutCredentials: the same image without a pull
// secret, and with a secret holding a wrong password, fails with the
// kubelet's ErrImagePull, then ImagePullBackOff "Back-off pulling image"
// (in that order, every status update seen through a watch), with the
// kubelet's Warning events "Failed to pull image" (the registry's refusal
// in the message) and "Error: ErrImagePull".
func TestRegistryPullWithoutCredentials(t *testing.T) {
	host, _, _ := registry(t)
	ns := newNamespace(t)
	pullSecret(t, ns, "wrong", host, "crivk", "not-the-password")
	image := host + "/e2e/busybox:1.37.0-2"
	for name, secret := range map[string]string{"no-secret": "", "wrong-secret": "wrong"} {
		pod := busyboxPod(name, v1.RestartPolicyAlways, "sleep 3600")
		pod.Spec.Containers[0].Image = image
		pod.Spec.Containers[0].ImagePullPolicy = v1.PullAlways
		if secret != "" {
			pod.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: secret}}
		}
		// The watch starts before the pod: a polled Get could miss the
		// ErrImagePull between two polls. A retry watcher from the list's
		// resourceVersion: a plain watch the API server ends (its watch
		// cache's timeouts) would end the loop before any status.
		ctx := testContext(t, 90*time.Second)
		l, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil {
			t.Fatalf("%s: listing the pod: %v", name, err)
		}
		lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = "metadata.name=" + name
			return client.CoreV1().Pods(ns).Watch(ctx, o)
		}}
		w, err := watchtools.NewRetryWatcherWithContext(ctx, l.ResourceVersion, lw)
		if err != nil {
			t.Fatalf("%s: watching the pod: %v", name, err)
		}
		createPod(t, ns, pod)
		var order []string // the waiting reasons, as they changed
		seen := map[string]string{}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				t.Logf("%s: watch error %v", name, apierrors.FromObject(ev.Object))
				continue
			}
			p, ok := ev.Object.(*v1.Pod)
			if !ok || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Waiting == nil {
				continue
			}
			wt := p.Status.ContainerStatuses[0].State.Waiting
			if len(order) == 0 || order[len(order)-1] != wt.Reason {
				order = append(order, wt.Reason)
			}
			if _, ok := seen[wt.Reason]; !ok {
				seen[wt.Reason] = wt.Message
			}
			if wt.Reason == "ImagePullBackOff" {
				break
			}
		}
		w.Stop()
		t.Logf("%s: waiting reasons in order %v", name, order)
		pull := slices.Index(order, "ErrImagePull")
		backoff := slices.Index(order, "ImagePullBackOff")
		switch {
		case backoff < 0:
			t.Fatalf("%s: no ImagePullBackOff within 90s; waiting reasons %v; %s", name, order, nodeDigest(context.Background()))
		case pull < 0 || pull > backoff:
			t.Errorf("%s: waiting reasons %v, want ErrImagePull before ImagePullBackOff", name, order)
		}
		if msg := seen["ErrImagePull"]; pull >= 0 && msg == "" {
			t.Errorf("%s: ErrImagePull with no message, want the pull's error", name)
		}
		if msg := seen["ImagePullBackOff"]; !strings.HasPrefix(msg, fmt.Sprintf("Back-off pulling image %q", image)) {
			t.Errorf("%s: ImagePullBackOff message %q, want it to start with Back-off pulling image %q", name, msg, image)
		}
		ev := waitEvent(t, ns, name, v1.EventTypeWarning, "Failed", fmt.Sprintf("Failed to pull image %q", image))
		if low := strings.ToLower(ev.Message); !strings.Contains(low, "401") && !strings.Contains(low, "unauthorized") && !strings.Contains(low, "authoriz") {
			t.Errorf("%s: the Failed event %q does not carry the registry's refusal", name, ev.Message)
		}
		waitEvent(t, ns, name, v1.EventTypeWarning, "Failed", "Error: ErrImagePull")
	}
}

// TestRegistryEnsureSecretPulledImages: the kubelet's
// KubeletEnsureSecretPulledImages with its default policy
// (NeverVerifyPreloadedImages) on the private image. Pod A pulls it with
// its pull secret; pod B on the same node, without the secret,
// IfNotPresent, is not given the image already there: it pulls with its
// own (no) credentials, the registry refuses, and it gets ErrImagePull
// then ImagePullBackOff with the kubelet's messages and never runs; pod
// B2, the same under imagePullPolicy Never, gets ErrImageNeverPull "is not
// present", as if the image were absent; pod C, with A's secret, runs
// from the image present without a pull ("already present on machine and
// can be accessed by the pod", no Pulling event), as the kubelet.
func TestRegistryEnsureSecretPulledImages(t *testing.T) {
	host, pw, digest := registry(t)
	image := host + "/e2e/busybox:1.37.0-2"
	forgetBusyboxPulls(t)
	// Pod A must pull: the registry's names an earlier test left
	// (TestRegistryPulls) go first.
	untagRegistryImage(t, image, host+"/e2e/busybox@"+digest)
	ns := newNamespace(t)
	pullSecret(t, ns, "regcred", host, "crivk", pw)
	pod := func(name string, policy v1.PullPolicy, secret string) *v1.Pod {
		p := busyboxPod(name, v1.RestartPolicyAlways, "sleep 3600")
		p.Spec.Containers[0].Image = image
		p.Spec.Containers[0].ImagePullPolicy = policy
		if secret != "" {
			p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: secret}}
		}
		return p
	}

	runningPod(t, ns, pod("a", v1.PullIfNotPresent, "regcred"))
	waitEvent(t, ns, "a", v1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", image))
	waitEvent(t, ns, "a", v1.EventTypeNormal, "Pulled", fmt.Sprintf("Successfully pulled image %q", image))

	createPod(t, ns, pod("b", v1.PullIfNotPresent, ""))
	seen := map[string]string{}
	ran := false
	waitPod(t, ns, "b", 90*time.Second, "ErrImagePull, then ImagePullBackOff", func(p *v1.Pod) bool {
		if len(p.Status.ContainerStatuses) == 1 {
			st := p.Status.ContainerStatuses[0]
			if w := st.State.Waiting; w != nil {
				seen[w.Reason] = w.Message
			}
			ran = ran || st.State.Running != nil || st.State.Terminated != nil || st.ContainerID != ""
		}
		_, backoff := seen["ImagePullBackOff"]
		return backoff
	})
	t.Logf("pod b: waiting reasons seen %v", seen)
	if ran {
		t.Errorf("pod b, without the secret, ran the private image")
	}
	if msg := seen["ImagePullBackOff"]; !strings.HasPrefix(msg, fmt.Sprintf("Back-off pulling image %q", image)) {
		t.Errorf("pod b: ImagePullBackOff message %q, want it to start with Back-off pulling image %q", msg, image)
	}
	waitEvent(t, ns, "b", v1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", image))
	ev := waitEvent(t, ns, "b", v1.EventTypeWarning, "Failed", fmt.Sprintf("Failed to pull image %q", image))
	if low := strings.ToLower(ev.Message); !strings.Contains(low, "401") && !strings.Contains(low, "unauthorized") && !strings.Contains(low, "authoriz") {
		t.Errorf("pod b: the Failed event %q does not carry the registry's refusal", ev.Message)
	}

	createPod(t, ns, pod("b2", v1.PullNever, ""))
	never := fmt.Sprintf("Container image %q is not present with pull policy of Never", image)
	waitPod(t, ns, "b2", 60*time.Second, "ErrImageNeverPull", func(p *v1.Pod) bool {
		if len(p.Status.ContainerStatuses) != 1 {
			return false
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == "ErrImageNeverPull" && w.Message == never
	})
	waitEvent(t, ns, "b2", v1.EventTypeWarning, "ErrImageNeverPull", never)

	runningPod(t, ns, pod("c", v1.PullIfNotPresent, "regcred"))
	waitEvent(t, ns, "c", v1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine and can be accessed by the pod", image))
	evs, err := podEvents(testContext(t, 10*time.Second), ns, "Pod", "c")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Reason == "Pulling" {
			t.Errorf("pod c, with the secret, pulled again: %s", e.Message)
		}
	}
	// Pod b never ran, still.
	if p, err := client.CoreV1().Pods(ns).Get(testContext(t, 10*time.Second), "b", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if st := p.Status.ContainerStatuses; len(st) != 1 || st[0].State.Running != nil || st[0].ContainerID != "" {
		t.Errorf("pod b's container: %+v, want it never created", st)
	}
}
