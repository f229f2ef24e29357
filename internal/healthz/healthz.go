package healthz

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The names of the checks crivk sets.
const (
	CheckAPIServer = "apiserver"
	CheckRuntime   = "runtime"
	CheckSyncLoop  = "syncloop"
)

// Checks is the named health checks /healthz runs. The zero value is
// ready to use and safe for concurrent use.
type Checks struct {
	mu     sync.Mutex
	names  []string                // in the order first set; guarded by mu
	checks map[string]func() error // nil function: pending; guarded by mu
}

// Set adds the check name, or replaces its function. A nil check declares
// it pending: it passes until it is set again with a function.
func (c *Checks) Set(name string, check func() error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.checks == nil {
		c.checks = map[string]func() error{}
	}
	if _, ok := c.checks[name]; !ok {
		c.names = append(c.names, name)
	}
	c.checks[name] = check
}

// Result is one check's outcome.
type Result struct {
	Name string
	// Pending: the check has no function yet (it passed).
	Pending bool
	Err     error
}

func (r Result) String() string {
	switch {
	case r.Err != nil:
		return fmt.Sprintf("[-]%s failed: %v", r.Name, r.Err)
	case r.Pending:
		return fmt.Sprintf("[+]%s ok (not started)", r.Name)
	default:
		return fmt.Sprintf("[+]%s ok", r.Name)
	}
}

// Run runs the checks named, or all of them without names, in the order
// they were set; ok is false when one failed or a name is unknown.
func (c *Checks) Run(names ...string) (results []Result, ok bool) {
	c.mu.Lock()
	if len(names) == 0 {
		names = append([]string(nil), c.names...)
	}
	funcs := make([]func() error, len(names))
	known := make([]bool, len(names))
	for i, n := range names {
		funcs[i], known[i] = c.checks[n]
	}
	c.mu.Unlock()
	ok = true
	for i, n := range names {
		r := Result{Name: n}
		switch {
		case !known[i]:
			r.Err = errors.New("no such check")
		case funcs[i] == nil:
			r.Pending = true
		default:
			r.Err = funcs[i]()
		}
		ok = ok && r.Err == nil
		results = append(results, r)
	}
	return results, ok
}

// Handler serves /healthz and /healthz/<name> (see the package
// documentation). onFail, if set, is told of each failing answer, with
// the failed checks joined in one error.
func (c *Checks) Handler(onFail func(error)) http.Handler {
	mux := http.NewServeMux()
	serve := func(w http.ResponseWriter, r *http.Request, names ...string) {
		results, ok := c.Run(names...)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if ok && !r.URL.Query().Has("verbose") {
			fmt.Fprint(w, "ok")
			return
		}
		var b strings.Builder
		var errs []error
		for _, res := range results {
			fmt.Fprintln(&b, res)
			if res.Err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", res.Name, res.Err))
			}
		}
		if ok {
			fmt.Fprint(&b, "healthz check passed\n")
			fmt.Fprint(w, b.String())
			return
		}
		fmt.Fprint(&b, "healthz check failed\n")
		if onFail != nil {
			onFail(errors.Join(errs...))
		}
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, b.String())
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { serve(w, r) })
	mux.HandleFunc("GET /healthz/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		c.mu.Lock()
		_, known := c.checks[name]
		c.mu.Unlock()
		if !known {
			http.NotFound(w, r)
			return
		}
		serve(w, r, name)
	})
	return mux
}

// Serve listens on addr (host:port) before it returns, so that a port in
// use is the caller's error, and serves h there until ctx ends. It
// returns the address listened on (the port chosen for port 0).
func Serve(ctx context.Context, addr string, h http.Handler) (net.Addr, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("health endpoint: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
	go func() {
		// Serve returns when Shutdown closes the listener.
		_ = srv.Serve(ln)
	}()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	return ln.Addr(), nil
}
