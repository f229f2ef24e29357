package main

import (
	"crypto/tls"
	"errors"
	"strings"
	"testing"

	"k8s.io/client-go/util/certificate"
)

// staticManager is a certificate manager whose current certificate is
// cert (nil: none issued yet).
type staticManager struct {
	certificate.Manager
	cert *tls.Certificate
}

func (m staticManager) Current() *tls.Certificate { return m.cert }

func TestWithCertificateManager(t *testing.T) {
	cfg := &tls.Config{}
	mgr := &staticManager{}
	if err := withCertificateManager(mgr)(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.GetCertificate(&tls.ClientHelloInfo{}); !errors.Is(err, errNoServingCert) {
		t.Errorf("before the certificate is issued: %v, want %v", err, errNoServingCert)
	}
	issued := &tls.Certificate{Certificate: [][]byte{{1}}}
	mgr.cert = issued
	if got, err := cfg.GetCertificate(&tls.ClientHelloInfo{}); err != nil || got != issued {
		t.Errorf("after: %v, %v; want the manager's current certificate", got, err)
	}
}

func TestRotateServerCertificatesExcludesCertFiles(t *testing.T) {
	_, err := parseFlags([]string{"--kubeconfig=/k", "--rotate-server-certificates", "--tls-cert-file=/x.crt", "--tls-private-key-file=/x.key"})
	if err == nil || !strings.Contains(err.Error(), "exclude each other") {
		t.Errorf("--rotate-server-certificates with --tls-cert-file: %v, want an error saying they exclude each other", err)
	}
	if _, err := parseFlags([]string{"--kubeconfig=/k", "--rotate-server-certificates"}); err != nil {
		t.Errorf("--rotate-server-certificates alone: %v", err)
	}
}
