package certificate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
)

func TestEnsureServingCertGeneratesOnce(t *testing.T) {
	dir := t.TempDir()
	c1, k1, err := EnsureServingCert("", "", dir, "node-a", "192.0.2.10")
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(c1)
	if err != nil || len(before) == 0 {
		t.Fatalf("no certificate written: %v", err)
	}
	if _, err := tls.LoadX509KeyPair(c1, k1); err != nil {
		t.Fatalf("generated pair does not load: %v", err)
	}
	c2, k2, err := EnsureServingCert("", "", dir, "node-a", "192.0.2.10")
	if err != nil || c1 != c2 || k1 != k2 {
		t.Fatalf("second call: %s %s %v, want the same files", c2, k2, err)
	}
	if after, _ := os.ReadFile(c2); string(after) != string(before) {
		t.Error("the certificate was regenerated although it existed")
	}
	if _, _, err := EnsureServingCert("/only/cert", "", dir, "n", ""); err == nil {
		t.Error("a cert without a key must be refused")
	}
}

// TestServingTLSSelfSigned: without --rotate-server-certificates and
// without files, the node API serves a self-signed pair for the node's
// name and IP; a certificate file without its key is an error.
func TestServingTLSSelfSigned(t *testing.T) {
	opt, err := ServingTLS(context.Background(), ServingConfig{Dir: t.TempDir(), NodeName: "node-a", NodeIP: "192.0.2.10"})
	if err != nil {
		t.Fatal(err)
	}
	var c tls.Config
	if err := opt(&c); err != nil {
		t.Fatal(err)
	}
	var leaf *x509.Certificate
	switch {
	case len(c.Certificates) == 1:
		leaf, err = x509.ParseCertificate(c.Certificates[0].Certificate[0])
	case c.GetCertificate != nil:
		var cert *tls.Certificate
		if cert, err = c.GetCertificate(&tls.ClientHelloInfo{}); err == nil {
			leaf, err = x509.ParseCertificate(cert.Certificate[0])
		}
	default:
		t.Fatal("the TLS option set no certificate")
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := leaf.VerifyHostname("192.0.2.10"); err != nil {
		t.Errorf("certificate not for the node IP: %v", err)
	}
	if _, err := ServingTLS(context.Background(), ServingConfig{Dir: t.TempDir(), CertFile: "/only/cert", NodeName: "n"}); err == nil {
		t.Error("a certificate without its key was accepted")
	}
}
