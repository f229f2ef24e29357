package main

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

func TestRequestKind(t *testing.T) {
	for name, tc := range map[string]struct {
		method, url, want string
	}{
		"lease renewal":     {"PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", "update leases"},
		"node get":          {"GET", "/api/v1/nodes/n1?resourceVersion=0", "get nodes"},
		"node watch":        {"GET", "/api/v1/nodes?fieldSelector=metadata.name%3Dn1&watch=true", "watch nodes"},
		"node list":         {"GET", "/api/v1/nodes?fieldSelector=metadata.name%3Dn1&limit=500", "list nodes"},
		"node status patch": {"PATCH", "/api/v1/nodes/n1/status", "patch nodes/status"},
		"pod status":        {"PUT", "/api/v1/namespaces/ns/pods/p/status", "update pods/status"},
		"pod watch, all ns": {"GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&watch=1", "watch pods"},
		"event":             {"POST", "/api/v1/namespaces/ns/events", "create events"},
		"pod delete":        {"DELETE", "/api/v1/namespaces/ns/pods/p", "delete pods"},
		"token request":     {"POST", "/api/v1/namespaces/ns/serviceaccounts/sa/token", "create serviceaccounts/token"},
		"namespace get":     {"GET", "/api/v1/namespaces/ns", "get namespaces"},
		"csr":               {"POST", "/apis/certificates.k8s.io/v1/certificatesigningrequests", "create certificatesigningrequests"},
		"version":           {"GET", "/version", "get /version"},
		"discovery":         {"GET", "/apis/coordination.k8s.io/v1", "get /apis/coordination.k8s.io/v1"},
	} {
		t.Run(name, func(t *testing.T) {
			u, err := url.Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			if got := requestKind(tc.method, u); got != tc.want {
				t.Errorf("requestKind(%s %s) = %q, want %q", tc.method, tc.url, got, tc.want)
			}
		})
	}
}

func TestKindSummary(t *testing.T) {
	got := kindSummary(map[string]float64{"get nodes": 0.5, "update leases": 0.1, "watch pods": 0.1}, 30)
	if want := "15 get nodes, 3 update leases, 3 watch pods"; got != want {
		t.Errorf("kindSummary = %q, want %q", got, want)
	}
	if got := kindSummary(nil, 30); !strings.Contains(got, "none") {
		t.Errorf("kindSummary(nil) = %q, want none", got)
	}
}

// The proxy forwards, counts by kind and, with BENCH_PROXY_LOG, writes a
// line per request with its response code.
func TestProxyCountsAndLogs(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte("{}"))
	}))
	defer api.Close()
	logPath := filepath.Join(t.TempDir(), "requests.log")
	t.Setenv("BENCH_PROXY_LOG", logPath)
	p, err := startProxy(&rest.Config{Host: api.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, m := range []string{http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(m, "http://"+p.addr+"/api/v1/namespaces/ns/pods/p/status", nil)
		if m == http.MethodDelete {
			req.URL.Path = "/api/v1/namespaces/ns/pods/p"
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if p.Count() != 2 || p.ByKind()["update pods/status"] != 1 || p.ByKind()["delete pods"] != 1 {
		t.Errorf("counts %d %v, want one update pods/status and one delete pods", p.Count(), p.ByKind())
	}
	// The proxy writes a request's line after the response has reached
	// the client (the reverse proxy flushes at once), so the line of the
	// first request may follow the second's: wait for both, in any order.
	var b []byte
	deadline := time.Now().Add(5 * time.Second)
	for {
		var err error
		if b, err = os.ReadFile(logPath); err != nil {
			t.Fatal(err)
		}
		if strings.Count(string(b), "\n") >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	log := string(b)
	if strings.Count(log, "\n") != 2 || !strings.Contains(log, " 200 update pods/status /api/v1/namespaces/ns/pods/p/status\n") ||
		!strings.Contains(log, " 404 delete pods /api/v1/namespaces/ns/pods/p\n") {
		t.Errorf("request log:\n%s", b)
	}
}
