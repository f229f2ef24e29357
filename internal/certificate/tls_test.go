package certificate

import (
	"crypto/tls"
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
