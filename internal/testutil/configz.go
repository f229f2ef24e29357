package testutil

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/client-go/kubernetes"
)

// Configz reads a node's /configz through the API server's node proxy, as
// the node e2e suite reads a kubelet's (getCurrentKubeletConfig, kubectl
// get --raw /api/v1/nodes/<node>/proxy/configz), and returns its
// kubeletconfig object.
func Configz(ctx context.Context, c kubernetes.Interface, node string) (map[string]any, error) {
	raw, err := c.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "configz").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	var out map[string]map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("decoding /configz %q: %w", raw, err)
	}
	kc, ok := out["kubeletconfig"]
	if !ok {
		return nil, fmt.Errorf("/configz %q has no kubeletconfig", raw)
	}
	return kc, nil
}
