package main

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
	"k8s.io/client-go/util/certificate"
)

// The node API's serving certificate through the cluster, as the kubelet's
// --rotate-server-certificates (serverTLSBootstrap): a
// CertificateSigningRequest for system:node:<node-name> in group
// system:nodes with the signer kubernetes.io/kubelet-serving, the node's
// addresses as subject alternative names, created with the node's own
// credentials (the Node authorizer's rules allow it). Approving it is the
// cluster's decision (the controller-manager does not approve serving
// certificates by itself); until it is approved and signed, TLS handshakes
// fail with "no serving certificate available for the kubelet", as on the
// kubelet. client-go's certificate manager renews it before it expires;
// every handshake takes the current one.
const servingCertPrefix = "crivk-server"

// errNoServingCert is the kubelet's handshake error while its serving
// certificate is not issued yet.
var errNoServingCert = errors.New("no serving certificate available for the kubelet")

// servingCertManager starts the serving certificate manager for nodeName
// with the given addresses, storing the key and certificate in certDir.
func servingCertManager(ctx context.Context, csrs kubernetes.Interface, nodeName string, ips []net.IP, dnsNames []string, certDir string) (certificate.Manager, error) {
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, err
	}
	store, err := certificate.NewFileStore(servingCertPrefix, certDir, certDir, "", "")
	if err != nil {
		return nil, fmt.Errorf("serving certificate store %s: %w", certDir, err)
	}
	mgr, err := certificate.NewManager(&certificate.Config{
		ClientsetFn: func(*tls.Certificate) (kubernetes.Interface, error) { return csrs, nil },
		GetTemplate: func() *x509.CertificateRequest {
			return &x509.CertificateRequest{
				Subject:     pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}},
				DNSNames:    dnsNames,
				IPAddresses: ips,
			}
		},
		SignerName:       certificatesv1.KubeletServingSignerName,
		GetUsages:        certificate.DefaultKubeletServingGetUsages,
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

// withCertificateManager serves the manager's current certificate.
func withCertificateManager(mgr certificate.Manager) func(*tls.Config) error {
	return func(c *tls.Config) error {
		c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			cert := mgr.Current()
			if cert == nil {
				return nil, errNoServingCert
			}
			return cert, nil
		}
		return nil
	}
}
