package nodeapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestReadOnly(t *testing.T) {
	// node stands for the node API's mux: it echoes the path it was given.
	node := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "node "+r.URL.Path) })
	healthz := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "checks "+r.URL.Path) })
	h := ReadOnly(node, healthz)
	tests := map[string]struct {
		method, path string
		wantCode     int
		wantBody     string
	}{
		"/pods":                   {path: "/pods", wantCode: 200, wantBody: "node /pods"},
		"/pods/":                  {path: "/pods/", wantCode: 200, wantBody: "node /pods/"},
		"/stats/summary":          {path: "/stats/summary", wantCode: 200, wantBody: "node /stats/summary"},
		"/metrics":                {path: "/metrics", wantCode: 200, wantBody: "node /metrics"},
		"/metrics/resource":       {path: "/metrics/resource", wantCode: 200, wantBody: "node /metrics/resource"},
		"/metrics/probes":         {path: "/metrics/probes", wantCode: 200, wantBody: "node /metrics/probes"},
		"/metrics/cadvisor":       {path: "/metrics/cadvisor", wantCode: 200, wantBody: "node /metrics/cadvisor"},
		"/healthz: the checks":    {path: "/healthz", wantCode: 200, wantBody: "checks /healthz"},
		"/healthz/<check>":        {path: "/healthz/syncloop", wantCode: 200, wantBody: "checks /healthz/syncloop"},
		"exec disabled":           {method: http.MethodPost, path: "/exec/ns/p/c", wantCode: 405, wantBody: "Debug endpoints are disabled.\n"},
		"container logs disabled": {path: "/containerLogs/ns/p/c", wantCode: 405, wantBody: "Debug endpoints are disabled.\n"},
		"running pods disabled":   {path: "/runningpods/", wantCode: 405, wantBody: "Debug endpoints are disabled.\n"},
		"pprof disabled":          {path: "/debug/pprof/heap", wantCode: 405, wantBody: "Debug endpoints are disabled.\n"},
		"/configz not served":     {path: "/configz", wantCode: 404, wantBody: "404 page not found\n"},
		"anything else 404":       {path: "/checkpoint/ns/p/c", wantCode: 404, wantBody: "404 page not found\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(method, tc.path, nil))
			if rec.Code != tc.wantCode || rec.Body.String() != tc.wantBody {
				t.Errorf("%s %s: %d %q, want %d %q", method, tc.path, rec.Code, rec.Body.String(), tc.wantCode, tc.wantBody)
			}
		})
	}
}

func TestServeReadOnly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := ReadOnly(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{"kind":"PodList"}`) }), http.NotFoundHandler())
	addr, err := ServeReadOnly(ctx, "127.0.0.1:0", h)
	if err != nil {
		t.Fatal(err)
	}
	// Plain HTTP, no credentials.
	resp, err := http.Get("http://" + addr.String() + "/pods")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "PodList") {
		t.Errorf("GET /pods: %d %q", resp.StatusCode, body)
	}
	if _, err := ServeReadOnly(ctx, addr.String(), h); err == nil || !strings.Contains(err.Error(), "read-only port") {
		t.Errorf("a second listener on %s: %v, want the read-only port's bind error", addr, err)
	}
}
