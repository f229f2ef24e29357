package main

import (
	"net/url"
	"strings"
	"testing"
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
