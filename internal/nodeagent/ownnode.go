package nodeagent

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ownNode reads this node from the API server's watch cache (resourceVersion
// 0, as the kubelet's first try did before its node lister) through the
// heartbeat client: the node status loop's read while the node watch is
// not connected (nodeView.APINode).
func ownNode(c *apiClients, name string) func(ctx context.Context) (*v1.Node, error) {
	return func(ctx context.Context) (*v1.Node, error) {
		return c.nodes.Nodes().Get(ctx, name, metav1.GetOptions{ResourceVersion: "0"})
	}
}
