package helm

import (
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestHelmIdentityRBAC installs the chart with identity rbac (issue #32):
// crivk works as its ServiceAccount with the chart's ClusterRole, so no
// node client certificate is requested; its node registers Ready, a pod
// scheduled to it runs and serves its logs, and helm uninstall drains and
// removes the node. TestHelmBesideKubelet installed identity bootstrap.
func TestHelmIdentityRBAC(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t, 10*time.Minute)
	e.cleanStart(t, ctx)
	since := time.Now().Add(-time.Second)

	e.install(t, "--set", "identity=rbac")
	took := e.waitNodeReady(t, 3*time.Minute)
	t.Logf("helm install (identity rbac): node %s Ready %s later", e.crivkNode, took.Round(time.Millisecond))
	e.waitRuntime(t)

	if _, err := e.client.CoreV1().Pods(e.testNS).Create(ctx, e.pod("on-crivk-rbac", e.crivkNode, true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitPod(t, e.testNS, "on-crivk-rbac", 2*time.Minute, running)
	logs, err := e.client.CoreV1().Pods(e.testNS).GetLogs("on-crivk-rbac", &v1.PodLogOptions{}).DoRaw(ctx)
	if err != nil || !strings.Contains(string(logs), "hello from on-crivk-rbac") {
		t.Errorf("logs of the pod on %s (identity rbac): %q, %v", e.crivkNode, logs, err)
	}
	csrs, err := e.client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range csrs.Items {
		if r.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName && r.CreationTimestamp.After(since) {
			t.Errorf("identity rbac: CSR %s (%s, by %s) asks for a node client certificate; want crivk to work as its ServiceAccount", r.Name, r.Spec.SignerName, r.Spec.Username)
		}
	}

	e.uninstall(t, "--wait", "--timeout", "5m")
	if _, err := e.client.CoreV1().Nodes().Get(ctx, e.crivkNode, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node %s after helm uninstall (identity rbac): %v, want it deleted", e.crivkNode, err)
	}
	if _, err := e.client.CoreV1().Pods(e.testNS).Get(ctx, "on-crivk-rbac", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod on-crivk-rbac after helm uninstall (identity rbac): %v, want it drained", err)
	}
}
