package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const poll = 200 * time.Millisecond

// newNamespace creates a namespace for one test; when the test ends it is
// deleted and waited for (deleteNamespace: its pods stopped and gone), a
// namespace that does not go failing the test. It waits for the default
// ServiceAccount, without which pods are refused.
func newNamespace(t *testing.T) string {
	t.Helper()
	ctx := testContext(t, time.Minute)
	name := "e2e-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	if len(name) > 50 {
		name = name[:50]
	}
	name += "-" + rand.String(5)
	_, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	recordNamespace(t, name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), namespaceGone+time.Minute)
		defer cancel()
		if err := deleteNamespace(ctx, name); err != nil {
			t.Errorf("clean-up: %v", err)
		}
	})
	keepTestEvidence(t, name) // runs before the deletion
	err = wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("default ServiceAccount of %s never appeared: %v", name, err)
	}
	return name
}

// busyboxPod returns a pod for this node running sh -c script.
func busyboxPod(name string, policy v1.RestartPolicy, script string) *v1.Pod {
	grace := int64(30)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": nodeName},
			RestartPolicy:                 policy,
			TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{
				Name:            "c",
				Image:           busybox,
				ImagePullPolicy: v1.PullIfNotPresent,
				Command:         []string{"sh", "-c", script},
			}},
		},
	}
}

func createPod(t *testing.T, ns string, pod *v1.Pod) *v1.Pod {
	t.Helper()
	p, err := client.CoreV1().Pods(ns).Create(testContext(t, 30*time.Second), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s: %v", pod.Name, err)
	}
	return p
}

// waitPod polls the pod until cond holds, failing the test with the last
// status seen after timeout.
func waitPod(t *testing.T, ns, name string, timeout time.Duration, what string, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	ctx := testContext(t, timeout)
	var last *v1.Pod
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = p
		return cond(p), nil
	})
	if err != nil {
		status := "<never seen>"
		if last != nil {
			status = fmt.Sprintf("%+v", last.Status)
		}
		t.Fatalf("pod %s/%s: waiting for %s: %v; last status: %s; %s", ns, name, what, err, status, nodeDigest(context.Background()))
	}
	return last
}

func waitGone(t *testing.T, ns, name string, timeout time.Duration) {
	t.Helper()
	ctx := testContext(t, timeout)
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s still exists after %s", ns, name, timeout)
	}
}

// runtimeObjects lists what the runtime still holds of a pod UID.
func runtimeObjects(t *testing.T, uid types.UID) (sandboxes, containers int) {
	t.Helper()
	sbs, cs := runtimeList(t, uid)
	return len(sbs), len(cs)
}

// runtimeList lists the pod's sandboxes and containers in the runtime.
func runtimeList(t *testing.T, uid types.UID) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
	t.Helper()
	ctx := testContext(t, 10*time.Second)
	sel := map[string]string{"io.kubernetes.pod.uid": string(uid)}
	sbs, err := runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		t.Fatalf("listing sandboxes: %v", err)
	}
	cs, err := runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		t.Fatalf("listing containers: %v", err)
	}
	return sbs, cs
}

// runtimeLive counts the pod's sandboxes that are still ready and its
// containers that are still running (or created, or unknown: not known
// to be stopped).
func runtimeLive(t *testing.T, uid types.UID) (readySandboxes, liveContainers int) {
	t.Helper()
	sbs, cs := runtimeList(t, uid)
	for _, sb := range sbs {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			readySandboxes++
		}
	}
	for _, c := range cs {
		if c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			liveContainers++
		}
	}
	return readySandboxes, liveContainers
}

func isRunningReady(p *v1.Pod) bool {
	if p.Status.Phase != v1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
