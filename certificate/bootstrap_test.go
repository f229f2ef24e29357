package certificate

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/connrotation"
)

// newKey returns a P-256 key and its PEM.
func newKey(t *testing.T) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// signPEM signs tmpl for pub with parent and its key signer (tmpl as its
// own parent: self-signed), and returns it parsed and in PEM.
func signPEM(tmpl, parent *x509.Certificate, pub any, signer *ecdsa.PrivateKey) (*x509.Certificate, []byte, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// createCert is signPEM in a test goroutine.
func createCert(t *testing.T, tmpl, parent *x509.Certificate, pub any, signer *ecdsa.PrivateKey) (*x509.Certificate, []byte) {
	t.Helper()
	cert, certPEM, err := signPEM(tmpl, parent, pub, signer)
	if err != nil {
		t.Fatal(err)
	}
	return cert, certPEM
}

// pemPair returns a self-signed client certificate and its key in PEM,
// valid from notBefore to notAfter.
func pemPair(t *testing.T, cn string, notBefore, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key, keyPEM := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: notBefore, NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	_, certPEM = createCert(t, tmpl, tmpl, &key.PublicKey, key)
	return certPEM, keyPEM
}

func write(t *testing.T, path string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLoadKubeconfig: an existing --kubeconfig is rotated in place when it
// names a valid certificate file, used as it is with another valid
// credential, and bootstrapped again when absent or expired.
func TestLoadKubeconfig(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	valid, validKey := pemPair(t, "system:node:n", now.Add(-time.Hour), now.Add(time.Hour))
	expired, expiredKey := pemPair(t, "system:node:n", now.Add(-2*time.Hour), now.Add(-time.Hour))
	pair := append(append([]byte{}, valid...), validKey...)
	oldPair := append(append([]byte{}, expired...), expiredKey...)
	kc := func(name, user string) string {
		return write(t, filepath.Join(dir, name), []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://192.0.2.1:6443\nusers:\n- name: u\n  user:\n"+user+"\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"))
	}
	validFile := write(t, filepath.Join(dir, "valid.pem"), pair)
	expiredFile := write(t, filepath.Join(dir, "expired.pem"), oldPair)
	for name, tc := range map[string]struct {
		path string
		want kubeconfigKind
	}{
		"absent":           {filepath.Join(dir, "nope"), kubeconfigNone},
		"certificate file": {kc("file", "    client-certificate: "+validFile+"\n    client-key: "+validFile), kubeconfigCertFile},
		"expired file":     {kc("expired", "    client-certificate: "+expiredFile+"\n    client-key: "+expiredFile), kubeconfigNone},
		"token":            {kc("token", "    token: abc.def"), kubeconfigStatic},
		"no credential":    {kc("none", "    username: x"), kubeconfigNone},
		"not a kubeconfig": {write(t, filepath.Join(dir, "garbage"), []byte("{{{")), kubeconfigNone},
	} {
		t.Run(name, func(t *testing.T) {
			if _, got := loadKubeconfig(tc.path); got != tc.want {
				t.Errorf("kind %d, want %d", got, tc.want)
			}
		})
	}
}

// TestWriteNodeKubeconfig: the written kubeconfig is 0600, names the
// server, its CA and the certificate file, and loads back as a
// certificate-file kubeconfig.
func TestWriteNodeKubeconfig(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	c, k := pemPair(t, "system:node:n", now.Add(-time.Hour), now.Add(time.Hour))
	certFile := write(t, filepath.Join(dir, "crivk-client-current.pem"), append(c, k...))
	path := filepath.Join(dir, "sub", "kubeconfig")
	if err := writeNodeKubeconfig(path, &rest.Config{Host: "https://192.0.2.1:6443", TLSClientConfig: rest.TLSClientConfig{CAData: c}}, certFile); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://192.0.2.1:6443" || cfg.CertFile != certFile || cfg.KeyFile != certFile || len(cfg.CAData) == 0 {
		t.Errorf("written config %+v", cfg)
	}
	if _, kind := loadKubeconfig(path); kind != kubeconfigCertFile {
		t.Errorf("kind %d, want a certificate-file kubeconfig", kind)
	}
}

// fakeCertManager is a certmgr.Manager whose certificate the test sets.
type fakeCertManager struct {
	mu  sync.Mutex
	cur *tls.Certificate
}

func (f *fakeCertManager) Start()              {}
func (f *fakeCertManager) Stop()               {}
func (f *fakeCertManager) ServerHealthy() bool { return true }
func (f *fakeCertManager) Current() *tls.Certificate {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur
}
func (f *fakeCertManager) set(c *tls.Certificate) {
	f.mu.Lock()
	f.cur = c
	f.mu.Unlock()
}

// TestCloseOnRotation: the connections made before the certificate
// changes are closed once it changes, and only then.
func TestCloseOnRotation(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = c.Read(make([]byte, 1)); c.Close() }()
		}
	}()
	mgr := &fakeCertManager{cur: &tls.Certificate{Certificate: [][]byte{[]byte("one")}}}
	dialer := connrotation.NewDialer((&net.Dialer{}).DialContext)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go closeOnRotation(ctx, mgr, mgr.Current(), dialer, 5*time.Millisecond)
	conn, err := dialer.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	closed := func() bool {
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		_, err := conn.Read(make([]byte, 1))
		ne, isNet := err.(net.Error)
		return err != nil && !(isNet && ne.Timeout())
	}
	time.Sleep(30 * time.Millisecond)
	if closed() {
		t.Fatal("connection closed while the certificate did not change")
	}
	mgr.set(&tls.Certificate{Certificate: [][]byte{[]byte("two")}})
	deadline := time.Now().Add(5 * time.Second)
	for !closed() {
		if time.Now().After(deadline) {
			t.Fatal("connection still open 5 s after the certificate changed")
		}
	}
}

func TestUnexpired(t *testing.T) {
	now := time.Now()
	c, k := pemPair(t, "x", now.Add(-time.Hour), now.Add(time.Hour))
	valid, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	c, k = pemPair(t, "x", now.Add(-2*time.Hour), now.Add(-time.Hour))
	expired, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	expired.Leaf = nil
	if !unexpired(&valid) || unexpired(&expired) || unexpired(nil) || unexpired(&tls.Certificate{}) {
		t.Error("unexpired: want true only for the valid certificate")
	}
}

// TestCheckBootstrapCredential: a bootstrap token the API server rejects
// (401) is retried with back-off, each attempt one error line, until it is
// accepted; crivk never exits for it. A missing bootstrap kubeconfig is
// retried the same way; cancelling stops the wait.
func TestCheckBootstrapCredential(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	// TLS: client-go sends a bearer token only over it.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n < 3 || r.Header.Get("Authorization") != "Bearer abcdef.0123456789abcdef" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"CertificateSigningRequestList","apiVersion":"certificates.k8s.io/v1","items":[]}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	boot := write(t, filepath.Join(dir, "bootstrap.kubeconfig"), []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    insecure-skip-tls-verify: true\n    server: "+srv.URL+"\nusers:\n- name: u\n  user:\n    token: abcdef.0123456789abcdef\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	if err := checkBootstrapCredential(ctx, BootstrapConfig{NodeName: "n", BootstrapKubeconfig: boot, CertDir: dir, Retry: 50 * time.Millisecond}); err != nil {
		t.Fatalf("checkBootstrapCredential: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 3 {
		t.Errorf("%d requests, want 2 refused and 1 accepted", calls)
	}
	if time.Since(start) < time.Second {
		t.Errorf("retried after %s in all, want back-off (1 s, then capped at 50 ms)", time.Since(start))
	}

	// No bootstrap kubeconfig at all: retried until cancelled.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	err := checkBootstrapCredential(ctx2, BootstrapConfig{NodeName: "n", BootstrapKubeconfig: filepath.Join(dir, "missing"), CertDir: dir, Retry: 50 * time.Millisecond})
	if err == nil || ctx2.Err() == nil {
		t.Errorf("missing bootstrap kubeconfig: %v, want a wait ended by the context", err)
	}
}

func TestLoadBootstrapConfigInCluster(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := loadBootstrapConfig(InClusterBootstrap); err == nil || !strings.Contains(err.Error(), "--bootstrap-kubeconfig=in-cluster") {
		t.Errorf("outside a pod: %v, want an error naming --bootstrap-kubeconfig=in-cluster", err)
	}
	if _, err := loadBootstrapConfig(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing bootstrap kubeconfig loaded")
	}
}
