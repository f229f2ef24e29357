package helm

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// clientCertSubjects returns the subjects of the client certificates under
// the root dir's pki/ (the node's TLS bootstrap store, crivk-client-*.pem).
func clientCertSubjects() []string {
	files, _ := filepath.Glob(filepath.Join(crivkRootDir, "pki", "crivk-client-*.pem"))
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, c := range certsIn(b) {
			out = append(out, c.Subject.CommonName)
		}
	}
	return out
}

// TestHelmReinstallOtherNodeName (issue #34): the chart installed,
// uninstalled, and installed again with another nodeName over the root dir
// the first install left (its client certificate and kubeconfig of the
// first node name); the new node registers Ready, and the old one stays
// gone. TestHelmBesideKubelet leaves such a root dir; run alone, the test
// makes one first.
func TestHelmReinstallOtherNodeName(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t, 12*time.Minute)
	e.cleanStart(t, ctx)
	oldNode := e.crivkNode
	hasOld := func() bool {
		for _, s := range clientCertSubjects() {
			if s == "system:node:"+oldNode {
				return true
			}
		}
		return false
	}
	if !hasOld() {
		t.Logf("no certificate of system:node:%s under %s: installing and uninstalling once to leave one", oldNode, crivkRootDir)
		e.install(t)
		e.waitNodeReady(t, 3*time.Minute)
		e.uninstall(t, "--wait", "--timeout", "5m")
		if !hasOld() {
			t.Fatalf("after an install as node %s, %s holds client certificates of %v, want one of system:node:%s\n%s", oldNode, crivkRootDir, clientCertSubjects(), oldNode, describeRootDir(crivkRootDir))
		}
	}
	t.Logf("the root dir left by node %s:\n%s", oldNode, describeRootDir(crivkRootDir))

	e.crivkNode = "crivk-b-" + e.machine
	e.install(t, "--set", "nodeName=crivk-b-$(MACHINE)")
	took := e.waitNodeReady(t, 3*time.Minute)
	t.Logf("helm install with nodeName crivk-b-$(MACHINE) over the root dir of %s: node %s Ready %s later; client certificates now %v",
		oldNode, e.crivkNode, took.Round(time.Millisecond), clientCertSubjects())
	if _, err := e.client.CoreV1().Nodes().Get(ctx, oldNode, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the old node %s after the install as %s: %v, want it gone", oldNode, e.crivkNode, err)
	}
	e.uninstall(t, "--wait", "--timeout", "5m")
	if _, err := e.client.CoreV1().Nodes().Get(ctx, e.crivkNode, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node %s after helm uninstall: %v, want it deleted", e.crivkNode, err)
	}
}

// conflictLine matches a line of crivk's log that names a root dir of
// another cluster or node as the reason it exits: a word of conflict and
// what conflicts, in either order, on one line (not a TLS error alone).
var conflictLine = regexp.MustCompile(`(?i)\b(another|different|other|foreign|stale|conflict\w*|does not verify|not signed by)\b[^\n]*\b(cluster|CA|root[- ]?dir|certificate|kubeconfig)\b|\b(cluster|CA|root[- ]?dir|certificate|kubeconfig)\b[^\n]*\b(another|different|foreign|stale|conflict\w*|does not verify|not signed by)\b`)

func TestConflictLine(t *testing.T) {
	for line, want := range map[string]bool{
		`level=fatal msg="the client certificate /var/lib/crivk/pki/crivk-client-current.pem is another cluster's (a certificate for system:node:n issued by CN=x, which the API server refuses)"`: true,
		`error: --root-dir /var/lib/crivk holds the identity of a different cluster`:                                                                                                               true,
		`the certificate under the root dir conflicts with this cluster's CA`:                                                                                                                      true,
		`"Failed to watch" err="failed to list *v1.Node: Get \"https://192.0.2.2:6443/api/v1/nodes\": tls: failed to verify certificate: x509: certificate signed by unknown authority"`:           false,
		`Operation cannot be fulfilled on leases.coordination.k8s.io "n": the object has been modified; please apply your changes to the latest version and try again`:                             false,
		`node API: unauthenticated request error=Unauthorized path=/healthz`:                                                                                                                       false,
	} {
		if got := conflictLine.MatchString(line); got != want {
			t.Errorf("conflictLine on %q: %v, want %v", line, got, want)
		}
	}
}

// TestHelmRootDirOfAnotherCluster (issue #34): the chart installed on a
// machine whose root dir holds another cluster's node identity (a
// kubeconfig for the same API server address whose CA is another
// cluster's, and a client certificate of this node name that CA signed:
// what a cluster recreated at the same address leaves). crivk must either
// start afresh (its node Ready) or exit with a message naming the conflict.
func TestHelmRootDirOfAnotherCluster(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t, 10*time.Minute)
	e.cleanStart(t, ctx)
	if err := emptyDir(crivkRootDir); err != nil {
		t.Fatal(err)
	}
	ca := writeAnotherClustersIdentity(t, crivkRootDir, e.crivkNode, e.cfg.Host)
	t.Logf("%s holds the identity of node %s in another cluster (CA %q):\n%s", crivkRootDir, e.crivkNode, ca, describeRootDir(crivkRootDir))

	e.install(t)
	start := time.Now()
	var outcome, last string
	err := wait.PollUntilContextTimeout(ctx, poll, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := e.client.CoreV1().Nodes().Get(ctx, e.crivkNode, metav1.GetOptions{})
		if err == nil {
			for _, c := range n.Status.Conditions {
				if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue {
					outcome = "started afresh: node " + e.crivkNode + " Ready"
					return true, nil
				}
			}
		}
		pods, err := e.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=crivk"})
		if err != nil {
			return false, nil
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			for _, s := range p.Status.ContainerStatuses {
				if s.Name != "crivk" {
					continue
				}
				last = fmt.Sprintf("container crivk restartCount %d, %s", s.RestartCount, lastExit(s))
				// An exit of crivk's own: non-zero (the kubelet's liveness
				// kill ends in a clean exit, or 137), the conflict named in
				// the last lines of that instance's log.
				term, previous := s.State.Terminated, false
				if term == nil {
					term, previous = s.LastTerminationState.Terminated, true
				}
				if term == nil || term.ExitCode == 0 || term.ExitCode == 137 {
					continue
				}
				for _, l := range strings.Split(e.logTail(ctx, p, "crivk", previous, 5), "\n") {
					if conflictLine.MatchString(l) {
						outcome = fmt.Sprintf("exited (code %d) naming the conflict: %s", term.ExitCode, strings.TrimSpace(l))
						return true, nil
					}
				}
			}
		}
		return false, nil
	})
	if err != nil {
		p := e.daemonSetPod(t)
		t.Fatalf("crivk over a root dir of another cluster: neither its node %s Ready nor an exit naming the conflict within 2m (%s); the last lines of its log:\n%s",
			e.crivkNode, last, e.logTail(ctx, p, "crivk", false, 10))
	}
	t.Logf("crivk over a root dir of another cluster, after %s: %s", time.Since(start).Round(time.Millisecond), outcome)
	e.uninstall(t, "--wait", "--timeout", "5m")
	if err := emptyDir(crivkRootDir); err != nil {
		t.Error(err)
	}
}

// emptyDir removes what dir holds, keeping dir (a mount point here).
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, en := range entries {
		if err := os.RemoveAll(filepath.Join(dir, en.Name())); err != nil {
			return err
		}
	}
	return nil
}

// writeAnotherClustersIdentity writes under root what crivk's TLS
// bootstrap leaves, but of another cluster at the same server: a throw-away
// CA, a client certificate of system:node:<node> it signed (with its key)
// in pki/crivk-client-<date>.pem with the crivk-client-current.pem symlink,
// and the kubeconfig using it. It returns the CA's subject.
func writeAnotherClustersIdentity(t *testing.T, root, node, server string) string {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another-cluster-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pki := filepath.Join(root, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		t.Fatal(err)
	}
	pair := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})...)
	// As client-go's certificate store leaves it: a dated file and the
	// crivk-client-current.pem symlink to it.
	dated := filepath.Join(pki, "crivk-client-"+now.Add(-time.Hour).UTC().Format("2006-01-02-15-04-05")+".pem")
	if err := os.WriteFile(dated, pair, 0o600); err != nil {
		t.Fatal(err)
	}
	certFile := filepath.Join(pki, "crivk-client-current.pem")
	if err := os.Symlink(dated, certFile); err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["default-cluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}
	kc.AuthInfos["default-auth"] = &clientcmdapi.AuthInfo{ClientCertificate: certFile, ClientKey: certFile}
	kc.Contexts["default-context"] = &clientcmdapi.Context{Cluster: "default-cluster", AuthInfo: "default-auth"}
	kc.CurrentContext = "default-context"
	if err := clientcmd.WriteToFile(*kc, filepath.Join(root, "kubeconfig")); err != nil {
		t.Fatal(err)
	}
	return caCert.Subject.String()
}
