// Package incluster is the one rule by which every crivk command that runs
// in a pod of charts/crivk reaches the API server with the pod's service
// account: rest.InClusterConfig (the token and CA mounted in the pod, the
// API server of the pod's environment), with the server replaced by
// $CRIVK_API_SERVER when set, because a hostNetwork pod on a cluster
// without a service proxy cannot reach the kubernetes Service.
//
// Callers: cmd/crivk (identity: rbac, no --kubeconfig in a pod),
// certificate (--bootstrap-kubeconfig=in-cluster) and
// internal/subcmd/uninstall (the chart's hooks). It imports no crivk package.
package incluster

import (
	"os"

	"k8s.io/client-go/rest"
)

// ServerEnv names the variable that overrides the API server's address.
const ServerEnv = "CRIVK_API_SERVER"

// Config is the pod's service account's client configuration, with the
// server from $CRIVK_API_SERVER when that is set. Outside a pod it fails
// with rest.ErrNotInCluster.
func Config() (*rest.Config, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, err
	}
	if server := os.Getenv(ServerEnv); server != "" {
		cfg.Host = server
	}
	return cfg, nil
}
