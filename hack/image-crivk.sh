#!/usr/bin/env bash
# Builds the crivk image for charts/crivk without Docker or a registry: the
# static crivk binary (hack/build.sh) and the machine's CA certificates in
# one layer, entrypoint /crivk, written by hack/tools' mkimage as an OCI
# image-layout tarball _output/images/crivk.tar named
# ${IMAGE:-crivk}:${VERSION}. With a containerd socket as argument it is
# imported there (namespace k8s.io), as the chart's DaemonSet pulls nothing
# (image.pullPolicy IfNotPresent or Never).
# Usage: hack/image-crivk.sh [CONTAINERD_SOCKET]
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VERSION=${VERSION:-v1.37.2-crivk.0}
IMAGE=${IMAGE:-crivk}
OUT=${ROOT}/_output/images
BIN=${ROOT}/_output/bin
mkdir -p "${OUT}" "${BIN}"

VERSION=${VERSION} "${ROOT}/hack/build.sh" >/dev/null
(cd "${ROOT}/hack/tools" && CGO_ENABLED=0 go build -trimpath -o "${BIN}/mkimage" ./cmd/mkimage)
rootfs=$(mktemp -d)
trap 'rm -rf "${rootfs}"' EXIT
mkdir -p "${rootfs}/etc/ssl/certs" "${rootfs}/tmp"
chmod 1777 "${rootfs}/tmp"
install -m 0755 "${BIN}/crivk" "${rootfs}/crivk"
install -m 0644 /etc/ssl/certs/ca-certificates.crt "${rootfs}/etc/ssl/certs/ca-certificates.crt"
"${BIN}/mkimage" -rootfs "${rootfs}" -o "${OUT}/crivk.tar" -name "${IMAGE}:${VERSION}" -entrypoint /crivk >/dev/null
echo "image-crivk: ${OUT}/crivk.tar (${IMAGE}:${VERSION})"
if [ -n "${1:-}" ]; then
  ctr --address "$1" -n k8s.io images import --no-unpack=false "${OUT}/crivk.tar" >/dev/null
  echo "image-crivk: imported into $1"
fi
