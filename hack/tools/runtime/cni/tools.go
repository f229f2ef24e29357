//go:build tools

// Package cni pins the CNI plugins (github.com/containernetworking/plugins)
// for hack/build-runtime.sh, in a module of its own so that they are built
// with the dependency versions of their own go.mod. bridge, host-local and
// portmap make the pod network (crivk runtime's conflist, internal/subcmd/
// hostruntime); containerd's CRI plugin brings up each sandbox's lo with
// loopback unless its use_internal_loopback is set.
package cni

import (
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
	_ "github.com/containernetworking/plugins/plugins/meta/portmap"
)
