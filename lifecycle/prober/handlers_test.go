package prober

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crivk/crivk/podutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// fakeExec answers ExecSync with fixed values and records the calls.
type fakeExec struct {
	stdout, stderr string
	code           int32
	err            error
	calls          [][]string
	timeouts       []time.Duration
}

func (f *fakeExec) ExecSync(_ context.Context, _ string, cmd []string, timeout time.Duration) ([]byte, []byte, int32, error) {
	f.calls = append(f.calls, cmd)
	f.timeouts = append(f.timeouts, timeout)
	return []byte(f.stdout), []byte(f.stderr), f.code, f.err
}

func TestExecProbe(t *testing.T) {
	for _, tc := range []struct {
		name    string
		exec    fakeExec
		want    outcome
		output  string
		wantErr bool
	}{
		{name: "exit 0", exec: fakeExec{stdout: "ok"}, want: outcomeSuccess, output: "ok"},
		{name: "exit 1 with output", exec: fakeExec{stdout: "out ", stderr: "err", code: 1}, want: outcomeFailure, output: "out err"},
		{name: "timeout fails", exec: fakeExec{err: fmt.Errorf("%w: boom", podutil.ErrExecTimedOut)}, want: outcomeFailure, output: `command "cat /tmp/health" timed out`},
		{name: "other error is the prober's", exec: fakeExec{err: errors.New("no such container")}, want: outcomeFailure, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.exec
			got, out, err := execProbe(context.Background(), &f, "c1", []string{"cat", "/tmp/health"}, 3*time.Second)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if got != tc.want || out != tc.output {
				t.Errorf("got (%v, %q), want (%v, %q)", got, out, tc.want, tc.output)
			}
			if f.timeouts[0] != 3*time.Second {
				t.Errorf("timeout passed = %v, want 3s", f.timeouts[0])
			}
		})
	}
}

func TestHTTPProbe(t *testing.T) {
	// What the last request to /ok carried, written by the server's
	// handlers (one of a probe that gave up may run late); guarded by mu.
	var mu sync.Mutex
	var gotUA, gotHeader, gotHost string
	seen := func() (ua, header, host string) {
		mu.Lock()
		defer mu.Unlock()
		return gotUA, gotHeader, gotHost
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gotUA, gotHeader, gotHost = r.UserAgent(), r.Header.Get("X-Custom"), r.Host
		mu.Unlock()
		fmt.Fprint(w, "fine")
	})
	mux.HandleFunc("/status/", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
		w.WriteHeader(code)
	})
	mux.HandleFunc("/redirect-local", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/status/500", http.StatusFound)
	})
	mux.HandleFunc("/redirect-local-ok", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ok", http.StatusFound)
	})
	var srvURL *url.URL
	mux.HandleFunc("/redirect-other", func(w http.ResponseWriter, r *http.Request) {
		// Same server, other host name: not followed, a warning.
		http.Redirect(w, r, "http://localhost:"+srvURL.Port()+"/status/500", http.StatusFound)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	srvURL, _ = url.Parse(srv.URL)
	tlsSrv := httptest.NewTLSServer(mux)
	defer tlsSrv.Close()
	tlsURL, _ := url.Parse(tlsSrv.URL)

	host, port, _ := net.SplitHostPort(srvURL.Host)
	portNum, _ := strconv.Atoi(port)
	container := &v1.Container{Name: "app", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: int32(portNum)}}}

	for _, tc := range []struct {
		name    string
		action  v1.HTTPGetAction
		timeout time.Duration
		want    outcome
		output  string
	}{
		{name: "200 by named port", action: v1.HTTPGetAction{Path: "/ok", Port: intstr.FromString("http")}, want: outcomeSuccess, output: "fine"},
		{name: "299 succeeds", action: v1.HTTPGetAction{Path: "/status/299", Port: intstr.FromInt(portNum)}, want: outcomeSuccess},
		{name: "399 not followed is a success with a warning", action: v1.HTTPGetAction{Path: "/status/399", Port: intstr.FromInt(portNum)}, want: outcomeWarning},
		{name: "400 fails", action: v1.HTTPGetAction{Path: "/status/400", Port: intstr.FromInt(portNum)}, want: outcomeFailure, output: "HTTP probe failed with statuscode: 400"},
		{name: "500 fails", action: v1.HTTPGetAction{Path: "/status/500", Port: intstr.FromInt(portNum)}, want: outcomeFailure, output: "HTTP probe failed with statuscode: 500"},
		{name: "redirect to same host followed", action: v1.HTTPGetAction{Path: "/redirect-local", Port: intstr.FromInt(portNum)}, want: outcomeFailure, output: "HTTP probe failed with statuscode: 500"},
		{name: "redirect to same host followed to success", action: v1.HTTPGetAction{Path: "/redirect-local-ok", Port: intstr.FromInt(portNum)}, want: outcomeSuccess, output: "fine"},
		{name: "redirect to other host is a warning", action: v1.HTTPGetAction{Path: "/redirect-other", Port: intstr.FromInt(portNum)}, want: outcomeWarning},
		{name: "https not verified", action: v1.HTTPGetAction{Path: "/ok", Scheme: v1.URISchemeHTTPS, Port: intstr.Parse(tlsURL.Port())}, want: outcomeSuccess, output: "fine"},
		{name: "timeout fails", action: v1.HTTPGetAction{Path: "/slow", Port: intstr.FromInt(portNum)}, timeout: 200 * time.Millisecond, want: outcomeFailure},
		{name: "connection refused fails", action: v1.HTTPGetAction{Path: "/", Port: intstr.FromInt(freePort(t))}, want: outcomeFailure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, headers, err := httpURL(&tc.action, container, host)
			if err != nil {
				t.Fatal(err)
			}
			to := tc.timeout
			if to == 0 {
				to = 5 * time.Second // not reached, even under -race on a loaded machine
			}
			got, out, err := httpProbe(context.Background(), u, headers, to)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("outcome %v (%q), want %v", got, out, tc.want)
			}
			if tc.output != "" && out != tc.output {
				t.Errorf("output %q, want %q", out, tc.output)
			}
		})
	}

	t.Run("headers, host and user agent", func(t *testing.T) {
		a := v1.HTTPGetAction{Path: "ok", Port: intstr.FromInt(portNum), HTTPHeaders: []v1.HTTPHeader{{Name: "X-Custom", Value: "v"}, {Name: "Host", Value: "example.test"}}}
		u, headers, err := httpURL(&a, container, host)
		if err != nil {
			t.Fatal(err)
		}
		if got, out, _ := httpProbe(context.Background(), u, headers, 5*time.Second); got != outcomeSuccess {
			t.Fatalf("outcome %v (%q)", got, out)
		}
		if ua, header, host := seen(); ua != "kube-probe/1.37" || header != "v" || host != "example.test" {
			t.Errorf("server saw UA %q, X-Custom %q, Host %q", ua, header, host)
		}
	})
	t.Run("user agent overridden", func(t *testing.T) {
		a := v1.HTTPGetAction{Path: "/ok", Port: intstr.FromInt(portNum), HTTPHeaders: []v1.HTTPHeader{{Name: "User-Agent", Value: "mine"}}}
		u, headers, _ := httpURL(&a, container, host)
		if got, out, _ := httpProbe(context.Background(), u, headers, 5*time.Second); got != outcomeSuccess {
			t.Fatalf("outcome %v (%q)", got, out)
		}
		if ua, _, _ := seen(); ua != "mine" {
			t.Errorf("UA %q, want mine", ua)
		}
	})
	t.Run("unknown named port", func(t *testing.T) {
		a := v1.HTTPGetAction{Path: "/ok", Port: intstr.FromString("nope")}
		if _, _, err := httpURL(&a, container, host); err == nil {
			t.Error("no error for a port name the container does not have")
		}
	})
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func TestTCPProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	open := l.Addr().(*net.TCPAddr).Port
	for _, tc := range []struct {
		name string
		port int
		want outcome
	}{
		{"open port", open, outcomeSuccess},
		{"closed port", freePort(t), outcomeFailure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, out, err := tcpProbe(context.Background(), "127.0.0.1", tc.port, time.Second)
			if err != nil || got != tc.want {
				t.Errorf("got (%v, %q, %v), want %v", got, out, err, tc.want)
			}
		})
	}
}

func TestGRPCProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("down", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go srv.Serve(l)
	defer srv.Stop()
	port := l.Addr().(*net.TCPAddr).Port

	// A gRPC server without the health service.
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bare := grpc.NewServer()
	go bare.Serve(l2)
	defer bare.Stop()

	for _, tc := range []struct {
		name, service string
		port          int
		timeout       time.Duration // 5s, not reached, unless the case must time out
		want          outcome
		contains      string
	}{
		{"serving", "", port, 0, outcomeSuccess, "service healthy"},
		{"not serving", "down", port, 0, outcomeFailure, `service unhealthy (responded with "NOT_SERVING")`},
		{"unknown service", "nope", port, 0, outcomeFailure, "health rpc probe failed"},
		{"no health service", "", l2.Addr().(*net.TCPAddr).Port, 0, outcomeFailure, "does not implement the grpc health protocol"},
		{"nothing listening", "", freePort(t), 500 * time.Millisecond, outcomeFailure, "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			to := tc.timeout
			if to == 0 {
				to = 5 * time.Second
			}
			got, out, err := grpcProbe(context.Background(), "127.0.0.1", tc.port, tc.service, to)
			if err != nil || got != tc.want || !strings.Contains(out, tc.contains) {
				t.Errorf("got (%v, %q, %v), want %v containing %q", got, out, err, tc.want, tc.contains)
			}
		})
	}
}
