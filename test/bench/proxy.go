package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sync/atomic"

	"k8s.io/client-go/rest"
)

// countingProxy forwards plain HTTP from the agent under test to the API
// server with the harness's (admin) credentials and counts the requests.
// Both agents talk to the API server through it, so their requests/s are
// measured the same way.
type countingProxy struct {
	requests atomic.Int64
	srv      *http.Server
	addr     string
}

func startProxy(target *rest.Config) (*countingProxy, error) {
	u, err := url.Parse(target.Host)
	if err != nil {
		return nil, fmt.Errorf("API server URL %q: %w", target.Host, err)
	}
	tr, err := rest.TransportFor(target)
	if err != nil {
		return nil, fmt.Errorf("transport to the API server: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &countingProxy{addr: ln.Addr().String()}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = tr
	rp.FlushInterval = -1 // watches stream
	rp.ErrorLog = nil
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func (p *countingProxy) Count() int64 { return p.requests.Load() }

func (p *countingProxy) Close() error { return p.srv.Close() }

// writeKubeconfig writes a kubeconfig that points at the proxy.
func (p *countingProxy) writeKubeconfig(path string) error {
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: bench
  cluster:
    server: http://%s
users:
- name: bench
contexts:
- name: bench
  context:
    cluster: bench
    user: bench
current-context: bench
`, p.addr)
	return os.WriteFile(path, []byte(kc), 0o600)
}
