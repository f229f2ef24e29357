//go:build tools

// Package runc pins runc (github.com/opencontainers/runc) for
// hack/build-runtime.sh, in a module of its own so that it is built with the
// dependency versions of its own go.mod.
//
// v1.5.x: the minor version containerd's script/setup/runc-version names for
// the containerd release in ../containerd (v1.5.2 for v2.4.2), at the newest
// patch the module proxy serves.
package runc

import _ "github.com/opencontainers/runc"
