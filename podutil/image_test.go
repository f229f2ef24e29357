package podutil

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestDefaultPullPolicy(t *testing.T) {
	for image, want := range map[string]v1.PullPolicy{
		"busybox":                              v1.PullAlways,
		"busybox:latest":                       v1.PullAlways,
		"registry.example:5000/tools":          v1.PullAlways,
		"registry.example:5000/tools:latest":   v1.PullAlways,
		"registry.example/tools:1":             v1.PullIfNotPresent,
		"registry.example/tools@sha256:0123ab": v1.PullIfNotPresent,
		"tools:1@sha256:0123ab":                v1.PullIfNotPresent,
	} {
		if got := DefaultPullPolicy(image); got != want {
			t.Errorf("DefaultPullPolicy(%q) = %q, want %q", image, got, want)
		}
	}
}
