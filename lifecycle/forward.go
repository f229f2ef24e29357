package lifecycle

import (
	"github.com/crivk/crivk/lifecycle/status"
	v1 "k8s.io/api/core/v1"
)

// WithForeignConditions is status.WithForeignConditions, kept only so that
// provider's final-status write builds until it calls lifecycle/status
// directly; delete this file then.
func WithForeignConditions(api, ours []v1.PodCondition) []v1.PodCondition {
	return status.WithForeignConditions(api, ours)
}
