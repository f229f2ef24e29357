package volume

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// maxTokenAge is how long a token is used at most, whatever its
// expiration (the kubelet's maxTTL).
const maxTokenAge = 24 * time.Hour

// tokenCache keeps the pod-bound service account tokens of the node's
// pods and renews one, as the kubelet's token manager does, once 80% of its
// lifetime has passed or it is 24 h old.
type tokenCache struct {
	objects Objects
	clock   clock.Clock

	mu sync.Mutex
	// tokens by key (pod, service account, audiences, expiration).
	// Guarded by mu.
	tokens map[string]*cachedToken
}

type cachedToken struct {
	uid    types.UID
	tr     *authenticationv1.TokenRequest
	issued time.Time
}

func newTokenCache(o Objects, c clock.Clock) *tokenCache {
	return &tokenCache{objects: o, clock: c, tokens: map[string]*cachedToken{}}
}

func tokenKey(uid types.UID, namespace, sa string, req *authenticationv1.TokenRequest) string {
	exp := int64(0)
	if req.Spec.ExpirationSeconds != nil {
		exp = *req.Spec.ExpirationSeconds
	}
	return fmt.Sprintf("%s/%s/%s/%s/%d", uid, namespace, sa, strings.Join(req.Spec.Audiences, ","), exp)
}

// needsRefresh reports whether t must be renewed at now.
func needsRefresh(t *cachedToken, now time.Time) bool {
	exp := t.tr.Status.ExpirationTimestamp.Time
	if !now.Before(exp) {
		return true
	}
	if now.Sub(t.issued) >= maxTokenAge {
		return true
	}
	lifetime := exp.Sub(t.issued)
	return now.Sub(t.issued) >= lifetime*8/10
}

func (c *tokenCache) get(ctx context.Context, uid types.UID, namespace, sa string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	key := tokenKey(uid, namespace, sa, req)
	now := c.clock.Now()
	c.mu.Lock()
	t, ok := c.tokens[key]
	c.mu.Unlock()
	if ok && !needsRefresh(t, now) {
		return t.tr, nil
	}
	tr, err := c.objects.RequestToken(ctx, namespace, sa, req.DeepCopy())
	if err != nil {
		if ok && now.Before(t.tr.Status.ExpirationTimestamp.Time) {
			// Still valid: keep using it, retry at the next sync.
			return t.tr, nil
		}
		return nil, err
	}
	c.mu.Lock()
	c.tokens[key] = &cachedToken{uid: uid, tr: tr, issued: now}
	c.mu.Unlock()
	return tr, nil
}

// ServiceAccountToken returns a token of serviceAccount bound to the pod
// that req names (its BoundObjectRef), from the node's token cache: the
// kubelet's token manager, which its projected volumes and its image
// credential providers (their service account token mode) share. A token
// is renewed as a projected volume's is; the pod's tokens are forgotten
// when its volumes are unmounted.
func (m *Manager) ServiceAccountToken(ctx context.Context, namespace, serviceAccount string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	ref := req.Spec.BoundObjectRef
	if ref == nil || ref.Kind != "Pod" || ref.UID == "" {
		return nil, fmt.Errorf("a token of service account %s/%s for the node must be bound to a pod", namespace, serviceAccount)
	}
	return m.tokens.get(ctx, ref.UID, namespace, serviceAccount, req)
}

// forget drops the tokens of pod uid.
func (c *tokenCache) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, t := range c.tokens {
		if t.uid == uid {
			delete(c.tokens, k)
		}
	}
}
