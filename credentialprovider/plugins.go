package credentialprovider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Options are the kubelet's two flags, and what tests replace.
type Options struct {
	// ConfigPath is --image-credential-provider-config: a
	// CredentialProviderConfig file, or a directory of them (ReadConfig).
	ConfigPath string
	// BinDir is --image-credential-provider-bin-dir: where each
	// provider's plugin is, named as the provider.
	BinDir string
	// Clock times the caches; nil: the real clock.
	Clock clock.PassiveClock
	// Environ is the environment the plugins inherit; nil: crivk's
	// (os.Environ).
	Environ func() []string

	// timeout bounds a plugin's run; 0: ExecTimeout (tests shorten it).
	timeout time.Duration
}

// Enabled reports whether either flag is given: the kubelet then
// registers the plugins, and a mistake in either stops it.
func (o Options) Enabled() bool { return o.ConfigPath != "" || o.BinDir != "" }

// Plugins are the node's registered providers, in the configuration's
// order, with their caches (the kubelet's process-wide providers list).
// They are shared by every pod, and by every node of a multi-node crivk;
// a node looks pods' credentials up through its own Keyring.
type Plugins struct {
	providers  []*provider
	configHash string
}

// New registers the plugins of o as the kubelet's
// RegisterCredentialProviderPlugins does, with its errors: the binary
// directory must exist, the configuration be read and valid
// (ReadConfig, ValidateConfig), and each provider's plugin be an
// executable file of the directory. The kubelet exits on any of them
// ("Failed to register CRI auth plugins"); the caller does too.
func New(o Options) (*Plugins, error) {
	if _, err := os.Stat(o.BinDir); err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("plugin binary directory %s did not exist", o.BinDir)
		}
		return nil, fmt.Errorf("error inspecting binary directory %s: %w", o.BinDir, err)
	}
	cfg, hash, err := ReadConfig(o.ConfigPath)
	if err != nil {
		return nil, err
	}
	if err := ValidateConfig(cfg); err != nil {
		return nil, err
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Environ == nil {
		o.Environ = os.Environ
	}
	if o.timeout == 0 {
		o.timeout = ExecTimeout
	}
	ps := &Plugins{configHash: hash}
	for _, p := range cfg.Providers {
		bin := filepath.Join(o.BinDir, p.Name)
		// The kubelet's message names LookPath's result, empty on an
		// error; crivk names the path it looked at.
		if _, err := exec.LookPath(bin); err != nil {
			if errors.Is(err, os.ErrNotExist) || errors.Is(err, exec.ErrNotFound) {
				return nil, fmt.Errorf("plugin binary executable %s did not exist", bin)
			}
			return nil, fmt.Errorf("error inspecting binary executable %s: %w", bin, err)
		}
		plugin, err := newExecPlugin(p, o.BinDir, o.Environ, o.timeout)
		if err != nil {
			return nil, fmt.Errorf("error initializing plugin provider %s: %w", p.Name, err)
		}
		pp := &provider{name: p.Name, clock: o.Clock, matchImages: p.MatchImages,
			defaultCacheDuration: p.DefaultCacheDuration.Duration, plugin: plugin, cache: newCache(o.Clock)}
		if ta := p.TokenAttributes; ta != nil && ta.ServiceAccountTokenAudience != "" {
			pp.sa = &tokenAttributes{audience: ta.ServiceAccountTokenAudience, requireServiceAccount: *ta.RequireServiceAccount,
				required: ta.RequiredServiceAccountAnnotationKeys, optional: ta.OptionalServiceAccountAnnotationKeys, cacheType: ta.CacheType}
		}
		ps.providers = append(ps.providers, pp)
	}
	return ps, nil
}

// Names are the providers' names, in order.
func (p *Plugins) Names() []string {
	var out []string
	for _, pp := range p.providers {
		out = append(out, pp.name)
	}
	return out
}

// ConfigHash is the SHA-256 of the configuration's files, as the kubelet
// exports it (its kubelet_credential_provider_config_info metric).
func (p *Plugins) ConfigHash() string { return p.configHash }

// Access is what token mode needs of the API server, as one node: the
// Node authorizer lets a node read the service accounts of its pods and
// request tokens bound to them.
type Access struct {
	// ServiceAccount reads a service account (the kubelet GETs it from
	// the API server at each lookup).
	ServiceAccount func(ctx context.Context, namespace, name string) (*v1.ServiceAccount, error)
	// Token requests a token of a service account, bound to the pod the
	// request names (the kubelet's token manager: a token is reused until
	// 80% of its life has passed).
	Token func(ctx context.Context, namespace, name string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
}

// Keyring looks up pods' credentials from the plugins as one node (the
// kubelet's externalCredentialProviderKeyring, made per pod).
type Keyring struct {
	plugins *Plugins
	access  Access
}

// Keyring is p seen from the node whose API access a is.
func (p *Plugins) Keyring(a Access) *Keyring { return &Keyring{plugins: p, access: a} }

// Pod is what a lookup needs of the pod that pulls.
type Pod struct {
	Namespace, Name    string
	UID                types.UID
	ServiceAccountName string
}

// Lookup returns the credentials the providers give pod for repository
// (an image's name without tag or digest, Docker Hub's spelt out:
// docker.io/library/busybox; the kubelet's repoToPull), to try in order:
// every provider whose matchImages match is asked (cache or plugin), and
// the keys of their answers matched against repository as the kubelet's
// keyring matches them, a longer key before a shorter one of its host
// and, for one key, the providers in the configuration's order. A
// provider that fails gives nothing; its error is logged in the kubelet's
// words ("Failed to provide credentials for image").
func (k *Keyring) Lookup(ctx context.Context, pod Pod, repository string) []Credential {
	var kr keyring
	for _, p := range k.plugins.providers {
		auth, sa, err := p.provide(ctx, k.access, pod, repository)
		if err != nil {
			l := log.G(ctx).WithError(err).WithField("provider", p.name).WithField("image", repository)
			if p.sa != nil {
				l = l.WithField("pod", pod.Namespace+"/"+pod.Name).WithField("podUID", pod.UID).
					WithField("serviceAccount", pod.Namespace+"/"+pod.ServiceAccountName)
			}
			l.Error("Failed to provide credentials for image")
			continue
		}
		kr.add(ctx, sa, auth)
	}
	return kr.lookup(repository)
}
