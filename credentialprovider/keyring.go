package credentialprovider

import (
	"context"
	"net/url"
	"slices"
	"strings"

	"github.com/virtual-kubelet/virtual-kubelet/log"
)

// Credential is one registry credential a provider gave for an image.
type Credential struct {
	Username, Password string
	// ServiceAccount is the pod's service account when the provider ran
	// in service account token mode with a token of it (the pulled
	// record's coordinates, package cri/pullrecords); nil: a node-wide
	// credential, that any pod of the node could have been given.
	ServiceAccount *ServiceAccountCoordinates
}

// ServiceAccountCoordinates name a service account, the kubelet's.
type ServiceAccountCoordinates struct {
	UID, Namespace, Name string
}

// keyring is the kubelet's BasicDockerKeyring for the providers'
// responses: credentials by registry key (host[:port][/path]), an index
// of the keys sorted in reverse so that a longer key of one host comes
// before a shorter one ("quay.io/coreos" before "quay.io").
type keyring struct {
	index []string
	creds map[string][]Credential
}

// add adds a response's auth (its keys and credentials), each credential
// with the service account it came for (nil: node-wide). A key is read
// as a URL ("https://" put in front when it has no scheme); its path
// without a leading "/v1/" or "/v2/" (the Docker client's) is kept; a key
// that is not a URL is logged and ignored, as the kubelet does.
func (k *keyring) add(ctx context.Context, sa *ServiceAccountCoordinates, auth map[string]Credential) {
	if k.creds == nil {
		k.creds = map[string][]Credential{}
	}
	for key, c := range auth {
		raw := key
		if !strings.HasPrefix(raw, "https://") && !strings.HasPrefix(raw, "http://") {
			raw = "https://" + raw
		}
		u, err := url.Parse(raw)
		if err != nil {
			log.G(ctx).Errorf("Entry %q in dockercfg invalid (%v), ignoring", raw, err)
			continue
		}
		path := u.Path
		if strings.HasPrefix(path, "/v2/") || strings.HasPrefix(path, "/v1/") {
			path = path[3:]
		}
		key := u.Host
		if path != "" && path != "/" {
			key += path
		}
		k.creds[key] = append(k.creds[key], Credential{Username: c.Username, Password: c.Password, ServiceAccount: sa})
		if !slices.Contains(k.index, key) {
			k.index = append(k.index, key)
		}
	}
	slices.Sort(k.index)
	slices.Reverse(k.index)
}

// The kubelet's default registry key: Docker Hub's credentials apply to
// an image of Docker Hub that no key matched.
const defaultRegistryHost = "index.docker.io"

// lookup returns the credentials of every key that matches image (a
// repository), in the index's order; when none does and image is on
// Docker Hub, those of "index.docker.io".
func (k *keyring) lookup(image string) []Credential {
	var out []Credential
	for _, key := range k.index {
		if ok, _ := URLsMatch(key, image); ok {
			out = append(out, k.creds[key]...)
		}
	}
	if len(out) > 0 {
		return out
	}
	if isDefaultRegistryMatch(image) {
		return k.creds[defaultRegistryHost]
	}
	return nil
}

// isDefaultRegistryMatch: image names no registry host, or Docker Hub.
func isDefaultRegistryMatch(image string) bool {
	first, _, found := strings.Cut(image, "/")
	switch {
	case first == "":
		return false
	case !found:
		return true
	case first == "docker.io" || first == "index.docker.io":
		return true
	}
	return !strings.ContainsAny(first, ".:")
}
