package nodeapi

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authnv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authzv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/utils/clock"
)

// The node API's authentication and authorisation, the kubelet's model
// (pkg/kubelet/server/auth.go and its filter in server.go) without
// k8s.io/apiserver:
//
//	request ──> authenticate: 1. a client certificate verified against the
//	            client CA (user = CN, groups = O); 2. a bearer token checked
//	            with a TokenReview; 3. anonymous (system:anonymous) only with
//	            --anonymous-auth. None: 401 Unauthorized.
//	        ──> authorise: a SubjectAccessReview of verb (from the HTTP
//	            method) on nodes/<subresource> named after this node; the
//	            fine-grained subresource first (pods, healthz), then the
//	            kubelet's fallback (proxy). Denied: 403 with the attributes,
//	            never pod data.
//	        ──> the node API.
//
// Decisions are cached as the kubelet's webhooks cache them: a token's
// review 2 minutes (a failed one 10 s), an allowed access 5 minutes, a
// denied one 30 s.

// User is an authenticated client of the node API.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// Anonymous is the user of requests without credentials, when allowed.
var Anonymous = User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}

// AuthConfig configures the node API's authentication and authorisation.
type AuthConfig struct {
	// NodeName names the node objects access is checked against.
	NodeName string
	// ClientCAs verifies client certificates; nil: certificates do not
	// authenticate.
	ClientCAs *x509.CertPool
	// TokenReviews checks bearer tokens; nil: tokens do not authenticate.
	TokenReviews authnv1client.TokenReviewInterface
	// Anonymous lets requests without credentials in as Anonymous.
	Anonymous bool
	// SubjectAccessReviews authorises requests; nil: every authenticated
	// request is allowed (--authorization-mode=AlwaysAllow).
	SubjectAccessReviews authzv1client.SubjectAccessReviewInterface
	// Clock times the caches; nil: the real clock.
	Clock clock.PassiveClock
}

// The kubelet's webhook cache TTLs.
const (
	tokenCacheTTL        = 2 * time.Minute
	tokenFailureCacheTTL = 10 * time.Second
	allowedCacheTTL      = 5 * time.Minute
	deniedCacheTTL       = 30 * time.Second
	// maxCacheEntries bounds each cache; a full cache is emptied (a burst
	// of distinct users or tokens costs reviews, never memory).
	maxCacheEntries = 4096
)

// Auth is the node API's filter.
type Auth struct {
	cfg    AuthConfig
	tokens ttlCache[tokenResult]
	access ttlCache[bool]
}

type tokenResult struct {
	user User
	ok   bool
}

// NewAuth returns the filter for cfg.
func NewAuth(cfg AuthConfig) (*Auth, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("node API auth: no node name")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Auth{cfg: cfg, tokens: newTTLCache[tokenResult](cfg.Clock), access: newTTLCache[bool](cfg.Clock)}, nil
}

// errUnauthenticated: no credential authenticated the request.
var errUnauthenticated = errors.New("Unauthorized")

// Wrap returns next behind authentication and authorisation.
func (a *Auth) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, err := a.authenticate(r)
		if err != nil {
			log.G(r.Context()).WithError(err).WithField("path", r.URL.Path).WithField("remote", r.RemoteAddr).Debug("node API: unauthenticated request")
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		allowed, attrs, err := a.authorize(r.Context(), u, r)
		if err != nil {
			log.G(r.Context()).WithError(err).WithField("user", u.Name).WithField("path", r.URL.Path).Warn("node API: authorization failed")
			http.Error(w, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=nodes, subresource(s)=%v)", u.Name, attrs.verb, attrs.subresources), http.StatusInternalServerError)
			return
		}
		if !allowed {
			http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=%v)", u.Name, attrs.verb, attrs.subresources), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authenticate returns the request's user: its verified client
// certificate's, its bearer token's, or Anonymous when allowed.
func (a *Auth) authenticate(r *http.Request) (User, error) {
	var errs []error
	if a.cfg.ClientCAs != nil && r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		u, err := a.certUser(r.TLS.PeerCertificates)
		if err == nil {
			return u, nil
		}
		errs = append(errs, err)
	}
	if token, ok := bearerToken(r); ok && a.cfg.TokenReviews != nil {
		u, err := a.tokenUser(r.Context(), token)
		if err == nil {
			return u, nil
		}
		errs = append(errs, err)
	}
	if a.cfg.Anonymous {
		return Anonymous, nil
	}
	return User{}, errors.Join(append([]error{errUnauthenticated}, errs...)...)
}

func (a *Auth) certUser(chain []*x509.Certificate) (User, error) {
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	leaf := chain[0]
	_, err := leaf.Verify(x509.VerifyOptions{
		Roots: a.cfg.ClientCAs, Intermediates: inter, CurrentTime: a.cfg.Clock.Now(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return User{}, fmt.Errorf("client certificate %q: %w", leaf.Subject.CommonName, err)
	}
	if leaf.Subject.CommonName == "" {
		return User{}, errors.New("client certificate without a common name")
	}
	return User{Name: leaf.Subject.CommonName, Groups: leaf.Subject.Organization}, nil
}

func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// tokenUser reviews token through the API (cached by the token's hash).
func (a *Auth) tokenUser(ctx context.Context, token string) (User, error) {
	sum := sha256.Sum256([]byte(token))
	key := string(sum[:])
	if res, ok := a.tokens.get(key); ok {
		if !res.ok {
			return User{}, errors.New("token rejected (cached)")
		}
		return res.user, nil
	}
	review, err := a.cfg.TokenReviews.Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return User{}, fmt.Errorf("reviewing a bearer token: %w", err)
	}
	if !review.Status.Authenticated {
		a.tokens.put(key, tokenResult{}, tokenFailureCacheTTL)
		return User{}, fmt.Errorf("token rejected: %s", review.Status.Error)
	}
	ui := review.Status.User
	u := User{Name: ui.Username, UID: ui.UID, Groups: ui.Groups}
	if len(ui.Extra) > 0 {
		u.Extra = map[string][]string{}
		for k, v := range ui.Extra {
			u.Extra[k] = v
		}
	}
	a.tokens.put(key, tokenResult{user: u, ok: true}, tokenCacheTTL)
	return u, nil
}

// requestAttributes is what a request asks of the node object: a verb
// and the subresources to try, most specific first.
type requestAttributes struct {
	verb         string
	subresources []string
}

// The node API's paths with their own subresources (the kubelet's).
var subresourcePaths = []struct{ path, subresource string }{
	{"/stats", "stats"},
	{"/metrics", "metrics"},
	{"/logs", "log"},
	{"/checkpoint", "checkpoint"},
	{"/statusz", "statusz"},
	{"/flagz", "configz"},
}

// nodeRequestAttributes maps a request as the kubelet's
// GetRequestAttributes with fine-grained authorisation (on by default in
// v1.35): /pods, /runningpods and /healthz ask for nodes/pods or
// nodes/healthz and fall back to nodes/proxy; /stats, /metrics, /logs,
// /checkpoint have their own subresource; everything else (exec,
// attach, portForward, run, containerLogs) is nodes/proxy.
func nodeRequestAttributes(r *http.Request) requestAttributes {
	verb := map[string]string{"POST": "create", "GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[r.Method]
	p := r.URL.Path
	var subs []string
	switch {
	case isSubpath(p, "/pods"), isSubpath(p, "/runningpods"):
		subs = append(subs, "pods")
	case isSubpath(p, "/healthz"):
		subs = append(subs, "healthz")
	case isSubpath(p, "/configz"):
		subs = append(subs, "configz")
	}
	for _, sp := range subresourcePaths {
		if isSubpath(p, sp.path) {
			return requestAttributes{verb: verb, subresources: append(subs, sp.subresource)}
		}
	}
	return requestAttributes{verb: verb, subresources: append(subs, "proxy")}
}

// isSubpath reports whether subpath is path or below it.
func isSubpath(subpath, path string) bool {
	path = strings.TrimSuffix(path, "/")
	return subpath == path || (strings.HasPrefix(subpath, path) && len(subpath) > len(path) && subpath[len(path)] == '/')
}

// authorize asks for each of the request's subresources in turn until one
// is allowed.
func (a *Auth) authorize(ctx context.Context, u User, r *http.Request) (bool, requestAttributes, error) {
	attrs := nodeRequestAttributes(r)
	if a.cfg.SubjectAccessReviews == nil {
		return true, attrs, nil
	}
	for _, sub := range attrs.subresources {
		ok, err := a.allowed(ctx, u, attrs.verb, sub)
		if err != nil {
			return false, attrs, err
		}
		if ok {
			return true, attrs, nil
		}
	}
	return false, attrs, nil
}

func (a *Auth) allowed(ctx context.Context, u User, verb, subresource string) (bool, error) {
	key := strings.Join([]string{u.Name, u.UID, strings.Join(u.Groups, ","), fmt.Sprint(u.Extra), verb, subresource}, "\x00")
	if ok, hit := a.access.get(key); hit {
		return ok, nil
	}
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: u.Name, UID: u.UID, Groups: u.Groups,
		ResourceAttributes: &authzv1.ResourceAttributes{
			Verb: verb, Group: "", Version: "v1", Resource: "nodes", Subresource: subresource, Name: a.cfg.NodeName,
		},
	}}
	if len(u.Extra) > 0 {
		sar.Spec.Extra = map[string]authzv1.ExtraValue{}
		for k, v := range u.Extra {
			sar.Spec.Extra[k] = v
		}
	}
	res, err := a.cfg.SubjectAccessReviews.Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("SubjectAccessReview of %s %s nodes/%s: %w", u.Name, verb, subresource, err)
	}
	ttl := deniedCacheTTL
	if res.Status.Allowed {
		ttl = allowedCacheTTL
	}
	a.access.put(key, res.Status.Allowed, ttl)
	return res.Status.Allowed, nil
}

// ttlCache is a small map whose entries expire.
type ttlCache[V any] struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	m     map[string]ttlEntry[V] // guarded by mu
}

type ttlEntry[V any] struct {
	v       V
	expires time.Time
}

func newTTLCache[V any](c clock.PassiveClock) ttlCache[V] {
	return ttlCache[V]{clock: c, m: map[string]ttlEntry[V]{}}
}

func (c *ttlCache[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || !c.clock.Now().Before(e.expires) {
		delete(c.m, key)
		var zero V
		return zero, false
	}
	return e.v, true
}

func (c *ttlCache[V]) put(key string, v V, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCacheEntries {
		c.m = map[string]ttlEntry[V]{}
	}
	c.m[key] = ttlEntry[V]{v: v, expires: c.clock.Now().Add(ttl)}
}
