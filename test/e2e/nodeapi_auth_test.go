package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestNodeAPIAuth is the node API's security matrix, straight to crivk's
// port: no credentials, a certificate of another CA, a token without the
// right and one with it -> 401, 401, 403, 200; a 401 or 403 carries no
// pod data.
func TestNodeAPIAuth(t *testing.T) {
	t.Parallel() // pods of its own namespace only (parallelTests in main_test.go)
	ns := newNamespace(t)
	ctx := testContext(t, 2*time.Minute)
	pod := runningPod(t, ns, busyboxPod("secretive", v1.RestartPolicyNever, "sleep 3600"))
	url := "https://" + net.JoinHostPort(nodeIP, "10250") + "/pods"

	nobody := serviceAccountToken(t, ns, "nobody")
	reader := serviceAccountToken(t, ns, "reader")
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-node-pods"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/pods"}, Verbs: []string{"get"}}}}
	if _, err := client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := client.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("clean-up: deleting ClusterRole %s: %v", role.Name, err)
		}
	})
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "reader"}}}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := client.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("clean-up: deleting ClusterRoleBinding %s: %v", binding.Name, err)
		}
	})
	// RBAC reaches the API server's authorizer through its informers:
	// wait until the API says the reader may, before crivk is asked (its
	// denials are cached 30 s).
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		return canGetNodePods(ctx, ns, "reader")
	})
	if err != nil {
		t.Fatalf("the reader's binding never took effect: %v", err)
	}

	caPEM, err := os.ReadFile(os.Getenv("CA_CERT"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	plain := &tls.Config{RootCAs: roots}
	foreign := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{foreignClientCert(t)}}
	admin, err := tls.LoadX509KeyPair(filepath.Join(os.Getenv("LOCAL_DIR"), "pki", "admin.crt"), filepath.Join(os.Getenv("LOCAL_DIR"), "pki", "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	withAdmin := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{admin}}
	for _, tc := range []struct {
		name  string
		tls   *tls.Config
		token string
		code  int
	}{
		{"no credentials", plain, "", 401},
		{"certificate of another CA", foreign, "", 401},
		{"token without the right", plain, nobody, 403},
		{"token with the right", plain, reader, 200},
		{"the cluster CA's admin certificate", withAdmin, "", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: tc.tls}, Timeout: 20 * time.Second}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("GET %s: %v (a TLS failure instead of an HTTP answer?)", url, err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			t.Logf("%s: %d %.80q", tc.name, resp.StatusCode, body)
			if resp.StatusCode != tc.code {
				t.Fatalf("%d %q, want %d", resp.StatusCode, body, tc.code)
			}
			if has := strings.Contains(string(body), string(pod.UID)); has != (tc.code == 200) {
				t.Errorf("answer %d carries the pod's data: %v", tc.code, has)
			}
		})
	}
}

func serviceAccountToken(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	if _, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// canGetNodePods asks the API whether the service account may get
// nodes/pods of this node.
func canGetNodePods(ctx context.Context, ns, sa string) (bool, error) {
	return sarAllowed(ctx, "system:serviceaccount:"+ns+":"+sa, []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"})
}

func sarAllowed(ctx context.Context, user string, groups []string) (bool, error) {
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{User: user, Groups: groups,
		ResourceAttributes: &authzv1.ResourceAttributes{Verb: "get", Version: "v1", Resource: "nodes", Subresource: "pods", Name: nodeName}}}
	r, err := client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, nil
	}
	return r.Status.Allowed, nil
}

// foreignClientCert is a client certificate of a CA the node does not
// trust, with the name of a cluster administrator.
func foreignClientCert(t *testing.T) tls.Certificate {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "not-the-cluster-ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
