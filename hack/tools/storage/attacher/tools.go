//go:build tools

// Package attacher pins csi-attacher
// (github.com/kubernetes-csi/external-attacher) for hack/build-storage.sh,
// in a module of its own so that it is built with the dependency versions
// of its own go.mod: required into hack/tools it would raise gRPC (1.82.1
// to 1.83.2) and the CSI spec (to v1.13.0) under Kubernetes v1.37.2's
// build. Its go.mod's replacements pin the k8s.io modules at the v0.37.0
// it requires anyway, so none is needed here.
//
// The hostpath driver of the tests needs no attach (no ControllerPublish);
// the attacher is built for a driver that does, and for the VolumeAttachment
// objects a kubelet waits on when a CSIDriver says attachRequired.
//
// v4.13.1: the newest release the module proxy serves (v4.12.0, v4.13.0
// and v4.13.1 on 2026-12-07); it needs Go 1.26.0.
package attacher

import _ "github.com/kubernetes-csi/external-attacher/v4/cmd/csi-attacher"
