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

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The local registry (hack/local-up.sh, REGISTRY=1): TLS with the cluster
// CA and htpasswd authentication; the busybox test image is there as
// <REGISTRY_HOST>/e2e/busybox:1.37.0-1.
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
	ns := newNamespace(t)
	pullSecret(t, ns, "regcred", host, "crivk", pw)
	for name, image := range map[string]string{
		"by-tag":    host + "/e2e/busybox:1.37.0-1",
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
	image := host + "/e2e/busybox:1.37.0-1"
	for name, secret := range map[string]string{"no-secret": "", "wrong-secret": "wrong"} {
		pod := busyboxPod(name, v1.RestartPolicyAlways, "sleep 3600")
		pod.Spec.Containers[0].Image = image
		pod.Spec.Containers[0].ImagePullPolicy = v1.PullAlways
		if secret != "" {
			pod.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: secret}}
		}
		// The watch starts before the pod: a polled Get could miss the
		// ErrImagePull between two polls.
		ctx := testContext(t, 90*time.Second)
		w, err := client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil {
			t.Fatalf("%s: watching the pod: %v", name, err)
		}
		createPod(t, ns, pod)
		var order []string // the waiting reasons, as they changed
		seen := map[string]string{}
		for ev := range w.ResultChan() {
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
