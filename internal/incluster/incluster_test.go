package incluster

import (
	"errors"
	"testing"

	"k8s.io/client-go/rest"
)

// Outside a pod (no KUBERNETES_SERVICE_HOST, no token file) Config fails
// with client-go's sentinel, which callers turn into their own message.
func TestConfigOutsideAPod(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	t.Setenv(ServerEnv, "https://192.0.2.1:6443")
	if _, err := Config(); !errors.Is(err, rest.ErrNotInCluster) {
		t.Fatalf("Config() outside a pod: %v, want rest.ErrNotInCluster", err)
	}
}
