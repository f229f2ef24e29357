package certificate

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	logruslogger "github.com/virtual-kubelet/virtual-kubelet/log/logrus"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	certmgr "k8s.io/client-go/util/certificate"
)

// testCA is a cluster's client CA: it signs node client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T, cn string) *testCA {
	t.Helper()
	key, _ := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	cert, _ := createCert(t, tmpl, tmpl, &key.PublicKey, key)
	return &testCA{cert: cert, key: key}
}

// clientTemplate is a client certificate for subject, valid until notAfter.
func clientTemplate(subject pkix.Name, notAfter time.Time) *x509.Certificate {
	return &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: subject,
		NotBefore: time.Now().Add(-time.Minute), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
}

// issue returns a certificate for cn signed by ca and its key, in PEM.
func (ca *testCA) issue(t *testing.T, cn string, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key, keyPEM := newKey(t)
	_, certPEM = createCert(t, clientTemplate(pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}}, notAfter), ca.cert, &key.PublicKey, ca.key)
	return certPEM, keyPEM
}

func (ca *testCA) pair(t *testing.T, cn string, notAfter time.Time) *tls.Certificate {
	t.Helper()
	c, k := ca.issue(t, cn, notAfter)
	pair, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return &pair
}

const testBootstrapToken = "abcdef.0123456789abcdef"

// fakeAPI is an API server for the TLS bootstrap: it authenticates client
// certificates of its CA (401 for any other, as kube-apiserver) and the
// bootstrap token, serves /version, and signs and approves every CSR at
// once, recording who asked for which name.
type fakeAPI struct {
	srv  *httptest.Server
	ca   *testCA
	stop chan struct{}

	mu   sync.Mutex
	csrs []certificatesv1.CertificateSigningRequest // guarded by mu
	// requests holds "requester -> subject" per CSR created; guarded by mu.
	requests []string
}

func newFakeAPI(t *testing.T, ca *testCA) *fakeAPI {
	t.Helper()
	f := &fakeAPI{ca: ca, stop: make(chan struct{})}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	f.srv.StartTLS()
	t.Cleanup(func() { close(f.stop); f.srv.Close() })
	return f
}

func (f *fakeAPI) created() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}

// bootstrapKubeconfig writes a bootstrap kubeconfig for the fake server.
func (f *fakeAPI) bootstrapKubeconfig(t *testing.T, dir string) string {
	t.Helper()
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw}))
	return write(t, filepath.Join(dir, "bootstrap.kubeconfig"), []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    certificate-authority-data: "+ca+"\n    server: "+f.srv.URL+"\nusers:\n- name: u\n  user:\n    token: "+testBootstrapToken+"\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"))
}

func (f *fakeAPI) user(r *http.Request) (string, bool) {
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		pool := x509.NewCertPool()
		pool.AddCert(f.ca.cert)
		peer := r.TLS.PeerCertificates[0]
		if _, err := peer.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			return "", false
		}
		return peer.Subject.CommonName, true
	}
	if r.Header.Get("Authorization") == "Bearer "+testBootstrapToken {
		return "system:bootstrap:abcdef", true
	}
	return "", false
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	user, ok := f.user(r)
	if !ok {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}`))
		return
	}
	switch {
	case r.URL.Path == "/version":
		_, _ = w.Write([]byte(`{"major":"1","minor":"35","gitVersion":"v1.35.4"}`))
	case r.URL.Path == "/apis/certificates.k8s.io/v1/certificatesigningrequests" && r.Method == http.MethodPost:
		f.create(w, r, user)
	case r.URL.Path == "/apis/certificates.k8s.io/v1/certificatesigningrequests" && r.URL.Query().Get("watch") == "true":
		f.watch(w, r)
	case r.URL.Path == "/apis/certificates.k8s.io/v1/certificatesigningrequests":
		_ = json.NewEncoder(w).Encode(f.list(r))
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
	}
}

// create signs the CSR and approves it.
func (f *fakeAPI) create(w http.ResponseWriter, r *http.Request, user string) {
	// client-go sends built-in types as protobuf.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
	if !ok {
		http.Error(w, fmt.Sprintf("%T is not a CertificateSigningRequest", obj), http.StatusBadRequest)
		return
	}
	blk, _ := pem.Decode(csr.Spec.Request)
	if blk == nil {
		http.Error(w, "no PEM request", http.StatusBadRequest)
		return
	}
	req, err := x509.ParseCertificateRequest(blk.Bytes)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	_, certPEM, err := signPEM(clientTemplate(req.Subject, time.Now().Add(time.Hour)), f.ca.cert, req.PublicKey, f.ca.key)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	f.mu.Lock()
	n := len(f.csrs) + 1
	csr.TypeMeta = metav1.TypeMeta{Kind: "CertificateSigningRequest", APIVersion: "certificates.k8s.io/v1"}
	csr.Name, csr.UID, csr.ResourceVersion = fmt.Sprintf("csr-%d", n), types.UID(fmt.Sprintf("uid-%d", n)), fmt.Sprint(n)
	csr.Spec.Username = user
	csr.Status.Certificate = certPEM
	csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue}}
	f.csrs = append(f.csrs, *csr)
	f.requests = append(f.requests, user+" -> "+req.Subject.CommonName)
	f.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(csr)
}

// list honours a metadata.name field selector.
func (f *fakeAPI) list(r *http.Request) *certificatesv1.CertificateSigningRequestList {
	name := strings.TrimPrefix(r.URL.Query().Get("fieldSelector"), "metadata.name=")
	f.mu.Lock()
	defer f.mu.Unlock()
	l := &certificatesv1.CertificateSigningRequestList{TypeMeta: metav1.TypeMeta{Kind: "CertificateSigningRequestList", APIVersion: "certificates.k8s.io/v1"}}
	l.ResourceVersion = fmt.Sprint(len(f.csrs))
	for _, c := range f.csrs {
		if name == "" || c.Name == name {
			l.Items = append(l.Items, c)
		}
	}
	return l
}

// watch sends the listed CSRs as ADDED (and, for a watch-list request, the
// bookmark that ends the initial events), then holds the stream open.
func (f *fakeAPI) watch(w http.ResponseWriter, r *http.Request) {
	enc := json.NewEncoder(w)
	l := f.list(r)
	for _, c := range l.Items {
		_ = enc.Encode(map[string]any{"type": "ADDED", "object": c})
	}
	if r.URL.Query().Get("sendInitialEvents") == "true" {
		_ = enc.Encode(map[string]any{"type": "BOOKMARK", "object": map[string]any{
			"kind": "CertificateSigningRequest", "apiVersion": "certificates.k8s.io/v1",
			"metadata": map[string]any{"resourceVersion": l.ResourceVersion, "annotations": map[string]string{metav1.InitialEventsAnnotationKey: "true"}},
		}})
	}
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
	select {
	case <-r.Context().Done():
	case <-f.stop:
	}
}

// TestCheckLeftover: the verdict on a left-over client certificate, from
// its name and from the current API server's answer.
func TestCheckLeftover(t *testing.T) {
	cluster, other := newTestCA(t, "cluster-ca"), newTestCA(t, "other-cluster-ca")
	api := newFakeAPI(t, cluster)
	current, err := clientcmd.BuildConfigFromFlags("", api.bootstrapKubeconfig(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	failing := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer failing.Close()
	failingCfg := &rest.Config{Host: failing.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	closed := httptest.NewTLSServer(http.NotFoundHandler())
	closedCfg := &rest.Config{Host: closed.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	closed.Close()
	in := time.Now().Add(time.Hour)
	for name, tc := range map[string]struct {
		cert         *tls.Certificate
		current      *rest.Config
		want         leftover
		inconclusive bool
	}{
		"no certificate":           {nil, current, leftoverNone, false},
		"expired":                  {cluster.pair(t, "system:node:n", time.Now().Add(-time.Second)), current, leftoverNone, false},
		"this node, this cluster":  {cluster.pair(t, "system:node:n", in), current, leftoverUsable, false},
		"another node":             {cluster.pair(t, "system:node:old", in), current, leftoverOtherNode, false},
		"another node, no server":  {cluster.pair(t, "system:node:old", in), nil, leftoverOtherNode, false},
		"another cluster":          {other.pair(t, "system:node:n", in), current, leftoverOtherCluster, false},
		"no bootstrap kubeconfig":  {other.pair(t, "system:node:n", in), nil, leftoverUsable, false},
		"API server unreachable":   {other.pair(t, "system:node:n", in), closedCfg, leftoverUsable, true},
		"API server fails (5xx)":   {other.pair(t, "system:node:n", in), failingCfg, leftoverUsable, true},
		"not a node's certificate": {cluster.pair(t, "admin", in), current, leftoverOtherNode, false},
	} {
		t.Run(name, func(t *testing.T) {
			got, detail, inconclusive := checkLeftover(context.Background(), tc.cert, "n", tc.current)
			if got != tc.want || (inconclusive != nil) != tc.inconclusive {
				t.Errorf("verdict %s (%s), inconclusive %v; want %s, inconclusive %v", got, detail, inconclusive, tc.want, tc.inconclusive)
			}
			if got.stale() && detail == "" {
				t.Error("a stale verdict without the detail the log line names")
			}
		})
	}
}

// TestNodeClientConfigStartsAfresh: a root dir left by another node name
// or another cluster (a valid certificate in <root-dir>/pki and a
// kubeconfig for it) is detected at start, named in one log line, and
// replaced: a new CSR for this node is made with the bootstrap credential
// and --kubeconfig is written for this cluster. The node's own certificate
// of this cluster is used as it is, without a CSR.
func TestNodeClientConfigStartsAfresh(t *testing.T) {
	cluster, other := newTestCA(t, "cluster-ca"), newTestCA(t, "other-cluster-ca")
	for name, tc := range map[string]struct {
		ca      *testCA // signed the left-over certificate
		cn      string  // its subject
		oldHost string  // the left-over kubeconfig's server ("": the fake's)
		wantCSR bool
		wantLog string
	}{
		"this node of this cluster": {ca: cluster, cn: "system:node:n"},
		"another node":              {ca: cluster, cn: "system:node:old", wantCSR: true, wantLog: "another node's (a certificate for system:node:old, not system:node:n)"},
		"another cluster":           {ca: other, cn: "system:node:n", oldHost: "https://192.0.2.1:6443", wantCSR: true, wantLog: `another cluster's (a certificate for system:node:n issued by CN=other-cluster-ca, which the API server`},
	} {
		t.Run(name, func(t *testing.T) {
			api := newFakeAPI(t, cluster)
			dir := t.TempDir()
			certDir, kubeconfig := filepath.Join(dir, "pki"), filepath.Join(dir, "kubeconfig")
			// The previous run's files, as it wrote them.
			if err := os.MkdirAll(certDir, 0o700); err != nil {
				t.Fatal(err)
			}
			old, err := certmgr.NewFileStore(clientCertPrefix, certDir, certDir, "", "")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := old.Update(tc.ca.issue(t, tc.cn, time.Now().Add(time.Hour))); err != nil {
				t.Fatal(err)
			}
			host, caData := api.srv.URL, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: api.srv.Certificate().Raw})
			if tc.oldHost != "" {
				host, caData = tc.oldHost, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tc.ca.cert.Raw})
			}
			if err := writeNodeKubeconfig(kubeconfig, &rest.Config{Host: host, TLSClientConfig: rest.TLSClientConfig{CAData: caData}}, old.CurrentPath()); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(kubeconfig)

			var logs bytes.Buffer
			l := logrus.New()
			l.SetOutput(&logs)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ctx = log.WithLogger(ctx, logruslogger.FromLogrus(logrus.NewEntry(l)))
			cfg, err := NodeClientConfig(ctx, BootstrapConfig{NodeName: "n", Kubeconfig: kubeconfig,
				BootstrapKubeconfig: api.bootstrapKubeconfig(t, dir), CertDir: certDir, Retry: 50 * time.Millisecond})
			if err != nil {
				t.Fatalf("NodeClientConfig: %v", err)
			}
			if cfg.Host != api.srv.URL {
				t.Errorf("the API server used is %s, want this cluster's %s", cfg.Host, api.srv.URL)
			}
			got := api.created()
			if !tc.wantCSR {
				if len(got) != 0 {
					t.Errorf("CSRs %v, want none: the certificate is this node's of this cluster", got)
				}
				if after, _ := os.ReadFile(kubeconfig); !bytes.Equal(after, before) {
					t.Error("--kubeconfig rewritten although it was usable")
				}
				if strings.Contains(logs.String(), "not used") {
					t.Errorf("a usable certificate reported as set aside:\n%s", logs.String())
				}
				return
			}
			if want := []string{"system:bootstrap:abcdef -> system:node:n"}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("CSRs %v, want %v: one for this node, made with the bootstrap token", got, want)
			}
			if !strings.Contains(logs.String(), tc.wantLog) || !strings.Contains(logs.String(), "a new one is requested") {
				t.Errorf("log %q, want a line naming %q and what is done", logs.String(), tc.wantLog)
			}
			written, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				t.Fatal(err)
			}
			if written.Host != api.srv.URL || written.CertFile != old.CurrentPath() {
				t.Errorf("--kubeconfig names %s and %s, want %s and %s", written.Host, written.CertFile, api.srv.URL, old.CurrentPath())
			}
			cur, err := old.Current()
			if err != nil {
				t.Fatal(err)
			}
			if cur.Leaf.Subject.CommonName != "system:node:n" || cur.Leaf.CheckSignatureFrom(cluster.cert) != nil {
				t.Errorf("the stored certificate is %s of %s, want system:node:n of this cluster", cur.Leaf.Subject.CommonName, cur.Leaf.Issuer)
			}
		})
	}
}

// TestNodeClientConfigStaleWithoutBootstrap: another node's certificate
// and no bootstrap credential to replace it is an error that names the
// conflict, not a start as the other node.
func TestNodeClientConfigStaleWithoutBootstrap(t *testing.T) {
	cluster := newTestCA(t, "cluster-ca")
	dir := t.TempDir()
	certDir := filepath.Join(dir, "pki")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		t.Fatal(err)
	}
	old, err := certmgr.NewFileStore(clientCertPrefix, certDir, certDir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Update(cluster.issue(t, "system:node:old", time.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeNodeKubeconfig(kubeconfig, &rest.Config{Host: "https://192.0.2.1:6443", TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cluster.cert.Raw})}}, old.CurrentPath()); err != nil {
		t.Fatal(err)
	}
	_, err = NodeClientConfig(context.Background(), BootstrapConfig{NodeName: "n", Kubeconfig: kubeconfig,
		BootstrapKubeconfig: filepath.Join(dir, "missing"), CertDir: certDir})
	if err == nil || !strings.Contains(err.Error(), "system:node:old, not system:node:n") || !strings.Contains(err.Error(), "--bootstrap-kubeconfig") {
		t.Errorf("error %v, want one naming the other node's certificate and the missing bootstrap kubeconfig", err)
	}
}
