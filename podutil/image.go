package podutil

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// DefaultPullPolicy is the API server's pull policy for an image that
// names none (SetDefaults_Container; SetDefaults_Volume for an image
// volume): Always for ":latest" or no tag, else IfNotPresent (a digest
// included). The runtime manager applies it to a spec that was never
// defaulted, static pods' decoding to their spec.
func DefaultPullPolicy(image string) v1.PullPolicy {
	last := image
	if i := strings.LastIndex(image, "/"); i >= 0 {
		last = image[i+1:] // a registry's port is not a tag
	}
	_, tag, hasTag := strings.Cut(last, ":")
	if strings.Contains(image, "@") || (hasTag && tag != "latest") {
		return v1.PullIfNotPresent
	}
	return v1.PullAlways
}
