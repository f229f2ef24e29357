package certificate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	certmgr "k8s.io/client-go/util/certificate"
)

// servingCertPrefix names the serving certificate's files in the store
// (<CertDir>/crivk-server-current.pem), beside the client's.
const servingCertPrefix = "crivk-server"

// ErrNoServingCert is the kubelet's handshake error while its serving
// certificate is not issued yet.
var ErrNoServingCert = errors.New("no serving certificate available for the kubelet")

// ServingCertManager starts the serving certificate manager for nodeName
// with the given addresses, storing the key and certificate in certDir
// (--rotate-server-certificates; doc.go). csrs is the node's own
// certificates client (NewCSRClientset); the manager stops with ctx.
func ServingCertManager(ctx context.Context, csrs kubernetes.Interface, nodeName string, ips []net.IP, dnsNames []string, certDir string) (certmgr.Manager, error) {
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, err
	}
	store, err := certmgr.NewFileStore(servingCertPrefix, certDir, certDir, "", "")
	if err != nil {
		return nil, fmt.Errorf("serving certificate store %s: %w", certDir, err)
	}
	mgr, err := certmgr.NewManager(&certmgr.Config{
		ClientsetFn: func(*tls.Certificate) (kubernetes.Interface, error) { return csrs, nil },
		GetTemplate: func() *x509.CertificateRequest {
			return &x509.CertificateRequest{
				Subject:     pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}},
				DNSNames:    dnsNames,
				IPAddresses: ips,
			}
		},
		SignerName:       certificatesv1.KubeletServingSignerName,
		GetUsages:        certmgr.DefaultKubeletServingGetUsages,
		CertificateStore: store,
		Name:             "serving",
		Ctx:              &ctx,
	})
	if err != nil {
		return nil, fmt.Errorf("serving certificate manager: %w", err)
	}
	mgr.Start()
	go func() { <-ctx.Done(); mgr.Stop() }()
	return mgr, nil
}

// WithCertificateManager serves the manager's current certificate.
func WithCertificateManager(mgr certmgr.Manager) func(*tls.Config) error {
	return func(c *tls.Config) error {
		c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			cert := mgr.Current()
			if cert == nil {
				return nil, ErrNoServingCert
			}
			return cert, nil
		}
		return nil
	}
}

// ServingConfig is where the node API's serving certificate comes from.
type ServingConfig struct {
	// Rotate: from the cluster (a kubelet-serving CSR through CSRs),
	// renewed before it expires (--rotate-server-certificates).
	Rotate bool
	CSRs   kubernetes.Interface
	// CertFile and KeyFile, if given, are served as they are; else a
	// self-signed pair under Dir (EnsureServingCert).
	CertFile, KeyFile string
	// Dir is the node's certificate directory (<root-dir>/pki).
	Dir              string
	NodeName, NodeIP string
}

// ServingTLS is the TLS option that serves the node API's certificate of
// cfg: the rotating manager's, the given files or a self-signed pair, as
// the kubelet chooses among serverTLSBootstrap, --tls-cert-file and its
// self-signed fallback.
func ServingTLS(ctx context.Context, cfg ServingConfig) (func(*tls.Config) error, error) {
	if cfg.Rotate {
		var ips []net.IP
		if ip := net.ParseIP(cfg.NodeIP); ip != nil {
			ips = append(ips, ip)
		}
		mgr, err := ServingCertManager(ctx, cfg.CSRs, cfg.NodeName, ips, []string{cfg.NodeName}, cfg.Dir)
		if err != nil {
			return nil, err
		}
		return WithCertificateManager(mgr), nil
	}
	certFile, keyFile, err := EnsureServingCert(cfg.CertFile, cfg.KeyFile, cfg.Dir, cfg.NodeName, cfg.NodeIP)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	return WithKeyPair(certFile, keyFile), nil
}
