package e2e

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// podDir is crivk's directory of pod uid on this machine (hack/run-crivk.sh
// gives crivk --root-dir=$LOCAL_DIR/crivk).
func podDir(uid types.UID) string {
	return filepath.Join(mustEnv("LOCAL_DIR"), "crivk", "pods", string(uid))
}

// mountsUnder lists the host's mount points below dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir) {
			out = append(out, fields[4])
		}
	}
	return out
}

func createConfigMap(t *testing.T, ns, name string, data map[string]string) *v1.ConfigMap {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps(ns).Create(testContext(t, 10*time.Second),
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func createSecret(t *testing.T, ns, name string, data map[string]string) *v1.Secret {
	t.Helper()
	s, err := client.CoreV1().Secrets(ns).Create(testContext(t, 10*time.Second),
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: data}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitLogs polls the pod's logs until cond holds.
func waitLogs(t *testing.T, ns, name string, timeout time.Duration, what string, cond func(string) bool) string {
	t.Helper()
	ctx := testContext(t, timeout)
	var last string
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		l, err := podLogs(ctx, ns, name, &v1.PodLogOptions{})
		if err != nil {
			return false, nil
		}
		last = l
		return cond(l), nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s: waiting for logs with %s: %v; last logs:\n%s", ns, name, what, err, last)
	}
	return last
}

// waitEventContains waits for an event of the pod with reason whose message
// contains substr.
func waitEventContains(t *testing.T, ns, pod, reason, substr string, timeout time.Duration) v1.Event {
	t.Helper()
	ctx := testContext(t, timeout)
	var found v1.Event
	var seen []string
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		l, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
		if err != nil {
			return false, nil
		}
		seen = seen[:0]
		for _, e := range l.Items {
			seen = append(seen, e.Reason+": "+e.Message)
			if e.Reason == reason && strings.Contains(e.Message, substr) {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s event containing %q for pod %s/%s; events: %q", reason, substr, ns, pod, seen)
	}
	return found
}

// TestVolumeTypes runs one pod with every volume type and checks, from
// inside the container, contents, modes, tmpfs backing, subPath and the
// API server's kube-api-access volume; its token is then used to call the
// API server.
func TestVolumeTypes(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	createConfigMap(t, ns, "cfg", map[string]string{"k1": "v1", "k2": "v2"})
	createSecret(t, ns, "sec", map[string]string{"user": "admin"})
	hostDir := t.TempDir()
	if err := os.Chmod(hostDir, 0o777); err != nil {
		t.Fatal(err)
	}
	dirOrCreate := v1.HostPathDirectoryOrCreate
	mode400 := int32(0o400)
	script := `set -e
check() { if [ "$1" != "$2" ]; then echo "FAIL: $3: got '$1' want '$2'"; exit 1; fi; }
check "$(cat /cm/k1)" v1 configmap-k1
check "$(cat /cmi/k2)" v2 configmap-item-path
check "$(stat -L -c %a /cmi/k2)" 400 configmap-item-mode
check "$(stat -L -c %a /cm/k1)" 644 configmap-default-mode
check "$(cat /k1-sub)" v1 configmap-subpath
check "$(cat /sec/user)" admin secret
check "$(awk '$2=="/sec"{print $3}' /proc/mounts)" tmpfs secret-on-tmpfs
check "$(awk '$2=="/mem"{print $3}' /proc/mounts)" tmpfs memory-emptydir
check "$(cat /dw/name)" vol-types downward-name
check "$(cat /dw/labels)" 'app="web"' downward-labels
check "$(cat /dw/mem)" 32 downward-limit-mib
echo shared > /ed/file
check "$(cat /ed/file)" shared emptydir
echo from-pod > /host/sub/file
check "$(cat /var/run/secrets/kubernetes.io/serviceaccount/namespace)" "$NS" kube-api-access-namespace
test -s /var/run/secrets/kubernetes.io/serviceaccount/ca.crt || { echo "FAIL: no ca.crt"; exit 1; }
if touch /cm/new 2>/dev/null; then echo "FAIL: configmap volume writable"; exit 1; fi
echo "TOKEN $(cat /var/run/secrets/kubernetes.io/serviceaccount/token)"
echo ALL-OK`
	pod := busyboxPod("vol-types", v1.RestartPolicyNever, script)
	pod.Labels = map[string]string{"app": "web"}
	c := &pod.Spec.Containers[0]
	c.Env = []v1.EnvVar{{Name: "NS", Value: ns}}
	c.Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("32Mi")}
	c.VolumeMounts = []v1.VolumeMount{
		{Name: "cm", MountPath: "/cm"},
		{Name: "cm-items", MountPath: "/cmi"},
		{Name: "cm", MountPath: "/k1-sub", SubPath: "k1"},
		{Name: "sec", MountPath: "/sec"},
		{Name: "mem", MountPath: "/mem"},
		{Name: "ed", MountPath: "/ed"},
		{Name: "dw", MountPath: "/dw"},
		{Name: "host", MountPath: "/host/sub", SubPath: "sub"},
	}
	pod.Spec.Volumes = []v1.Volume{
		{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
		{Name: "cm-items", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"},
			Items: []v1.KeyToPath{{Key: "k2", Path: "k2", Mode: &mode400}}}}},
		{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec"}}},
		{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: resource.NewQuantity(1<<20, resource.BinarySI)}}},
		{Name: "ed", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "dw", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
			{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
			{Path: "mem", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}},
		}}}},
		{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: hostDir, Type: &dirOrCreate}}},
	}
	created := createPod(t, ns, pod)
	p := waitPod(t, ns, pod.Name, 90*time.Second, "finished", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
	})
	logs, _ := podLogs(testContext(t, 10*time.Second), ns, pod.Name, &v1.PodLogOptions{})
	if p.Status.Phase != v1.PodSucceeded || !strings.Contains(logs, "ALL-OK") {
		t.Fatalf("pod %s; logs:\n%s", p.Status.Phase, logs)
	}
	if b, err := os.ReadFile(filepath.Join(hostDir, "sub", "file")); err != nil || string(b) != "from-pod\n" {
		t.Errorf("hostPath subPath file on the host: %q, %v", b, err)
	}

	// The projected token is bound to the pod and accepted by the API
	// server.
	var token string
	for _, line := range strings.Split(logs, "\n") {
		if rest, ok := strings.CutPrefix(line, "TOKEN "); ok {
			token = strings.TrimSpace(rest)
		}
	}
	if token == "" {
		t.Fatal("no token in the logs")
	}
	cfg := &rest.Config{Host: mustEnv("APISERVER_URL"), BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAFile: mustEnv("CA_CERT")}}
	podClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ssr, err := podClient.AuthenticationV1().SelfSubjectReviews().Create(testContext(t, 10*time.Second), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("calling the API server with the pod's token: %v", err)
	}
	if want := "system:serviceaccount:" + ns + ":default"; ssr.Status.UserInfo.Username != want {
		t.Errorf("token user %q, want %q", ssr.Status.UserInfo.Username, want)
	}
	if got := ssr.Status.UserInfo.Extra["authentication.kubernetes.io/pod-uid"]; len(got) != 1 || got[0] != string(created.UID) {
		t.Errorf("token not bound to the pod: extra %v", ssr.Status.UserInfo.Extra)
	}

	// Succeeded: the volumes of the terminated pod are gone from the node.
	ctx := testContext(t, 30*time.Second)
	err = wait.PollUntilContextCancel(ctx, poll, true, func(context.Context) (bool, error) {
		_, err := os.Stat(podDir(created.UID))
		return os.IsNotExist(err), nil
	})
	if err != nil {
		t.Errorf("pod directory %s still there after the pod succeeded; mounts: %v", podDir(created.UID), mountsUnder(t, podDir(created.UID)))
	}
}

// TestVolumeLiveUpdate: changes to a ConfigMap, a Secret and the pod's
// labels reach the mounted files of a running pod within seconds.
func TestVolumeLiveUpdate(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := createConfigMap(t, ns, "cfg", map[string]string{"k": "cm-1"})
	sec := createSecret(t, ns, "sec", map[string]string{"k": "sec-1"})
	pod := busyboxPod("live", v1.RestartPolicyAlways,
		`while true; do echo "$(cat /cm/k) $(cat /sec/k) $(cat /dw/labels | tr '\n' ,)"; sleep 0.5; done`)
	pod.Labels = map[string]string{"v": "1"}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "cm", MountPath: "/cm"}, {Name: "sec", MountPath: "/sec"}, {Name: "dw", MountPath: "/dw"}}
	pod.Spec.Volumes = []v1.Volume{
		{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
		{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec"}}},
		{Name: "dw", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}},
	}
	createPod(t, ns, pod)
	waitPod(t, ns, pod.Name, 60*time.Second, "Running", isRunningReady)
	lastLine := func(l string) string {
		lines := strings.Split(strings.TrimSpace(l), "\n")
		return lines[len(lines)-1]
	}
	waitLogs(t, ns, pod.Name, 20*time.Second, "the first version", func(l string) bool { return lastLine(l) == `cm-1 sec-1 v="1"` })

	ctx := testContext(t, 30*time.Second)
	start := time.Now()
	cm.Data["k"] = "cm-2"
	if _, err := client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	sec.StringData = map[string]string{"k": "sec-2"}
	if _, err := client.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Labels["v"] = "2"
	if _, err := client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitLogs(t, ns, pod.Name, 30*time.Second, "the updated ConfigMap, Secret and labels", func(l string) bool { return lastLine(l) == `cm-2 sec-2 v="2"` })
	t.Logf("updates visible in the container after %v", time.Since(start).Round(100*time.Millisecond))
}

// TestVolumeMissingObject: a pod referencing a missing ConfigMap stays in
// ContainerCreating with a FailedMount event naming it, and starts soon
// after the ConfigMap is created.
func TestVolumeMissingObject(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	pod := busyboxPod("missing", v1.RestartPolicyAlways, `cat /cm/k; echo; exec sleep 3600`)
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "cm", MountPath: "/cm"}}
	pod.Spec.Volumes = []v1.Volume{{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "later"}}}}}
	createPod(t, ns, pod)
	waitEventContains(t, ns, pod.Name, "FailedMount", `MountVolume.SetUp failed for volume "cm" : configmap "later" not found`, 30*time.Second)
	p := waitPod(t, ns, pod.Name, 10*time.Second, "ContainerCreating", func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil
	})
	if w := p.Status.ContainerStatuses[0].State.Waiting; p.Status.Phase != v1.PodPending || w.Reason != "ContainerCreating" {
		t.Fatalf("phase %s, waiting %+v; want Pending, ContainerCreating", p.Status.Phase, w)
	}
	start := time.Now()
	createConfigMap(t, ns, "later", map[string]string{"k": "here"})
	waitPod(t, ns, pod.Name, 30*time.Second, "Running after the ConfigMap appeared", isRunningReady)
	t.Logf("pod running %v after the ConfigMap was created", time.Since(start).Round(100*time.Millisecond))
	waitLogs(t, ns, pod.Name, 10*time.Second, "the ConfigMap's value", func(l string) bool { return strings.Contains(l, "here") })
}

// TestVolumeHostPathTypeMismatch: a hostPath whose type check fails gives
// a FailedMount event with the kubelet's message.
func TestVolumeHostPathTypeMismatch(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	dir := t.TempDir()
	fileType := v1.HostPathFile
	pod := busyboxPod("hostpath-file", v1.RestartPolicyAlways, `exec sleep 3600`)
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "h", MountPath: "/h"}}
	pod.Spec.Volumes = []v1.Volume{{Name: "h", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir, Type: &fileType}}}}
	createPod(t, ns, pod)
	waitEventContains(t, ns, pod.Name, "FailedMount", "hostPath type check failed: "+dir+" is not a file", 30*time.Second)
}

// TestVolumeCleanup: once a pod with tmpfs-backed volumes is deleted,
// nothing of it stays on the node: no mount, no directory.
func TestVolumeCleanup(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	createSecret(t, ns, "sec", map[string]string{"k": "v"})
	pod := busyboxPod("cleanup", v1.RestartPolicyAlways, `echo x > /mem/f; exec sleep 3600`)
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "mem", MountPath: "/mem"}, {Name: "sec", MountPath: "/sec"}}
	pod.Spec.Volumes = []v1.Volume{
		{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
		{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec"}}},
	}
	created := createPod(t, ns, pod)
	waitPod(t, ns, pod.Name, 60*time.Second, "Running", isRunningReady)
	dir := podDir(created.UID)
	if m := mountsUnder(t, dir); len(m) < 2 {
		t.Fatalf("mounts of the running pod: %v, want the two tmpfs volumes and the kube-api-access one", m)
	}
	if err := client.CoreV1().Pods(ns).Delete(testContext(t, 10*time.Second), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ns, pod.Name, 60*time.Second)
	// virtual-kubelet deletes the API object as soon as the pod's status is
	// terminal; the volumes go right after.
	ctx := testContext(t, 15*time.Second)
	err := wait.PollUntilContextCancel(ctx, poll, true, func(context.Context) (bool, error) {
		_, err := os.Stat(dir)
		return len(mountsUnder(t, dir)) == 0 && os.IsNotExist(err), nil
	})
	if err != nil {
		_, statErr := os.Stat(dir)
		t.Errorf("15 s after the deletion: mounts left %v, pod directory: %v", mountsUnder(t, dir), statErr)
	}
}

// TestVolumeTokenRefresh: a projected token with the shortest expiration
// the API server allows (10 min) is renewed at 80% of its lifetime, and the
// new token reaches the container. Takes about 8 minutes; skipped with
// -short.
func TestVolumeTokenRefresh(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 8 minutes")
	}
	t.Parallel()
	ns := newNamespace(t)
	exp := int64(600)
	pod := busyboxPod("token", v1.RestartPolicyAlways, `while true; do echo "$(md5sum < /tok/token)"; sleep 1; done`)
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "tok", MountPath: "/tok"}}
	pod.Spec.Volumes = []v1.Volume{{Name: "tok", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
		{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", Audience: "e2e", ExpirationSeconds: &exp}}}}}}}
	createPod(t, ns, pod)
	waitPod(t, ns, pod.Name, 60*time.Second, "Running", isRunningReady)
	start := time.Now()
	first := strings.TrimSpace(waitLogs(t, ns, pod.Name, 20*time.Second, "a token", func(l string) bool { return strings.TrimSpace(l) != "" }))
	first = strings.Split(first, "\n")[0]
	waitLogs(t, ns, pod.Name, 9*time.Minute, "a renewed token", func(l string) bool {
		lines := strings.Split(strings.TrimSpace(l), "\n")
		return lines[len(lines)-1] != first
	})
	if d := time.Since(start); d < 7*time.Minute {
		t.Errorf("token renewed after %v, before 80%% of its 10 min lifetime", d)
	}
	t.Logf("token renewed after %v", time.Since(start).Round(time.Second))
}

// TestVolumeNodeCredentialsSuffice: what apiobjects.Reader does (get and
// watch, by name, the ConfigMaps and Secrets the node's pods reference;
// TokenRequest for their service accounts) is allowed to the node's own
// identity (system:node:<name>, Node authorizer), while reading objects no
// pod of the node references, or listing Secrets, is not: crivk needs no
// cluster-wide access to Secrets.
func TestVolumeNodeCredentialsSuffice(t *testing.T) {
	t.Parallel()
	kc := os.Getenv("NODE_KUBECONFIG")
	if kc == "" {
		t.Skip("NODE_KUBECONFIG not set")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	nodeClient := kubernetes.NewForConfigOrDie(cfg)
	ns := newNamespace(t)
	createSecret(t, ns, "used", map[string]string{"k": "v"})
	createSecret(t, ns, "unused", map[string]string{"k": "v"})
	pod := busyboxPod("refs", v1.RestartPolicyAlways, `exec sleep 3600`)
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "s", MountPath: "/s"}}
	pod.Spec.Volumes = []v1.Volume{{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "used"}}}}
	created := createPod(t, ns, pod)
	waitPod(t, ns, pod.Name, 60*time.Second, "Running", isRunningReady)
	ctx := testContext(t, 30*time.Second)

	if _, err := nodeClient.CoreV1().Secrets(ns).Get(ctx, "used", metav1.GetOptions{}); err != nil {
		t.Errorf("node identity cannot get a Secret its pod references: %v", err)
	}
	w, err := nodeClient.CoreV1().Secrets(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=used"})
	if err != nil {
		t.Errorf("node identity cannot watch a Secret its pod references by name: %v", err)
	} else {
		w.Stop()
	}
	exp := int64(600)
	_, err = nodeClient.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "default", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &exp,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: created.Name, UID: created.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Errorf("node identity cannot request a token bound to its pod: %v", err)
	}
	if _, err := nodeClient.CoreV1().Secrets(ns).Get(ctx, "unused", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node identity got a Secret no pod of it references: err %v", err)
	}
	if _, err := nodeClient.CoreV1().Secrets("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node identity may list every Secret: err %v", err)
	}
}
