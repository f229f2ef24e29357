package pullrecords

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// The policies of imagePullCredentialsVerificationPolicy, the kubelet's.
const (
	NeverVerify                  = string(kubeletv1beta1.NeverVerify)
	NeverVerifyPreloadedImages   = string(kubeletv1beta1.NeverVerifyPreloadedImages)
	NeverVerifyAllowlistedImages = string(kubeletv1beta1.NeverVerifyAllowlistedImages)
	AlwaysVerify                 = string(kubeletv1beta1.AlwaysVerify)
	// DefaultPolicy is the kubelet's default.
	DefaultPolicy = NeverVerifyPreloadedImages
)

// policy is a parsed imagePullCredentialsVerificationPolicy with its
// allowlist.
type policy struct {
	name     string
	exact    map[string]bool // allowlisted repositories
	prefixes []string        // allowlisted "<prefix>/" (patterns "<prefix>/*")
}

// Validate checks a policy and its allowlist as the kubelet validates its
// configuration (pkg/kubelet/apis/config/validation, with
// KubeletEnsureSecretPulledImages on), with its messages. An empty policy
// is the default.
func Validate(name string, allowlist []string) error {
	_, err := newPolicy(name, allowlist)
	return err
}

func newPolicy(name string, allowlist []string) (*policy, error) {
	if name == "" {
		name = DefaultPolicy
	}
	switch name {
	case NeverVerify, NeverVerifyPreloadedImages, NeverVerifyAllowlistedImages, AlwaysVerify:
	default:
		return nil, fmt.Errorf("invalid configuration: option %q specified for imagePullCredentialsVerificationPolicy. Valid options are %q, %q, %q or %q",
			name, NeverVerify, NeverVerifyPreloadedImages, NeverVerifyAllowlistedImages, AlwaysVerify)
	}
	if len(allowlist) > 0 && name != NeverVerifyAllowlistedImages {
		// The kubelet's message, its typo ("Vertification") included.
		return nil, errors.New("invalid configuration: can't set `preloadedImagesVerificationAllowlist` if `imagePullCredentialsVertificationPolicy` is not \"NeverVerifyAllowlistedImages\"")
	}
	p := &policy{name: name, exact: map[string]bool{}}
	for _, pattern := range allowlist {
		norm, wildcard, err := allowlistPattern(pattern)
		if err != nil {
			return nil, fmt.Errorf("invalid configuration: invalid image pattern in `preloadedImagesVerificationAllowlist`: %w", err)
		}
		if wildcard {
			p.prefixes = append(p.prefixes, norm)
		} else {
			p.exact[norm] = true
		}
	}
	return p, nil
}

// requiresVerification is the kubelet's ImagePullPolicyEnforcer: whether
// a pod must show credentials for image (the container's image as
// written), given whether crivk pulled it (a pulled record or an intent).
func (p *policy) requiresVerification(image string, pulledByCrivk bool) bool {
	switch p.name {
	case NeverVerify:
		return false
	case NeverVerifyPreloadedImages:
		return pulledByCrivk
	case NeverVerifyAllowlistedImages:
		// The kubelet matches the container's image as written: an exact
		// entry (a repository without tag) matches only an image written
		// without tag or digest; a "/*" entry matches by prefix.
		if p.exact[image] {
			return false
		}
		for _, pre := range p.prefixes {
			if strings.HasPrefix(image, pre) {
				return false
			}
		}
		return true
	default: // AlwaysVerify
		return true
	}
}

// A repository name in the distribution reference grammar (lowercase
// path components; a domain with an optional port).
var repositoryRE = regexp.MustCompile(`^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$`)

// allowlistPattern is the kubelet's getAllowlistImagePattern: a pattern is
// a fully qualified repository without tag or digest, or a prefix ending
// in "/*" (returned without the "*").
func allowlistPattern(pattern string) (string, bool, error) {
	if pattern != strings.TrimSpace(pattern) {
		return "", false, fmt.Errorf("leading/trailing spaces are not allowed: %s", pattern)
	}
	trimmed, wildcard := pattern, false
	if strings.HasSuffix(pattern, "/*") {
		trimmed, wildcard = strings.TrimSuffix(pattern, "*"), true
	}
	if trimmed == "" {
		return "", false, fmt.Errorf("the supplied pattern is too short: %s", pattern)
	}
	if strings.ContainsRune(trimmed, '*') {
		return "", false, fmt.Errorf("not a valid wildcard pattern, only patterns ending with '/*' are allowed: %s", pattern)
	}
	if wildcard {
		if len(trimmed) == 1 {
			return "", false, errors.New("at least registry hostname is required")
		}
		return trimmed, true, nil
	}
	name := trimmed
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		name = name[:i]
	}
	if !repositoryRE.MatchString(name) {
		return "", false, fmt.Errorf("failed to parse as an image name: invalid reference format: %s", pattern)
	}
	if repo, err := Repository(trimmed); err != nil || repo != trimmed {
		return "", false, fmt.Errorf("neither tag nor digest is accepted in an image reference: %s", pattern)
	}
	return trimmed, false, nil
}

// Repository is an image's name without tag or digest, normalised as the
// kubelet's credential records key it (Docker Hub's short names made
// docker.io/library/<name>).
func Repository(image string) (string, error) {
	name := image
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		name = name[:i]
	}
	if name == "" || strings.ContainsAny(name, " \t\n") {
		return "", fmt.Errorf("invalid image name %q", image)
	}
	first, rest, ok := strings.Cut(name, "/")
	switch {
	case !ok || !strings.ContainsAny(first, ".:") && first != "localhost":
		first, rest = "docker.io", name
	case first == "index.docker.io":
		first = "docker.io"
	}
	if first == "docker.io" && !strings.Contains(rest, "/") {
		rest = "library/" + rest
	}
	return first + "/" + rest, nil
}
