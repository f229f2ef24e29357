package main

import (
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// countingProxy forwards plain HTTP from the agent under test to the API
// server with the harness's (admin) credentials and counts the requests,
// in all and by kind (requestKind). The agents (rawapi's too) talk to the API server
// through it, so their requests/s are measured the same way.
type countingProxy struct {
	requests atomic.Int64
	srv      *http.Server
	addr     string

	mu     sync.Mutex
	byKind map[string]int64 // guarded by mu
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
	p := &countingProxy{addr: ln.Addr().String(), byKind: map[string]int64{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = tr
	rp.FlushInterval = -1 // watches stream
	rp.ErrorLog = nil
	var reqLog *requestLog
	if path := os.Getenv("BENCH_PROXY_LOG"); path != "" {
		if reqLog, err = openRequestLog(path); err != nil {
			return nil, err
		}
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.count(r)
		if reqLog == nil {
			rp.ServeHTTP(w, r)
			return
		}
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		start := time.Now()
		rp.ServeHTTP(rec, r)
		reqLog.write(start, time.Since(start), r, rec.code)
	})}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func (p *countingProxy) count(r *http.Request) {
	p.requests.Add(1)
	k := requestKind(r.Method, r.URL)
	p.mu.Lock()
	p.byKind[k]++
	p.mu.Unlock()
}

// requestLog writes one line per request the proxy forwarded
// (BENCH_PROXY_LOG=<file>, for analysis, off by default): its arrival,
// duration, kind, path and response code.
type requestLog struct {
	mu sync.Mutex
	f  *os.File
}

func openRequestLog(path string) (*requestLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("BENCH_PROXY_LOG: %w", err)
	}
	return &requestLog{f: f}, nil
}

func (l *requestLog) write(start time.Time, d time.Duration, r *http.Request, code int) {
	line := fmt.Sprintf("%s %8.1fms %d %s %s\n", start.UTC().Format("15:04:05.000000"),
		float64(d.Microseconds())/1000, code, requestKind(r.Method, r.URL), r.URL.Path)
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.f.WriteString(line)
}

// statusRecorder keeps the response code; Flush passes through for
// watches.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (p *countingProxy) Count() int64 { return p.requests.Load() }

// ByKind returns a copy of the counts by request kind.
func (p *countingProxy) ByKind() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.byKind)
}

func (p *countingProxy) Close() error { return p.srv.Close() }

// requestKind names an API request as the API server's audit log does:
// verb (get, list, watch, create, update, patch, delete) and
// resource[/subresource], e.g. "update leases", "patch pods/status",
// "watch nodes". Paths outside /api and /apis keep their path ("get
// /version").
func requestKind(method string, u *url.URL) string {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:]
	default:
		return strings.ToLower(method) + " " + u.Path
	}
	if len(rest) >= 3 && rest[0] == "namespaces" {
		rest = rest[2:] // a namespaced resource
	}
	if len(rest) == 0 {
		return strings.ToLower(method) + " " + u.Path
	}
	resource, named := rest[0], len(rest) >= 2
	if len(rest) >= 3 {
		resource += "/" + rest[2]
	}
	var verb string
	switch method {
	case http.MethodGet:
		switch w := u.Query().Get("watch"); {
		case w == "true" || w == "1":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
		if !named {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(method)
	}
	return verb + " " + resource
}

// kindSummary lists request kinds by rate, highest first, as request
// counts in a window of el seconds: "12 update leases, 3 get nodes".
func kindSummary(perSecond map[string]float64, el float64) string {
	kinds := make([]string, 0, len(perSecond))
	for k := range perSecond {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool {
		if perSecond[kinds[i]] != perSecond[kinds[j]] {
			return perSecond[kinds[i]] > perSecond[kinds[j]]
		}
		return kinds[i] < kinds[j]
	})
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%.0f %s", perSecond[k]*el, k)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

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
