//go:build tools

// Package provisioner pins csi-provisioner
// (github.com/kubernetes-csi/external-provisioner) for hack/build-storage.sh,
// in a module of its own so that it is built with the dependency versions
// of its own go.mod: required into hack/tools it would raise gRPC (1.82.1
// to 1.84.0) and the CSI spec (to v1.13.0), and it would be built on the
// k8s.io v0.37.2 modules of hack/tools instead of its own v0.36.1.
//
// v6.4.1: the newest release the module proxy serves (v6.3.0, v6.4.0 and
// v6.4.1 on 2026-12-07); it needs Go 1.26.0.
//
// The replace block is the provisioner's own, copied from its go.mod (a
// dependency's replacements are not applied to the module that requires
// it): its release is built with every k8s.io staging module at v0.36.1,
// though its require lines name v0.37.0 for some (k8s.io/api, client-go,
// apimachinery, ...), which Go would pick without the replacements. So
// this build has the module versions of the provisioner's own.
package provisioner

import _ "github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner"
