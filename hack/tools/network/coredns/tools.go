//go:build tools

// Package coredns pins CoreDNS (github.com/coredns/coredns) for
// hack/build-network.sh, the multi-machine cluster's DNS (a Deployment
// behind the cluster DNS Service), in a module of its own so that it is
// built with exactly the dependency versions of its own go.mod: required
// into hack/tools it would raise gRPC (1.82.1 to 1.84.0), protobuf,
// golang.org/x/net and x/sys and the etcd client modules (3.7.0 to 3.7.2)
// under Kubernetes v1.37.2's build.
//
// v1.15.0: the newest release the module proxy serves (v1.14.3 to v1.15.0
// on 2026-12-07); it needs Go 1.26.0.
package coredns

import _ "github.com/coredns/coredns"
