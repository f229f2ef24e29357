package certificate

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	certmgr "k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/connrotation"
)

// rotatingConfig returns a config whose connections present the manager's
// current certificate, and closes them all when it changes.
func rotatingConfig(ctx context.Context, server *rest.Config, mgr certmgr.Manager) (*rest.Config, error) {
	tlsCfg, err := rest.TLSConfigFor(server)
	if err != nil {
		return nil, err
	}
	if tlsCfg == nil {
		return nil, errors.New("the API server is not reached over TLS: a client certificate cannot be used")
	}
	tlsCfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if c := mgr.Current(); c != nil {
			return c, nil
		}
		return &tls.Certificate{}, nil
	}
	dialer := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	cfg := &rest.Config{Host: server.Host, APIPath: server.APIPath}
	cfg.Transport = utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsCfg,
		MaxIdleConnsPerHost: 25,
		DialContext:         dialer.DialContext,
	})
	go closeOnRotation(ctx, mgr, mgr.Current(), dialer, time.Second)
	return cfg, nil
}

// closeOnRotation closes every API connection when the manager's
// certificate changes from initial: they reconnect with the new one. The
// caller reads initial before starting it, so that a change made before
// this goroutine runs is not missed.
func closeOnRotation(ctx context.Context, mgr certmgr.Manager, initial *tls.Certificate, dialer *connrotation.Dialer, period time.Duration) {
	var last []byte
	if initial != nil && len(initial.Certificate) > 0 {
		last = initial.Certificate[0]
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c := mgr.Current()
		if c == nil || len(c.Certificate) == 0 || bytes.Equal(c.Certificate[0], last) {
			continue
		}
		last = c.Certificate[0]
		log.G(ctx).Info("node client certificate rotated: closing the API connections so that they use it")
		dialer.CloseAll()
	}
}
