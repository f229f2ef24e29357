package nodeapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// selfSigned is a serving certificate for 127.0.0.1, as a tls.Config option.
func selfSigned(t *testing.T) func(*tls.Config) error {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "n1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return func(c *tls.Config) error {
		c.Certificates = []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}
		return nil
	}
}

// ServeTLS binds before it returns (a port in use is its error), serves
// the handler behind auth over TLS 1.2 or later, and stops with ctx.
func TestServeTLS(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mux := http.NewServeMux()
	mux.HandleFunc("/pods", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "pods") })
	authed := false
	auth := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { authed = true; h.ServeHTTP(w, r) })
	}
	addr, err := ServeTLS(ctx, "127.0.0.1:0", mux, auth, []func(*tls.Config) error{selfSigned(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ServeTLS(ctx, addr.String(), mux, auth, []func(*tls.Config) error{selfSigned(t)}); err == nil || !strings.Contains(err.Error(), "listening on") {
		t.Errorf("a second server on %s: %v, want the listen error", addr, err)
	}
	if _, err := ServeTLS(ctx, "127.0.0.1", mux, auth, nil); err == nil {
		t.Error("an address without a port was accepted")
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS11}}}
	if _, err := client.Get("https://" + addr.String() + "/pods"); err == nil {
		t.Error("TLS 1.1 was accepted")
	}
	client.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	resp, err := client.Get("https://" + addr.String() + "/pods")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "pods" || !authed {
		t.Errorf("GET /pods: %q, through auth %v; want pods, true", body, authed)
	}
	cancel()
	// Closed once ctx ended: a dial is refused.
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		c, err := net.DialTimeout("tcp", addr.String(), time.Second)
		if err != nil {
			return true, nil
		}
		return false, c.Close()
	}); err != nil {
		t.Fatalf("%s still accepts connections 10s after ctx ended: %v", addr, err)
	}
}
