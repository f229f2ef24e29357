package credentialprovider

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeletv1 "k8s.io/kubelet/config/v1"
	credentialproviderapi "k8s.io/kubelet/pkg/apis/credentialprovider"
	"k8s.io/utils/clock"
)

// globalCacheKey is the cache key of a response whose cacheKeyType is
// Global (the kubelet's; no image or registry is spelt so).
const globalCacheKey = "<global>"

// provider is one configured provider: its plugin, its matchImages, its
// cache and, in service account token mode, its token attributes (the
// kubelet's pluginProvider). It is shared by every pod and node.
type provider struct {
	name                 string
	clock                clock.PassiveClock
	matchImages          []string
	defaultCacheDuration time.Duration
	plugin               *execPlugin
	cache                *cache
	// group runs one plugin for concurrent lookups of one image (one
	// image, token and annotations in token mode).
	group singleflight.Group
	// sa is the token mode's settings; nil: the provider has no
	// tokenAttributes.
	sa *tokenAttributes
}

// tokenAttributes are a provider's tokenAttributes, validated.
type tokenAttributes struct {
	audience              string
	requireServiceAccount bool
	// required and optional are the annotation keys passed to the plugin.
	required, optional []string
	cacheType          kubeletv1.ServiceAccountTokenCacheType
}

// requiredAnnotationNotFoundError: the pod's service account lacks one of
// requiredServiceAccountAnnotationKeys. The plugin is then not run, and
// that is no error: the annotation is how a workload opts in.
type requiredAnnotationNotFoundError string

func (e requiredAnnotationNotFoundError) Error() string {
	return fmt.Sprintf("required annotation %s not found", string(e))
}

// allowed reports whether one of matchImages matches image.
func (p *provider) allowed(image string) bool {
	for _, m := range p.matchImages {
		if ok, _ := URLsMatch(m, image); ok {
			return true
		}
	}
	return false
}

// provide returns the credentials the provider gives pod for image (a
// repository), from its cache or from a run of its plugin, with the
// service account they came for in token mode (nil: node-wide). It is the
// kubelet's pluginProvider.provide:
//
//  1. an image no matchImages entry matches: nothing, no run;
//  2. token mode: a pod without a service account gets nothing when
//     requireServiceAccount, else the plugin runs without a token; with
//     one, its service account is read (a missing required annotation:
//     nothing; another error: an error), a token of it bound to the pod
//     requested (TokenRequest, audience serviceAccountTokenAudience), and
//     the cache keyed by the service account too (namespace, name, UID,
//     the annotations passed; the token's hash with cacheType Token);
//  3. the cache, by the image, its registry, then the global key;
//  4. else the plugin runs (once for concurrent lookups); its response's
//     cacheKeyType says under which key it is cached (Image, Registry or
//     Global; another value: an error), its cacheDuration for how long
//     (none: defaultCacheDuration; 0: not cached). In token mode with
//     cacheType ServiceAccount, a password equal to the token is refused.
func (p *provider) provide(ctx context.Context, a Access, pod Pod, image string) (map[string]Credential, *ServiceAccountCoordinates, error) {
	if !p.allowed(image) {
		return nil, nil, nil
	}
	var (
		token, tokenHash, saKey string
		annotations             map[string]string
		coords                  *ServiceAccountCoordinates
	)
	if p.sa != nil {
		if pod.ServiceAccountName == "" && p.sa.requireServiceAccount {
			log.G(ctx).WithField("provider", p.name).WithField("image", image).WithField("pod", pod.Namespace+"/"+pod.Name).
				Debug("Service account name is empty")
			return nil, nil, nil
		}
		if pod.ServiceAccountName != "" {
			uid, ann, err := p.sa.serviceAccountData(ctx, a, pod.Namespace, pod.ServiceAccountName)
			if err != nil {
				var missing requiredAnnotationNotFoundError
				if errors.As(err, &missing) {
					log.G(ctx).WithError(err).WithField("provider", p.name).WithField("image", image).WithField("pod", pod.Namespace+"/"+pod.Name).
						WithField("serviceAccount", pod.Namespace+"/"+pod.ServiceAccountName).Debug("Failed to get service account data")
					return nil, nil, nil
				}
				return nil, nil, fmt.Errorf("failed to get service account: %w", err)
			}
			if token, err = p.sa.token(ctx, a, pod, uid); err != nil {
				return nil, nil, fmt.Errorf("failed to get service account token: %w", err)
			}
			tokenHash = hashIfNotEmpty(token)
			parts := []string{pod.Namespace, pod.ServiceAccountName, string(uid), annotationsKey(ann)}
			if p.sa.cacheType == CacheTypeToken {
				parts = append(parts, "token", tokenHash)
			}
			saKey = cacheKey(parts...)
			annotations = ann
			coords = &ServiceAccountCoordinates{UID: string(uid), Namespace: pod.Namespace, Name: pod.ServiceAccountName}
		}
	}

	for _, base := range []string{image, registryOf(image), globalCacheKey} {
		if auth, ok := p.cache.get(cacheKey(base, saKey)); ok {
			return auth, coords, nil
		}
	}

	flight := image
	if p.sa != nil && pod.ServiceAccountName != "" {
		flight = cacheKey(image, tokenHash, annotationsKey(annotations))
	}
	res, err, _ := p.group.Do(flight, func() (any, error) {
		// Not the caller's cancellation: others may wait for this run.
		return p.plugin.run(context.WithoutCancel(ctx), image, token, annotations)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("failed to get credential from external registry credential provider: %w", err)
	}
	resp := res.(*credentialproviderapi.CredentialProviderResponse)
	if token != "" && p.sa.cacheType != CacheTypeToken {
		for _, ac := range resp.Auth {
			if ac.Password == token {
				return nil, nil, fmt.Errorf("credential provider plugin returned the service account token as the password which is not allowed when service account cache type is not set to 'Token'")
			}
		}
	}
	var base string
	switch resp.CacheKeyType {
	case credentialproviderapi.ImagePluginCacheKeyType:
		base = image
	case credentialproviderapi.RegistryPluginCacheKeyType:
		base = registryOf(image)
	case credentialproviderapi.GlobalPluginCacheKeyType:
		base = globalCacheKey
	default:
		return nil, nil, fmt.Errorf("credential provider plugin did not return a valid cacheKeyType: %s", resp.CacheKeyType)
	}
	auth := make(map[string]Credential, len(resp.Auth))
	for k, ac := range resp.Auth {
		auth[k] = Credential{Username: ac.Username, Password: ac.Password}
	}
	var ttl time.Duration
	switch {
	case resp.CacheDuration != nil:
		ttl = resp.CacheDuration.Duration
	default:
		ttl = p.defaultCacheDuration
	}
	if ttl == 0 {
		return auth, coords, nil
	}
	p.cache.add(cacheKey(base, saKey), auth, p.clock.Now().Add(ttl))
	return auth, coords, nil
}

// serviceAccountData reads the pod's service account: its UID and the
// annotations passed to the plugin (every required one, or an error; the
// optional ones it has).
func (t *tokenAttributes) serviceAccountData(ctx context.Context, a Access, namespace, name string) (types.UID, map[string]string, error) {
	if a.ServiceAccount == nil {
		return "", nil, errors.New("cannot get ServiceAccounts when kubelet is in standalone mode")
	}
	sa, err := a.ServiceAccount(ctx, namespace, name)
	if err != nil {
		return "", nil, err
	}
	ann := make(map[string]string, len(t.required)+len(t.optional))
	for _, k := range t.required {
		v, ok := sa.Annotations[k]
		if !ok {
			return "", nil, requiredAnnotationNotFoundError(k)
		}
		ann[k] = v
	}
	for _, k := range t.optional {
		if v, ok := sa.Annotations[k]; ok {
			ann[k] = v
		}
	}
	return sa.UID, ann, nil
}

// token requests a token of the pod's service account for the plugin:
// the audience serviceAccountTokenAudience, bound to the pod, the
// service account's UID as a precondition, the API's default lifetime
// (the kubelet's getServiceAccountToken).
func (t *tokenAttributes) token(ctx context.Context, a Access, pod Pod, saUID types.UID) (string, error) {
	if a.Token == nil {
		return "", errors.New("cannot request service account tokens without an API server")
	}
	tr, err := a.Token(ctx, pod.Namespace, pod.ServiceAccountName, &authenticationv1.TokenRequest{
		ObjectMeta: metav1.ObjectMeta{UID: saUID},
		Spec: authenticationv1.TokenRequestSpec{
			Audiences:      []string{t.audience},
			BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
		},
	})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// registryOf is an image's first path component: its registry host and
// port (the kubelet's parseRegistry).
func registryOf(image string) string {
	r, _, _ := strings.Cut(image, "/")
	return r
}

func hashIfNotEmpty(s string) string {
	if s == "" {
		return ""
	}
	return fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(s)))
}

// cacheKey joins parts unambiguously (each prefixed by its length).
func cacheKey(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(strconv.Itoa(len(p)))
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}

// annotationsKey is annotations as one cache key part, by sorted key.
func annotationsKey(ann map[string]string) string {
	keys := make([]string, 0, len(ann))
	for k := range ann {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := []string{strconv.Itoa(len(keys))}
	for _, k := range keys {
		parts = append(parts, k, ann[k])
	}
	return cacheKey(parts...)
}
