package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// nodeCertPath is crivk's current client certificate and key
// (hack/run-crivk.sh: --root-dir=$LOCAL_DIR/crivk, TLS bootstrap).
func nodeCertPath() string {
	return filepath.Join(mustEnv("LOCAL_DIR"), "crivk", "pki", "crivk-client-current.pem")
}

// nodeCert parses crivk's current client certificate.
func nodeCert(t *testing.T) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(nodeCertPath())
	if err != nil {
		t.Fatalf("crivk's client certificate: %v", err)
	}
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			t.Fatalf("no certificate in %s", nodeCertPath())
		}
		if blk.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
	}
}

// nodeClient is a client with crivk's own credentials: the kubeconfig it
// wrote after its TLS bootstrap.
func nodeClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(mustEnv("LOCAL_DIR"), "crivk", "kubeconfig"))
	if err != nil {
		t.Fatalf("crivk's kubeconfig: %v", err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

// TestTLSBootstrap: crivk, started with only a bootstrap token, holds a
// system:node certificate from an approved CSR, written 0600 with a
// kubeconfig for it; with that identity under Node,RBAC and
// NodeRestriction it reads what its pods reference (every other e2e test
// runs pods through it) and is refused a Secret no pod of it references
// and a change to another node.
func TestTLSBootstrap(t *testing.T) {
	// crivk may still be bootstrapping (it was just started), and the file
	// may hold an expired certificate of an earlier run until it has.
	err := wait.PollUntilContextTimeout(context.Background(), poll, 60*time.Second, true, func(context.Context) (bool, error) {
		// The certificate is stored first, the kubeconfig written after.
		if _, err := os.Stat(nodeCertPath()); err != nil {
			return false, nil
		}
		if _, err := os.Stat(filepath.Join(mustEnv("LOCAL_DIR"), "crivk", "kubeconfig")); err != nil {
			return false, nil
		}
		return time.Now().Before(nodeCert(t).NotAfter), nil
	})
	if err != nil {
		t.Fatalf("no valid client certificate at %s with crivk's kubeconfig beside it 60 s after crivk started", nodeCertPath())
	}
	cert := nodeCert(t)
	if cert.Subject.CommonName != "system:node:"+nodeName || len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != "system:nodes" {
		t.Errorf("client certificate subject %s, want CN=system:node:%s, O=system:nodes", cert.Subject, nodeName)
	}
	for _, f := range []string{nodeCertPath(), filepath.Join(mustEnv("LOCAL_DIR"), "crivk", "kubeconfig")} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	ctx := testContext(t, time.Minute)
	csrs, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bootstrapped := false
	for _, c := range csrs.Items {
		if c.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName || !strings.HasPrefix(c.Spec.Username, "system:bootstrap:") {
			continue
		}
		for _, cond := range c.Status.Conditions {
			if cond.Type == certificatesv1.CertificateApproved && len(c.Status.Certificate) > 0 {
				bootstrapped = true
			}
		}
	}
	if !bootstrapped {
		t.Errorf("no approved and signed CSR of a bootstrap token user for %s among %d CSRs", certificatesv1.KubeAPIServerClientKubeletSignerName, len(csrs.Items))
	}

	nc := nodeClient(t)
	ns := newNamespace(t)
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "unreferenced"}, StringData: map[string]string{"k": "v"}}
	if _, err := client.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.CoreV1().Secrets(ns).Get(ctx, "unreferenced", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node reading a Secret no pod of it references: %v, want 403 Forbidden", err)
	}
	other := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "crivk-e2e-other-node"}}
	if _, err := client.CoreV1().Nodes().Create(ctx, other, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := client.CoreV1().Nodes().Delete(context.Background(), other.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("clean-up: deleting node %s: %v", other.Name, err)
		}
	})
	_, err = nc.CoreV1().Nodes().Patch(ctx, other.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"crivk-e2e":"x"}}}`), metav1.PatchOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("node changing another node: %v, want 403 Forbidden", err)
	}
	// Its own Node (registered by crivk once bootstrapped: the test may
	// start before that).
	var ownErr error
	_ = wait.PollUntilContextTimeout(ctx, poll, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, ownErr = nc.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		return ownErr == nil, nil
	})
	if ownErr != nil {
		t.Errorf("node reading its own Node: %v", ownErr)
	}
}

// TestClientCertificateRotation: the local cluster of `make test` signs
// certificates for 5 minutes (CSR_SIGNING_DURATION; the signer backdates
// them 5 minutes), so crivk's client certificate is renewed 2 to 4 minutes
// after it was issued (70-90 % of its 10-minute validity). The new
// one is picked up without a restart (same process) while a pod keeps
// running, and a pod created after the rotation runs.
func TestClientCertificateRotation(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	before := nodeCert(t)
	if ttl := before.NotAfter.Sub(before.NotBefore); ttl > time.Hour {
		if os.Getenv("CRIVK_E2E_ROTATION") == "1" {
			t.Fatalf("crivk's certificate is valid for %s: hack/test.sh should have made crivk bootstrap under a 5-minute signing duration", ttl)
		}
		t.Skipf("the cluster signs certificates for %s (CSR_SIGNING_DURATION not shortened): no rotation to see", ttl)
	}
	pid := crivkPID(t)
	p := runningPod(t, ns, busyboxPod("steady", v1.RestartPolicyAlways, "sleep 3600"))
	ctr := p.Status.ContainerStatuses[0].ContainerID
	var after *x509.Certificate
	start := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 5*time.Minute, true, func(context.Context) (bool, error) {
		after = nodeCert(t)
		return after.SerialNumber.Cmp(before.SerialNumber) != 0, nil
	})
	if err != nil {
		t.Fatalf("the client certificate (serial %s, not after %s) was not renewed in 5 minutes", before.SerialNumber, before.NotAfter)
	}
	t.Logf("client certificate renewed %s after the test started (old one valid until %s)", time.Since(start).Round(time.Second), before.NotAfter.Format(time.RFC3339))
	// Every connection of the old certificate is closed: the next requests
	// carry the new one; a new pod runs through them.
	runningPod(t, ns, busyboxPod("after-rotation", v1.RestartPolicyAlways, "sleep 3600"))
	if got := crivkPID(t); got != pid {
		t.Errorf("crivk pid %d, want the same %d (no restart)", got, pid)
	}
	p2, err := client.CoreV1().Pods(ns).Get(testContext(t, 10*time.Second), "steady", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cs := p2.Status.ContainerStatuses[0]; cs.ContainerID != ctr || cs.RestartCount != 0 {
		t.Errorf("steady pod container %s (restarts %d), want %s unrestarted", cs.ContainerID, cs.RestartCount, ctr)
	}
}
