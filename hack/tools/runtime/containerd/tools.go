//go:build tools

// Package containerd pins containerd 2.x (github.com/containerd/containerd/v2)
// for hack/build-runtime.sh: the daemon, its runc shim and ctr. The module
// requires nothing else, so the binaries are built with exactly the
// dependency versions of containerd's own go.mod; the runc and CNI plugin
// modules beside it, and the Kubernetes pins of hack/tools, cannot move them.
//
// v2.4.x: the newest containerd the module proxy serves that containerd's
// RELEASES.md recommends for Kubernetes 1.37 (2.4.0+ or 2.3.0+).
package containerd

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
