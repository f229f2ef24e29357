package nodeagent

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"

	"github.com/crivk/crivk/certificate"
	"github.com/crivk/crivk/nodeapi"
)

// nodeAPISecurity returns the node API's TLS options (serving
// certificate, client CAs) and its authentication and authorisation.
func nodeAPISecurity(ctx context.Context, o *Settings, clients *apiClients) ([]func(*tls.Config) error, *nodeapi.Auth, error) {
	serving, err := certificate.ServingTLS(ctx, certificate.ServingConfig{Rotate: o.RotateServerCerts, CSRs: clients.csrs,
		CertFile: o.TLSCertFile, KeyFile: o.TLSKeyFile, Dir: filepath.Join(o.RootDir, "pki"), NodeName: o.NodeName, NodeIP: o.NodeIP})
	if err != nil {
		return nil, nil, err
	}
	tlsOpts := []func(*tls.Config) error{serving}
	nodeAuth, err := newNodeAPIAuth(o, clients)
	if err != nil {
		return nil, nil, err
	}
	if nodeAuth.ClientCAs != nil {
		tlsOpts = append(tlsOpts, certificate.WithClientCA(nodeAuth.ClientCAs))
	}
	auth, err := nodeapi.NewAuth(nodeAuth)
	if err != nil {
		return nil, nil, err
	}
	return tlsOpts, auth, nil
}

// newNodeAPIAuth is the node API's authentication and authorization
// configuration from the settings.
func newNodeAPIAuth(o *Settings, c *apiClients) (nodeapi.AuthConfig, error) {
	cfg := nodeapi.AuthConfig{NodeName: o.NodeName, Anonymous: o.AnonymousAuth}
	if o.ClientCAFile != "" {
		pool, err := certificate.LoadCAPool(o.ClientCAFile)
		if err != nil {
			return cfg, err
		}
		cfg.ClientCAs = pool
	}
	if o.TokenWebhook {
		cfg.TokenReviews = c.tokenReviews.TokenReviews()
	}
	webhook, err := authorizationWebhook(o.AuthorizationMode)
	if err != nil {
		return cfg, err
	}
	if webhook {
		cfg.SubjectAccessReviews = c.accessReviews.SubjectAccessReviews()
	}
	return cfg, nil
}

// authorizationWebhook reads --authorization-mode, the one place that
// knows its values (Validate and newNodeAPIAuth ask it): Webhook, a
// SubjectAccessReview per request as the kubelet's, or AlwaysAllow.
func authorizationWebhook(mode string) (bool, error) {
	switch mode {
	case "Webhook":
		return true, nil
	case "AlwaysAllow":
		return false, nil
	}
	return false, fmt.Errorf("--authorization-mode %q: must be Webhook or AlwaysAllow", mode)
}
