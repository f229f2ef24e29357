package certificate

import (
	"crypto/tls"
	"errors"
	"testing"

	certmgr "k8s.io/client-go/util/certificate"
)

// staticManager is a certificate manager whose current certificate is
// cert (nil: none issued yet).
type staticManager struct {
	certmgr.Manager
	cert *tls.Certificate
}

func (m staticManager) Current() *tls.Certificate { return m.cert }

func TestWithCertificateManager(t *testing.T) {
	cfg := &tls.Config{}
	mgr := &staticManager{}
	if err := WithCertificateManager(mgr)(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.GetCertificate(&tls.ClientHelloInfo{}); !errors.Is(err, ErrNoServingCert) {
		t.Errorf("before the certificate is issued: %v, want %v", err, ErrNoServingCert)
	}
	issued := &tls.Certificate{Certificate: [][]byte{{1}}}
	mgr.cert = issued
	if got, err := cfg.GetCertificate(&tls.ClientHelloInfo{}); err != nil || got != issued {
		t.Errorf("after: %v, %v; want the manager's current certificate", got, err)
	}
}
