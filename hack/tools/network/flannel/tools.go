//go:build tools

// Package flannel pins flanneld (github.com/flannel-io/flannel) for
// hack/build-network.sh, in a module of its own so that it is built with
// the dependency versions of its own go.mod: required into hack/tools it
// would raise gRPC (1.82.1 to 1.84.0), protobuf, golang.org/x/net and
// x/sys and every etcd module (3.7.0 to 3.7.3, etcd's server among them)
// under Kubernetes v1.37.2's build, and flanneld, on k8s.io v0.34, would be
// built on v0.37.
//
// v0.28.11: the newest release the module proxy serves (v0.28.4, v0.28.10
// and v0.28.11 on 2026-12-07); it needs Go 1.26.8, this machine's.
//
// One replacement, and only one: flanneld's main package imports every
// backend, among them tencentvpc, whose SDK module
// github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc the proxy
// refuses at the version flannel requires (v1.3.208, and v1.3.188 of
// v0.28.10: 403 "This module version is not available"). v1.3.75, which it
// serves, has every call that backend makes (DescribeRouteTables,
// CreateRoutes, DeleteRoutes). The cluster uses the host-gw backend; the
// tencentvpc code is compiled in but never run. Every other module is at
// the version flannel's go.mod names.
package flannel

import _ "github.com/flannel-io/flannel"
