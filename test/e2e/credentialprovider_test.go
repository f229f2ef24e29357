package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// credentialPlugin writes an image credential provider plugin, a shell
// script named name under a new bin directory, and its configuration
// (provider, the YAML of one provider, with %s for the name): the script
// saves each CredentialProviderRequest it reads on stdin under the
// returned requests directory, then prints a CredentialProviderResponse
// with the local registry's credentials (user crivk, cacheDuration 0: the
// plugin runs at every lookup) unless onlyWithToken and the request
// carries no serviceAccountToken, when it gives none. It returns the
// flags that run crivk with it.
func credentialPlugin(t *testing.T, name, provider string, onlyWithToken bool) (flags []string, requests string) {
	t.Helper()
	host, pw, _ := registry(t)
	dir := t.TempDir()
	bin, requests := filepath.Join(dir, "bin"), filepath.Join(dir, "requests")
	for _, d := range []string{bin, requests} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	resp := func(auth map[string]any) string {
		b, err := json.Marshal(map[string]any{"apiVersion": "credentialprovider.kubelet.k8s.io/v1", "kind": "CredentialProviderResponse",
			"cacheKeyType": "Registry", "cacheDuration": "0s", "auth": auth})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for f, content := range map[string]string{
		"with.json":    resp(map[string]any{host: map[string]string{"username": "crivk", "password": pw}}),
		"without.json": resp(map[string]any{}),
	} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	check := "true"
	if onlyWithToken {
		check = `grep -q '"serviceAccountToken"' "$f"`
	}
	script := fmt.Sprintf(`#!/bin/sh
f=%q/$(date +%%s%%N)-$$.json
cat > "$f"
if %s; then cat %q; else cat %q; fi
`, requests, check, filepath.Join(dir, "with.json"), filepath.Join(dir, "without.json"))
	if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "credential-providers.yaml")
	if err := os.WriteFile(cfg, []byte("apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"+
		fmt.Sprintf(provider, name)), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"--image-credential-provider-config=" + cfg, "--image-credential-provider-bin-dir=" + bin}, requests
}

// pluginRequests are the requests the plugin read, in order.
func pluginRequests(t *testing.T, dir string) []map[string]any {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	var out []map[string]any
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var r map[string]any
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("plugin request %s: %q: %v", f, b, err)
		}
		out = append(out, r)
	}
	return out
}

// noPulling fails t if the pod has a Pulling event.
func noPulling(t *testing.T, ns, pod string) {
	t.Helper()
	evs, err := podEvents(testContext(t, 10*time.Second), ns, "Pod", pod)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Reason == "Pulling" {
			t.Errorf("pod %s pulled: %s", pod, e.Message)
		}
	}
}

// TestRegistryCredentialProvider: crivk run with
// --image-credential-provider-config and --image-credential-provider-bin-dir
// (the kubelet's flags) and a plugin that answers with the local
// registry's credentials: a pod with no pull secret pulls the private
// image (the kubelet's events), the plugin having been given a
// credentialprovider.kubelet.k8s.io/v1 CredentialProviderRequest for the
// image's repository, without a token; the credential is node-wide, so the
// pulled record lets a second pod without credentials run the image
// present without a pull ("can be accessed by the pod").
func TestRegistryCredentialProvider(t *testing.T) {
	host, _, digest := registry(t)
	image := host + "/e2e/busybox:1.37.0-2"
	forgetBusyboxPulls(t)
	untagRegistryImage(t, image, host+"/e2e/busybox@"+digest)
	flags, requests := credentialPlugin(t, "e2e-registry", fmt.Sprintf(`- name: %%s
  matchImages: [%q]
  defaultCacheDuration: 1m
  apiVersion: credentialprovider.kubelet.k8s.io/v1
`, host), false)
	withCrivkFlags(t, nil, nil, flags...)
	ns := newNamespace(t)
	pod := func(name string) *v1.Pod {
		p := busyboxPod(name, v1.RestartPolicyAlways, "sleep 3600")
		p.Spec.Containers[0].Image = image
		p.Spec.Containers[0].ImagePullPolicy = v1.PullIfNotPresent
		return p
	}

	runningPod(t, ns, pod("a"))
	waitEvent(t, ns, "a", v1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", image))
	waitEvent(t, ns, "a", v1.EventTypeNormal, "Pulled", fmt.Sprintf("Successfully pulled image %q", image))
	reqs := pluginRequests(t, requests)
	if len(reqs) == 0 {
		t.Fatal("the plugin was never run")
	}
	want := map[string]any{"apiVersion": "credentialprovider.kubelet.k8s.io/v1", "kind": "CredentialProviderRequest", "image": host + "/e2e/busybox"}
	if fmt.Sprint(reqs[0]) != fmt.Sprint(want) {
		t.Errorf("the plugin's request %v, want %v", reqs[0], want)
	}

	runningPod(t, ns, pod("b"))
	waitEvent(t, ns, "b", v1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine and can be accessed by the pod", image))
	noPulling(t, ns, "b")
}

// TestRegistryCredentialProviderServiceAccount: the plugin in service
// account token mode (tokenAttributes, requiring the annotation
// e2e.crivk.io/registry-access on the pod's service account), with the
// node's own identity (the Node authorizer lets it read its pods'
// service accounts and request tokens bound to them): a pod of an
// annotated service account pulls the private image with no pull
// secret, the plugin given a token for the configured audience bound to
// that pod and the annotation; a second pod of that service account runs
// the image present without a pull (the pulled record holds the service
// account); a pod of a service account without the annotation gets no
// credential (the plugin is not run for it) and the registry's refusal,
// ErrImagePull then ImagePullBackOff, and never runs.
func TestRegistryCredentialProviderServiceAccount(t *testing.T) {
	const audience, annotation = "crivk-e2e-registry", "e2e.crivk.io/registry-access"
	host, _, digest := registry(t)
	image := host + "/e2e/busybox:1.37.0-2"
	forgetBusyboxPulls(t)
	untagRegistryImage(t, image, host+"/e2e/busybox@"+digest)
	flags, requests := credentialPlugin(t, "e2e-registry-sa", fmt.Sprintf(`- name: %%s
  matchImages: [%q]
  defaultCacheDuration: 1m
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  tokenAttributes:
    serviceAccountTokenAudience: %s
    requireServiceAccount: true
    requiredServiceAccountAnnotationKeys: [%s]
    cacheType: ServiceAccount
`, host, audience, annotation), true)
	withCrivkFlags(t, nil, nil, flags...)
	ns := newNamespace(t)
	ctx := testContext(t, 30*time.Second)
	for name, ann := range map[string]map[string]string{"puller": {annotation: "yes"}, "outsider": nil} {
		sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann}}
		if _, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The API server's NodeRestriction lets a node request a token only
	// for an audience its pod's projected volumes name, or one the node
	// is granted (the verb request-serviceaccounts-token-audience on the
	// audience as resource): what a cluster admin grants the kubelet's
	// credential provider (KEP-4412), granted here to crivk's node.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "registry-audience"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{audience}, ResourceNames: []string{"puller"},
			Verbs: []string{"request-serviceaccounts-token-audience"}}}}
	if _, err := client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "registry-audience"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "system:node:" + nodeName}}}
	if _, err := client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := func(name, sa string) *v1.Pod {
		p := busyboxPod(name, v1.RestartPolicyAlways, "sleep 3600")
		p.Spec.Containers[0].Image = image
		p.Spec.Containers[0].ImagePullPolicy = v1.PullIfNotPresent
		p.Spec.ServiceAccountName = sa
		return p
	}

	a := runningPod(t, ns, pod("a", "puller"))
	waitEvent(t, ns, "a", v1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", image))
	waitEvent(t, ns, "a", v1.EventTypeNormal, "Pulled", fmt.Sprintf("Successfully pulled image %q", image))
	reqs := pluginRequests(t, requests)
	if len(reqs) == 0 {
		t.Fatal("the plugin was never run")
	}
	r := reqs[0]
	if r["image"] != host+"/e2e/busybox" || fmt.Sprint(r["serviceAccountAnnotations"]) != fmt.Sprintf("map[%s:yes]", annotation) {
		t.Errorf("the plugin's request: image %v, annotations %v", r["image"], r["serviceAccountAnnotations"])
	}
	tok, _ := r["serviceAccountToken"].(string)
	claims := jwtClaims(t, tok)
	k8s, _ := claims["kubernetes.io"].(map[string]any)
	podClaim, _ := k8s["pod"].(map[string]any)
	saClaim, _ := k8s["serviceaccount"].(map[string]any)
	if fmt.Sprint(claims["aud"]) != "["+audience+"]" || k8s["namespace"] != ns || podClaim["name"] != "a" || podClaim["uid"] != string(a.UID) || saClaim["name"] != "puller" {
		t.Errorf("the token's claims %v: want audience %s, bound to pod %s/a (%s) of service account puller", claims, audience, ns, a.UID)
	}

	runningPod(t, ns, pod("b", "puller"))
	waitEvent(t, ns, "b", v1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine and can be accessed by the pod", image))
	noPulling(t, ns, "b")

	before := len(pluginRequests(t, requests))
	createPod(t, ns, pod("c", "outsider"))
	seen := map[string]string{}
	ran := false
	waitPod(t, ns, "c", 90*time.Second, "ErrImagePull, then ImagePullBackOff", func(p *v1.Pod) bool {
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
	if ran {
		t.Error("pod c, of a service account without the annotation, ran the private image")
	}
	if msg := seen["ImagePullBackOff"]; !strings.HasPrefix(msg, fmt.Sprintf("Back-off pulling image %q", image)) {
		t.Errorf("pod c: ImagePullBackOff message %q", msg)
	}
	waitEvent(t, ns, "c", v1.EventTypeWarning, "Failed", fmt.Sprintf("Failed to pull image %q", image))
	if after := len(pluginRequests(t, requests)); after != before {
		t.Errorf("the plugin ran %d times for pod c, whose service account lacks %s", after-before, annotation)
	}
}

// jwtClaims are the claims of a JWT (not verified: the API server issued
// it to crivk, which passed it on).
func jwtClaims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("the plugin got no JWT: %q", token)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatalf("the token's claims: %v", err)
	}
	var claims map[string]any
	if err := json.Unmarshal(b, &claims); err != nil {
		t.Fatalf("the token's claims %q: %v", b, err)
	}
	return claims
}
