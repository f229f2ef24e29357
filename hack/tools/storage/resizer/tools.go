//go:build tools

// Package resizer pins csi-resizer
// (github.com/kubernetes-csi/external-resizer) for hack/build-storage.sh,
// in a module of its own so that it is built with the dependency versions
// of its own go.mod: required into hack/tools it would raise gRPC (1.82.1
// to 1.83.2) and the CSI spec (to v1.13.0) under Kubernetes v1.37.2's
// build.
//
// v2.3.1 of github.com/kubernetes-csi/external-resizer/v2: the newest
// release the module proxy serves (v2.2.0, v2.3.0 and v2.3.1 on
// 2026-12-07); the path without /v2 it refuses (403). It needs Go 1.26.0.
package resizer

import _ "github.com/kubernetes-csi/external-resizer/v2/cmd/csi-resizer"
