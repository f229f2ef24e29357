#!/usr/bin/env bash
# Builds the container runtime from Go modules, as hack/build-kube.sh builds
# the Kubernetes components: containerd, containerd-shim-runc-v2 and ctr
# (hack/tools/runtime/containerd), runc (hack/tools/runtime/runc) into
# _output/bin/runtime, and the CNI plugins bridge, host-local, loopback and
# portmap (hack/tools/runtime/cni) into _output/bin/runtime/cni. Each project
# is a module of its own that requires only it, so each binary is built with
# the dependency versions of that project's release.
#
# containerd, its shim, ctr and the plugins are static Go binaries
# (CGO_ENABLED=0, which also leaves out containerd's btrfs snapshotter: it
# needs cgo). runc needs cgo for its nsenter and for seccomp (libseccomp): it
# is linked statically (static PIE, as upstream's release binaries), and its
# build packages are installed first when missing (install-deps.sh
# runtime-build). A binary is rebuilt only when it is missing or its stamp
# (version and build flags) differs. Prints each binary's version at the end.
#
# Usage: hack/build-runtime.sh   (as root when packages are missing)
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MOD=${ROOT}/hack/tools/runtime
BIN=${ROOT}/_output/bin/runtime
mkdir -p "${BIN}/cni"

# module_version DIR PATH: the version of module PATH that DIR's go.mod pins.
module_version() {
  (cd "$1" && go list -m -f '{{.Version}}' "$2")
}

# stale OUT CGO FLAGS...: whether OUT must be built: it is missing, or its
# stamp does not hold VERSION (the caller's) and these build settings.
stale() {
  local out=$1
  shift
  [ ! -x "${out}" ] || [ "$(cat "$(stamp "${out}")" 2>/dev/null)" != "${VERSION} CGO_ENABLED=$*" ]
}

stamp() {
  echo "$(dirname "$1")/.$(basename "$1").build"
}

# build OUT DIR CGO FLAGS...: go build in module DIR into OUT, when stale.
build() {
  local out=$1 dir=$2 cgo=$3
  shift 3
  if ! stale "${out}" "${cgo}" "$@"; then
    echo "build-runtime: $(basename "${out}") ${VERSION} already built"
    return 0
  fi
  echo "build-runtime: building $(basename "${out}") ${VERSION}"
  (cd "${dir}" && CGO_ENABLED=${cgo} go build -trimpath -o "${out}" "$@")
  echo "${VERSION} CGO_ENABLED=${cgo} $*" >"$(stamp "${out}")"
}

# containerd: the version package's variables as its Makefile sets them
# (VERSION is `git describe`, so with the v). The revision (a git commit) is
# not in the module, so it stays empty. Tags as the Makefile's: the shim
# without gRPC.
VERSION=$(module_version "${MOD}/containerd" github.com/containerd/containerd/v2)
pkg=github.com/containerd/containerd/v2
ldflags="-s -w -X ${pkg}/version.Version=${VERSION} -X ${pkg}/version.Package=${pkg}"
for c in containerd ctr; do
  build "${BIN}/${c}" "${MOD}/containerd" 0 -tags urfave_cli_no_docs -ldflags "${ldflags}" "${pkg}/cmd/${c}"
done
build "${BIN}/containerd-shim-runc-v2" "${MOD}/containerd" 0 -tags "urfave_cli_no_docs no_grpc" \
  -ldflags "${ldflags}" "${pkg}/cmd/containerd-shim-runc-v2"

# runc: its version comes from its VERSION file (go:embed). The Makefile's
# default tags without libpathrs, which Debian 12 does not package (runc then
# uses its pure-Go pathrs-lite); static PIE flags from its `static` target.
VERSION=$(module_version "${MOD}/runc" github.com/opencontainers/runc)
runc=(-buildmode=pie -tags "seccomp urfave_cli_no_docs netgo osusergo"
  -ldflags "-s -w -linkmode external -extldflags -static-pie" github.com/opencontainers/runc)
if stale "${BIN}/runc" 1 "${runc[@]}"; then
  "${ROOT}/hack/install-deps.sh" runtime-build
fi
build "${BIN}/runc" "${MOD}/runc" 1 "${runc[@]}"

# The CNI plugins: the version is the linker variable of their release builds.
VERSION=$(module_version "${MOD}/cni" github.com/containernetworking/plugins)
pkg=github.com/containernetworking/plugins
for p in main/bridge ipam/host-local main/loopback meta/portmap; do
  build "${BIN}/cni/${p#*/}" "${MOD}/cni" 0 \
    -ldflags "-s -w -X ${pkg}/pkg/utils/buildversion.BuildVersion=${VERSION}" "${pkg}/plugins/${p}"
done

echo "build-runtime: in ${BIN}:"
"${BIN}/containerd" --version
echo "containerd-shim-runc-v2 $("${BIN}/containerd-shim-runc-v2" -v | sed -n 's/^ *Version: *//p')"
"${BIN}/ctr" --version
"${BIN}/runc" --version
for p in bridge host-local loopback portmap; do
  # With no CNI_COMMAND a plugin prints its about string (on stderr).
  "${BIN}/cni/${p}" 2>&1 | sed -n 1p
done
