package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestServingCertificateThroughCSR restarts crivk with
// --rotate-server-certificates: it asks for its serving certificate with a
// CSR (signer kubernetes.io/kubelet-serving, system:node:<node>, the node's
// IP and name as SANs); while the CSR is pending, handshakes fail; once
// the test approves it (the cluster's decision, as for the kubelet) and
// the controller-manager signs it, the node port serves that certificate,
// verified against the cluster CA, and the API server's node proxy works.
func TestServingCertificateThroughCSR(t *testing.T) {
	started := time.Now()
	withCrivkFlags(t, nil, nil, "--rotate-server-certificates")
	ctx := testContext(t, 3*time.Minute)
	// The CSR crivk creates with its node identity.
	var csr *certificatesv1.CertificateSigningRequest
	err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		list, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for i := range list.Items {
			c := &list.Items[i]
			if c.Spec.SignerName == certificatesv1.KubeletServingSignerName && c.Spec.Username == "system:node:"+nodeName &&
				c.CreationTimestamp.Time.After(started.Add(-2*time.Second)) && len(c.Status.Conditions) == 0 {
				csr = c
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no pending %s CSR from system:node:%s", certificatesv1.KubeletServingSignerName, nodeName)
	}
	addr := nodeAPIAddress(t)
	if _, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}); err == nil {
		t.Errorf("a TLS handshake with %s succeeded while the serving CSR was pending", addr)
	} else {
		t.Logf("while the CSR %s is pending: %v", csr.Name, err)
	}
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue, Reason: "E2EApproved", Message: "approved by the crivk e2e test",
	})
	if _, err := client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("approving %s: %v", csr.Name, err)
	}
	approved := time.Now()
	roots := x509.NewCertPool()
	caPEM := restConfig.CAData
	if len(caPEM) == 0 {
		if caPEM, err = os.ReadFile(restConfig.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("the admin kubeconfig's CA holds no certificate")
	}
	var served *x509.Certificate
	var lastErr error
	err = wait.PollUntilContextCancel(ctx, poll, true, func(context.Context) (bool, error) {
		host, _, _ := net.SplitHostPort(addr)
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: host})
		if err != nil {
			lastErr = err
			return false, nil
		}
		defer conn.Close()
		served = conn.ConnectionState().PeerCertificates[0]
		return true, nil
	})
	if err != nil {
		t.Fatalf("the node API never served a certificate the cluster CA verifies for %s: %v", addr, lastErr)
	}
	t.Logf("serving certificate %s (issuer %s, IPs %v, DNS %v) served %s after the approval",
		served.Subject, served.Issuer, served.IPAddresses, served.DNSNames, time.Since(approved).Round(time.Millisecond))
	if served.Subject.CommonName != "system:node:"+nodeName {
		t.Errorf("serving certificate CN %q, want system:node:%s", served.Subject.CommonName, nodeName)
	}
	if err := served.VerifyHostname(nodeName); err != nil {
		t.Errorf("serving certificate does not name the node: %v", err)
	}
	if _, err := client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", nodeName, "proxy/healthz").DoRaw(ctx); err != nil {
		t.Errorf("the API server's node proxy to /healthz: %v", err)
	}
}

// nodeAPIAddress is the node's InternalIP and kubelet port.
func nodeAPIAddress(t *testing.T) string {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(testContext(t, 10*time.Second), nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			return net.JoinHostPort(a.Address, fmt.Sprint(n.Status.DaemonEndpoints.KubeletEndpoint.Port))
		}
	}
	t.Fatalf("node %s has no InternalIP", nodeName)
	return ""
}
