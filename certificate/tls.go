package certificate

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// EnsureServingCert returns the cert and key paths to serve with: the given
// ones, or a self-signed pair under dir, generated when absent (as the
// kubelet does without --tls-cert-file).
func EnsureServingCert(certFile, keyFile, dir, nodeName, nodeIP string) (string, string, error) {
	if certFile != "" || keyFile != "" {
		if certFile == "" || keyFile == "" {
			return "", "", fmt.Errorf("--tls-cert-file and --tls-private-key-file must be given together")
		}
		return certFile, keyFile, nil
	}
	certFile = filepath.Join(dir, "crivk.crt")
	keyFile = filepath.Join(dir, "crivk.key")
	if _, err := os.Stat(certFile); err == nil {
		if _, err := os.Stat(keyFile); err == nil {
			return certFile, keyFile, nil
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: nodeName + "@" + fmt.Sprint(time.Now().Unix())},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{nodeName, "localhost"},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
	}
	if ip := net.ParseIP(nodeIP); ip != nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// WithKeyPair loads the node API's serving certificate.
func WithKeyPair(certFile, keyFile string) func(*tls.Config) error {
	return func(c *tls.Config) error {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return fmt.Errorf("loading the serving key pair %s, %s: %w", certFile, keyFile, err)
		}
		c.Certificates = append(c.Certificates, cert)
		return nil
	}
}

// LoadCAPool reads the PEM certificates of file (--client-ca-file).
func LoadCAPool(file string) (*x509.CertPool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading the client CA %s: %w", file, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("client CA %s holds no PEM certificate", file)
	}
	return pool, nil
}

// WithClientCA makes the node API ask for client certificates of pool's
// CAs without requiring one: a client without a certificate, or with one
// of another CA, gets the kubelet's 401 from nodeapi.Auth (which verifies
// the certificate) instead of a failed TLS handshake, and bearer tokens
// work.
func WithClientCA(pool *x509.CertPool) func(*tls.Config) error {
	return func(c *tls.Config) error {
		c.ClientCAs = pool
		c.ClientAuth = tls.RequestClientCert
		return nil
	}
}
