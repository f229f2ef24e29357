package nodeapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
)

// The node API's two servers, both owned here with the mux they serve
// (server.go): the authenticated HTTPS port (the kubelet's --port, 10250)
// and the read-only plain HTTP port (--read-only-port, off by default).
// Each binds its listener before it returns, so that an address in use is
// the caller's error at start, and serves until ctx ends.

// ServeTLS serves h behind auth (Auth.Wrap) over TLS on addr until ctx
// ends. The TLS configuration is the kubelet's without --tls-cipher-suites
// (TLS 1.2 or later, Go's default cipher suites, client certificates
// requested, not required: a client may authenticate with a bearer token
// instead), with tlsOpts applied in order (the serving certificate, the
// client CA pool: certificate.WithClientCA). It returns the address bound.
func ServeTLS(ctx context.Context, addr string, h http.Handler, auth func(http.Handler) http.Handler, tlsOpts []func(*tls.Config) error) (net.Addr, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("node API listen address %q: %w", addr, err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ClientAuth: tls.RequestClientCert}
	for _, o := range tlsOpts {
		if err := o(cfg); err != nil {
			return nil, err
		}
	}
	if auth != nil {
		h = auth(h)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, TLSConfig: cfg, ReadHeaderTimeout: 30 * time.Second}
	serve(ctx, tls.NewListener(ln, cfg), srv, "node API server")
	return ln.Addr(), nil
}

// ServeReadOnly serves h over plain HTTP on addr until ctx ends, with the
// kubelet's read-only server's timeouts (ReadOnly builds h). It returns
// the address bound.
func ServeReadOnly(ctx context.Context, addr string, h http.Handler) (net.Addr, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("read-only port: %w", err)
	}
	srv := &http.Server{Handler: h, IdleTimeout: 90 * time.Second, ReadTimeout: 4 * time.Hour, WriteTimeout: 4 * time.Hour,
		MaxHeaderBytes: 1 << 20}
	serve(ctx, ln, srv, "read-only port")
	return ln.Addr(), nil
}

// serve runs srv on ln until ctx ends, then shuts it down (a second for
// the requests in flight; streams are cut). A failure to serve is logged
// as what's.
func serve(ctx context.Context, ln net.Listener, srv *http.Server, what string) {
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.G(ctx).WithError(err).Errorf("%s stopped serving", what)
		}
	}()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			_ = srv.Close()
		}
	}()
}
