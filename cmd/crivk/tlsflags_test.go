package main

import (
	"strings"
	"testing"
)

func TestRotateServerCertificatesExcludesCertFiles(t *testing.T) {
	_, err := parseFlags([]string{"--kubeconfig=/k", "--rotate-server-certificates", "--tls-cert-file=/x.crt", "--tls-private-key-file=/x.key"})
	if err == nil || !strings.Contains(err.Error(), "exclude each other") {
		t.Errorf("--rotate-server-certificates with --tls-cert-file: %v, want an error saying they exclude each other", err)
	}
	if _, err := parseFlags([]string{"--kubeconfig=/k", "--rotate-server-certificates"}); err != nil {
		t.Errorf("--rotate-server-certificates alone: %v", err)
	}
}
