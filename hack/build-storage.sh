#!/usr/bin/env bash
# Builds the CSI pieces of the storage tests (#47, hack/README.md "Storage
# test scaffolding (#47)"), as hack/build-network.sh builds the network:
#   csi-provisioner  hack/tools/storage/provisioner, into _output/bin/storage
#   csi-attacher     hack/tools/storage/attacher, into _output/bin/storage
#   csi-resizer      hack/tools/storage/resizer, into _output/bin/storage
#   csi-hostpath     hack/tools/cmd/csi-hostpath (the test's hostpath CSI
#                    driver and node registrar), into _output/bin/storage
# The three sidecars are each a module of its own that requires only that
# project, so each is built with the dependency versions of its own go.mod;
# none can move the pins of hack/tools (they need newer gRPC and CSI spec
# modules than it has, and the provisioner is on k8s.io/kubernetes v1.36).
# A sidecar is rebuilt only when it is missing or its stamp (version and
# build flags) differs; csi-hostpath, the project's own, is built every time
# (go's cache makes that quick). Prints each binary's version at the end.
#
# Only builds: nothing here starts a driver, a sidecar or a cluster.
#
# Usage: [STORAGE_SIDECARS="csi-provisioner ..."] hack/build-storage.sh
# STORAGE_SIDECARS: the sidecars to build (default all three; the e2e tier
# builds only csi-provisioner, the one its tests run).
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MOD=${ROOT}/hack/tools/storage
STORAGE_SIDECARS=${STORAGE_SIDECARS:-csi-provisioner csi-attacher csi-resizer}
BIN=${ROOT}/_output/bin/storage
mkdir -p "${BIN}"

BUILD_NAME=build-storage
# shellcheck source=hack/lib/gobuild.sh
source "${ROOT}/hack/lib/gobuild.sh"

# The sidecars as their release-tools (build.make) build them: static
# (CGO_ENABLED=0), the version (`git describe`, with the v) in main.version,
# which --version prints.
# sidecar NAME MODULE: builds cmd/NAME of MODULE, pinned in ${MOD}/DIR.
sidecar() {
  local name=$1 dir=$2 module=$3
  VERSION=$(module_version "${MOD}/${dir}" "${module}")
  build "${BIN}/${name}" "${MOD}/${dir}" 0 -ldflags "-s -w -X main.version=${VERSION}" "${module}/cmd/${name}"
}
for name in ${STORAGE_SIDECARS}; do
  case ${name} in
    csi-provisioner) sidecar csi-provisioner provisioner github.com/kubernetes-csi/external-provisioner/v6 ;;
    csi-attacher) sidecar csi-attacher attacher github.com/kubernetes-csi/external-attacher/v4 ;;
    csi-resizer) sidecar csi-resizer resizer github.com/kubernetes-csi/external-resizer/v2 ;;
    *) echo "build-storage: unknown sidecar ${name}" >&2; exit 2 ;;
  esac
done

echo "build-storage: building csi-hostpath"
(cd "${ROOT}/hack/tools" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${BIN}/csi-hostpath" ./cmd/csi-hostpath)

echo "build-storage: in ${BIN}:"
for b in ${STORAGE_SIDECARS}; do
  "${BIN}/${b}" --version | sed "s|^${BIN}/||"
done
echo "$("${BIN}/csi-hostpath" --version) (hack/tools/cmd/csi-hostpath)"
