package cri

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net"
	"path/filepath"
	"sort"
	"strings"

	"github.com/crivk/crivk/cri/pullrecords"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// imagePullSecrets: the kubelet's credential keyring in short. Each
// dockerconfigjson (or legacy dockercfg) entry is keyed by a registry
// (host[:port][/path], "*." globs allowed per host segment, an optional
// scheme and Docker Hub's "/v1/" ignored). An image's credentials are the
// entries whose key matches its registry host and a prefix of its
// repository path, most specific key first; the pull tries them in turn.
// Two differences from the kubelet's keyring remain (its BasicDockerKeyring,
// which package credentialprovider follows for the plugins' answers): a
// key's path must match whole components here ("host/team" does not match
// "host/teamx/app"; the kubelet's string prefix does), and keys are
// ordered by length, not in reverse lexical order.

// dockerConfigEntry is one registry's credentials in a Docker config.
type dockerConfigEntry struct {
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	Auth          string `json:"auth,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty"`
	RegistryToken string `json:"registrytoken,omitempty"`
}

type registryCredential struct {
	host, path string // the key, normalised
	cred       trackedAuth
}

// trackedAuth is a credential with where it came from, which the pulled
// image's record keeps (package pullrecords): a pull secret (its
// coordinates and a hash of the credential), or a credential provider in
// service account token mode (the service account's coordinates), or
// neither: node-wide (a credential provider's otherwise; an anonymous
// pull, auth nil).
type trackedAuth struct {
	auth           *runtimeapi.AuthConfig
	secret         *pullrecords.Secret
	serviceAccount *pullrecords.ServiceAccount
}

// credentialHash is the hash a pulled record keeps of a credential: a
// SHA-256 of its JSON, as the kubelet's hashAuthConfig (crivk's hashes are
// its own: its records are never read by a kubelet).
func credentialHash(a *runtimeapi.AuthConfig) string {
	b, err := json.Marshal(struct {
		Username, Password, Auth, ServerAddress, IdentityToken, RegistryToken string
	}{a.Username, a.Password, a.Auth, a.ServerAddress, a.IdentityToken, a.RegistryToken})
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// pullCredentials returns the credentials of secrets that apply to image,
// most specific first, each with its secret. Malformed secrets are
// skipped.
func pullCredentials(image string, secrets []v1.Secret) []trackedAuth {
	host, path := splitImage(image)
	var matched []registryCredential
	for _, s := range secrets {
		for key, e := range dockerConfigEntries(&s) {
			kh, kp := normaliseRegistryKey(key)
			if !hostMatches(kh, host) || !pathPrefix(kp, path) {
				continue
			}
			// Username and password only, as the kubelet's keyring: no
			// ServerAddress (containerd 1.6 parses it as a URL, and a
			// host:port fails that: "first path segment in URL cannot
			// contain colon"), the auth field decoded below.
			auth := &runtimeapi.AuthConfig{Username: e.Username, Password: e.Password}
			if e.Auth != "" && e.Username == "" {
				if b, err := base64.StdEncoding.DecodeString(e.Auth); err == nil {
					if u, p, ok := strings.Cut(string(b), ":"); ok {
						auth.Username, auth.Password = u, p
					}
				}
			}
			matched = append(matched, registryCredential{host: kh, path: kp, cred: trackedAuth{auth: auth,
				secret: &pullrecords.Secret{UID: string(s.UID), Namespace: s.Namespace, Name: s.Name, CredentialHash: credentialHash(auth)}}})
		}
	}
	sort.SliceStable(matched, func(i, j int) bool {
		return len(matched[i].host)+len(matched[i].path) > len(matched[j].host)+len(matched[j].path)
	})
	out := make([]trackedAuth, 0, len(matched))
	for _, m := range matched {
		out = append(out, m.cred)
	}
	return out
}

func dockerConfigEntries(s *v1.Secret) map[string]dockerConfigEntry {
	switch s.Type {
	case v1.SecretTypeDockerConfigJson:
		var cfg struct {
			Auths map[string]dockerConfigEntry `json:"auths"`
		}
		if json.Unmarshal(s.Data[v1.DockerConfigJsonKey], &cfg) == nil {
			return cfg.Auths
		}
	case v1.SecretTypeDockercfg:
		var cfg map[string]dockerConfigEntry
		if json.Unmarshal(s.Data[v1.DockerConfigKey], &cfg) == nil {
			return cfg
		}
	}
	return nil
}

const dockerHub = "docker.io"

// splitImage returns the registry host and repository path of an image
// reference (Docker Hub when the first component is not a host).
func splitImage(image string) (host, path string) {
	if i := strings.IndexAny(image, "@"); i >= 0 {
		image = image[:i]
	}
	first, rest, ok := strings.Cut(image, "/")
	if !ok || !strings.ContainsAny(first, ".:") && first != "localhost" {
		host, path = dockerHub, image
	} else {
		host, path = first, rest
	}
	// Drop the tag (a ':' after the last '/').
	if i := strings.LastIndex(path, ":"); i >= 0 && !strings.Contains(path[i:], "/") {
		path = path[:i]
	}
	if host == "index.docker.io" || host == "registry-1.docker.io" {
		host = dockerHub
	}
	return host, path
}

// normaliseRegistryKey splits a config key into host and path.
func normaliseRegistryKey(key string) (host, path string) {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	host, path, _ = strings.Cut(key, "/")
	path = strings.Trim(path, "/")
	if host == "index.docker.io" || host == "registry-1.docker.io" || host == dockerHub {
		host = dockerHub
		if path == "v1" || path == "v2" {
			path = ""
		}
	}
	return host, path
}

// hostMatches matches host[:port] against a key with per-segment globs.
func hostMatches(pattern, host string) bool {
	ph, pp := splitPort(pattern)
	hh, hp := splitPort(host)
	if pp != hp {
		return false
	}
	ps, hs := strings.Split(ph, "."), strings.Split(hh, ".")
	if len(ps) != len(hs) {
		return false
	}
	for i := range ps {
		if ok, err := filepath.Match(ps[i], hs[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

func splitPort(h string) (string, string) {
	if host, port, err := net.SplitHostPort(h); err == nil {
		return host, port
	}
	return h, ""
}

func pathPrefix(prefix, path string) bool {
	return prefix == "" || path == prefix || strings.HasPrefix(path, prefix+"/")
}
