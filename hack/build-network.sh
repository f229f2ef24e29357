#!/usr/bin/env bash
# Builds the cluster network of the multi-machine cluster (#45, hack/README.md
# "Several machines on one"), as hack/build-runtime.sh builds the runtime:
#   kube-proxy        v1.37.2 of hack/tools (hack/build-kube.sh kube-proxy), into _output/bin
#   flanneld          hack/tools/network/flannel, into _output/bin/network
#   coredns           hack/tools/network/coredns, into _output/bin/network
#   flannel-cni-conf  hack/tools/cmd/flannel-cni-conf (writes a node's CNI conflist from
#                     flanneld's subnet.env), into _output/bin/network
# flanneld and CoreDNS are each a module of its own that requires only that
# project, so each is built with the dependency versions of its own go.mod;
# neither can move the Kubernetes pins of hack/tools, nor those of the
# other (both need newer gRPC and etcd client modules than hack/tools has,
# and flannel v0.28 is on k8s.io v0.34). A binary is rebuilt only when it is
# missing or its stamp (version and build flags) differs; flannel-cni-conf,
# the project's own, is built every time (go's cache makes that quick).
# Prints each binary's version at the end.
#
# Only builds: nothing here starts flanneld, CoreDNS or kube-proxy, and the
# multi-machine cluster that will run them is not built yet.
#
# Usage: hack/build-network.sh   (as root when gcc is missing: flanneld's UDP
# backend is cgo on amd64)
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MOD=${ROOT}/hack/tools/network
BIN=${ROOT}/_output/bin/network
mkdir -p "${BIN}"

BUILD_NAME=build-network
# shellcheck source=hack/lib/gobuild.sh
source "${ROOT}/hack/lib/gobuild.sh"

# kube-proxy: a Kubernetes component like the others, of the same version.
"${ROOT}/hack/build-kube.sh" kube-proxy

# flanneld: main.go imports every backend, and on amd64 the UDP backend is
# cgo (its C proxy), so flanneld is built as its Makefile builds it there:
# CGO_ENABLED=1, static. netgo and osusergo keep glibc's NSS out of the
# static binary, as for runc in build-runtime.sh. The version is the
# linker variable the Makefile sets (`git describe`, with the v).
VERSION=$(module_version "${MOD}/flannel" github.com/flannel-io/flannel)
flannel=(-tags "netgo osusergo"
  -ldflags "-s -w -X github.com/flannel-io/flannel/pkg/version.Version=${VERSION} -extldflags -static"
  github.com/flannel-io/flannel)
if stale "${BIN}/flanneld" 1 "${flannel[@]}" && ! command -v gcc >/dev/null; then
  "${ROOT}/hack/install-deps.sh" runtime-build # gcc and libc6-dev, among others
fi
build "${BIN}/flanneld" "${MOD}/flannel" 1 "${flannel[@]}"

# CoreDNS: the plugins of its plugin.cfg (kubernetes, forward, cache, ...)
# as the module ships them generated (core/plugin/zplugin.go); CGO off as
# its Makefile's default. Its GitCommit variable (a git commit) is not in
# the module and stays empty.
VERSION=$(module_version "${MOD}/coredns" github.com/coredns/coredns)
build "${BIN}/coredns" "${MOD}/coredns" 0 -ldflags "-s -w" github.com/coredns/coredns

echo "build-network: building flannel-cni-conf"
(cd "${ROOT}/hack/tools" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${BIN}/flannel-cni-conf" ./cmd/flannel-cni-conf)

echo "build-network: in ${BIN} and ${ROOT}/_output/bin:"
echo "kube-proxy $("${ROOT}/_output/bin/kube-proxy" --version)"
echo "flanneld $("${BIN}/flanneld" --version 2>&1)"
"${BIN}/coredns" -version | sed -n 1p
echo "flannel-cni-conf (hack/tools/cmd/flannel-cni-conf)"
