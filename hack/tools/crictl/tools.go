//go:build tools

// Package crictl pins crictl (sigs.k8s.io/cri-tools), the CRI command-line
// client hack/build-crictl.sh builds into _output/bin. It is its own module so
// that cri-tools' dependencies never move the versions the Kubernetes
// components in ../go.mod are built with.
//
// cri-tools v1.34.0 is the newest release the module proxy serves here
// (v1.35.x answers 403), and its k8s.io/* requirements are release
// candidates the checksum database does not know; they are replaced with the
// v0.34.2 releases (v0.35.x no longer compiles with cri-tools v1.34.0:
// kubectl's TerminalSizeQueue changed). sigs.k8s.io/cri-tools itself is not in
// the checksum database either; its hash is pinned in go.sum, which was
// created with GONOSUMDB=sigs.k8s.io/cri-tools.
package crictl

import _ "sigs.k8s.io/cri-tools/cmd/crictl"
