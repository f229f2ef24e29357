package nodeapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authzv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeReviews answers TokenReviews from a token table and
// SubjectAccessReviews from a rule function, counting the calls.
type fakeReviews struct {
	users   map[string]string // token -> user
	allow   func(user, verb, subresource string) bool
	tokenN  int
	sarN    int
	sarErr  error
	lastSAR *authzv1.SubjectAccessReview
}

type fakeTokenReviews struct{ f *fakeReviews }

func (t fakeTokenReviews) Create(_ context.Context, r *authnv1.TokenReview, _ metav1.CreateOptions) (*authnv1.TokenReview, error) {
	t.f.tokenN++
	out := r.DeepCopy()
	if u, ok := t.f.users[r.Spec.Token]; ok {
		out.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: u, Groups: []string{"system:serviceaccounts"}}}
	} else {
		out.Status = authnv1.TokenReviewStatus{Error: "invalid bearer token"}
	}
	return out, nil
}

type fakeSARs struct {
	authzv1client.SubjectAccessReviewInterface
	f *fakeReviews
}

func (s fakeSARs) Create(_ context.Context, r *authzv1.SubjectAccessReview, _ metav1.CreateOptions) (*authzv1.SubjectAccessReview, error) {
	s.f.sarN++
	s.f.lastSAR = r
	if s.f.sarErr != nil {
		return nil, s.f.sarErr
	}
	out := r.DeepCopy()
	a := r.Spec.ResourceAttributes
	out.Status.Allowed = a.Resource == "nodes" && a.Name == "n1" && s.f.allow(r.Spec.User, a.Verb, a.Subresource)
	return out, nil
}

func newCA(t *testing.T, cn string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c, key
}

func clientCert(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string, orgs ...string) *x509.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn, Organization: orgs}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c
}

func TestAuthMatrix(t *testing.T) {
	ca, caKey := newCA(t, "cluster-ca")
	other, otherKey := newCA(t, "someone-else")
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	f := &fakeReviews{users: map[string]string{"metrics-token": "system:serviceaccount:kube-system:metrics-server", "nobody-token": "nobody"},
		allow: func(user, verb, sub string) bool {
			switch user {
			case "kube-apiserver-kubelet-client":
				return true
			case "system:serviceaccount:kube-system:metrics-server":
				return verb == "get" && (sub == "stats" || sub == "metrics")
			case "pods-reader":
				return sub == "pods"
			}
			return false
		}}
	clk := clocktesting.NewFakePassiveClock(time.Now())
	auth, err := NewAuth(AuthConfig{NodeName: "n1", ClientCAs: pool, TokenReviews: fakeTokenReviews{f}, SubjectAccessReviews: fakeSARs{f: f}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	secret := "pod-data-that-must-not-leak"
	h := auth.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, secret) }))
	apiserver := clientCert(t, ca, caKey, "kube-apiserver-kubelet-client", "system:masters")
	forged := clientCert(t, other, otherKey, "kube-apiserver-kubelet-client", "system:masters")
	podsReader := clientCert(t, ca, caKey, "pods-reader")
	for _, tc := range []struct {
		name, method, path, token string
		cert                      *x509.Certificate
		code                      int
	}{
		{name: "no credentials", method: "GET", path: "/pods", code: 401},
		{name: "certificate of another CA", method: "POST", path: "/exec/ns/p/c", cert: forged, code: 401},
		{name: "unknown token", method: "GET", path: "/stats/summary", token: "guess", code: 401},
		{name: "token without the right", method: "GET", path: "/stats/summary", token: "nobody-token", code: 403},
		{name: "token with the right", method: "GET", path: "/stats/summary", token: "metrics-token", code: 200},
		{name: "metrics reader cannot exec", method: "POST", path: "/exec/ns/p/c", token: "metrics-token", code: 403},
		{name: "API server's client certificate", method: "POST", path: "/exec/ns/p/c", cert: apiserver, code: 200},
		{name: "fine-grained pods", method: "GET", path: "/pods", cert: podsReader, code: 200},
		{name: "fine-grained does not open proxy", method: "GET", path: "/containerLogs/ns/p/c", cert: podsReader, code: 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.path, nil)
			if tc.token != "" {
				r.Header.Set("Authorization", "Bearer "+tc.token)
			}
			if tc.cert != nil {
				r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{tc.cert}}
			} else {
				r.TLS = &tls.ConnectionState{}
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			body := w.Body.String()
			if w.Code != tc.code {
				t.Fatalf("%s %s: %d %q, want %d", tc.method, tc.path, w.Code, body, tc.code)
			}
			if tc.code != 200 && strings.Contains(body, secret) {
				t.Errorf("a %d answer carries the handler's data: %q", tc.code, body)
			}
		})
	}
}

func TestNodeRequestAttributes(t *testing.T) {
	for _, tc := range []struct{ method, path, verb, subs string }{
		{"GET", "/pods", "get", "pods,proxy"},
		{"GET", "/runningpods/", "get", "pods,proxy"},
		{"GET", "/healthz", "get", "healthz,proxy"},
		{"GET", "/configz", "get", "configz,proxy"},
		{"GET", "/flagz", "get", "configz"},
		{"GET", "/stats/summary", "get", "stats"},
		{"GET", "/metrics/resource", "get", "metrics"},
		{"GET", "/metrics", "get", "metrics"},
		{"GET", "/logs/syslog", "get", "log"},
		{"GET", "/containerLogs/ns/p/c", "get", "proxy"},
		{"POST", "/exec/ns/p/c", "create", "proxy"},
		{"GET", "/portForward/ns/p", "get", "proxy"},
		{"POST", "/checkpoint/ns/p/c", "create", "checkpoint"},
		{"GET", "/statsx", "get", "proxy"},
		{"DELETE", "/pods", "delete", "pods,proxy"},
	} {
		a := nodeRequestAttributes(httptest.NewRequest(tc.method, tc.path, nil))
		if a.verb != tc.verb || strings.Join(a.subresources, ",") != tc.subs {
			t.Errorf("%s %s: verb %q subresources %v, want %q %s", tc.method, tc.path, a.verb, a.subresources, tc.verb, tc.subs)
		}
	}
}

// TestAuthCaches: a token's review is reused for 2 minutes, an allowed
// access for 5 minutes, a denied one for 30 s (the kubelet's TTLs).
func TestAuthCaches(t *testing.T) {
	allowed := false
	f := &fakeReviews{users: map[string]string{"t": "u"}, allow: func(string, string, string) bool { return allowed }}
	clk := clocktesting.NewFakePassiveClock(time.Now())
	auth, err := NewAuth(AuthConfig{NodeName: "n1", TokenReviews: fakeTokenReviews{f}, SubjectAccessReviews: fakeSARs{f: f}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	h := auth.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	get := func() int {
		r := httptest.NewRequest("GET", "/stats/summary", nil)
		r.Header.Set("Authorization", "Bearer t")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	if code := get(); code != 403 || f.tokenN != 1 || f.sarN != 1 {
		t.Fatalf("first: %d, %d token reviews, %d SARs", code, f.tokenN, f.sarN)
	}
	allowed = true
	clk.SetTime(clk.Now().Add(29 * time.Second))
	if code := get(); code != 403 || f.sarN != 1 || f.tokenN != 1 {
		t.Errorf("denial within 30s: %d, %d SARs (want the cached denial)", code, f.sarN)
	}
	clk.SetTime(clk.Now().Add(2 * time.Second))
	if code := get(); code != 200 || f.sarN != 2 {
		t.Errorf("after 31s: %d, %d SARs (want a new review, allowed)", code, f.sarN)
	}
	allowed = false
	clk.SetTime(clk.Now().Add(4 * time.Minute))
	if code := get(); code != 200 || f.sarN != 2 {
		t.Errorf("allowed within 5 min: %d, %d SARs (want the cached allowance)", code, f.sarN)
	}
	if f.tokenN != 2 {
		t.Errorf("%d token reviews after 4.5 minutes, want 2 (a 2-minute cache)", f.tokenN)
	}
	clk.SetTime(clk.Now().Add(time.Minute + time.Second))
	if code := get(); code != 403 || f.sarN != 3 {
		t.Errorf("after 5 min: %d, %d SARs (want a new review, denied)", code, f.sarN)
	}
	// A review that fails is a 500 naming the attributes, not an
	// allowance.
	f.sarErr = errors.New("API server unreachable")
	clk.SetTime(clk.Now().Add(time.Minute))
	if code := get(); code != 500 {
		t.Errorf("failed review: %d, want 500", code)
	}
}

func TestAnonymous(t *testing.T) {
	f := &fakeReviews{allow: func(user, _, _ string) bool { return user == "system:anonymous" }}
	for _, on := range []bool{false, true} {
		auth, _ := NewAuth(AuthConfig{NodeName: "n1", Anonymous: on, SubjectAccessReviews: fakeSARs{f: f}})
		w := httptest.NewRecorder()
		auth.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, httptest.NewRequest("GET", "/healthz", nil))
		want := 401
		if on {
			want = 200
		}
		if w.Code != want {
			t.Errorf("anonymous-auth=%v: %d, want %d", on, w.Code, want)
		}
	}
	if g := f.lastSAR.Spec.Groups; len(g) != 1 || g[0] != "system:unauthenticated" {
		t.Errorf("anonymous groups %v", g)
	}
}

// FuzzNodeRequestAttributes: any path maps to a verb and at least one
// subresource of nodes, never a panic.
func FuzzNodeRequestAttributes(f *testing.F) {
	for _, s := range []string{"/pods", "/stats/summary", "/exec/a/b/c", "/", "/healthz/", "//stats"} {
		f.Add("GET", s)
	}
	f.Fuzz(func(t *testing.T, method, path string) {
		r := &http.Request{Method: method, URL: &url.URL{Path: path}}
		a := nodeRequestAttributes(r)
		if len(a.subresources) == 0 {
			t.Fatalf("%s %q: no subresource", method, path)
		}
	})
}
