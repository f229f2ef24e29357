#!/usr/bin/env bash
# Builds a crivk release into _output/release/ (emptied first), what
# `make release VERSION=...` runs; nothing is installed or started:
#   crivk-linux-amd64               the static binary (CGO_ENABLED=0, hack/build.sh),
#   crivk-linux-amd64.sha256        its checksum (sha256sum -c),
#   crivk-image-<VERSION>.oci.tar   the image as an OCI image-layout tarball
#                                   (hack/image-crivk.sh), named
#                                   docker.io/library/crivk:<VERSION>, the name the
#                                   chart's default image (repository crivk, tag the
#                                   appVersion) resolves to; import it with
#                                   `ctr -n k8s.io images import`,
#   crivk-image-<VERSION>.digest    its manifest digest, sha256:<hex>,
#   crivk-<CHART_VERSION>.tgz       the packaged chart (helm package), appVersion
#                                   <VERSION>, chart version <VERSION> without its
#                                   leading "v" (SemVer, as Helm requires),
#   SHA256SUMS                      sha256sum of all the above.
# Then hack/verify-release.sh checks them. VERSION is v<major>.<minor>.<patch>
# with an optional -pre-release (default v1.37.2-crivk.0).
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VERSION=${VERSION:-v1.37.2-crivk.0}
OUT=${ROOT}/_output/release
IMAGE=docker.io/library/crivk

if ! [[ "${VERSION}" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "release: VERSION=${VERSION} is not v<major>.<minor>.<patch>[-<pre-release>], e.g. v1.37.2-crivk.0" >&2
  exit 2
fi
CHART_VERSION=${VERSION#v}
if [ "$(go env GOHOSTOS)/$(go env GOHOSTARCH)" != linux/amd64 ]; then
  echo "release: builds linux/amd64 artifacts, on a linux/amd64 machine; this is $(go env GOHOSTOS)/$(go env GOHOSTARCH)" >&2
  exit 1
fi

rm -rf "${OUT}"
mkdir -p "${OUT}"
"${ROOT}/hack/build-kube.sh" helm >/dev/null

# The image first: it builds _output/bin/crivk (hack/build.sh, static,
# -trimpath) and puts it in the image; the released binary is that one.
IMAGE=${IMAGE} VERSION=${VERSION} "${ROOT}/hack/image-crivk.sh" >/dev/null
cp "${ROOT}/_output/images/crivk.tar" "${OUT}/crivk-image-${VERSION}.oci.tar"
cp "${ROOT}/_output/images/crivk.tar.digest" "${OUT}/crivk-image-${VERSION}.digest"
install -m 0755 "${ROOT}/_output/bin/crivk" "${OUT}/crivk-linux-amd64"

"${ROOT}/_output/bin/helm" package "${ROOT}/charts/crivk" --version "${CHART_VERSION}" --app-version "${VERSION}" \
  --destination "${OUT}" >/dev/null

cd "${OUT}"
sha256sum crivk-linux-amd64 >crivk-linux-amd64.sha256
files=(crivk-linux-amd64 crivk-linux-amd64.sha256 "crivk-image-${VERSION}.oci.tar" "crivk-image-${VERSION}.digest" "crivk-${CHART_VERSION}.tgz")
sha256sum "${files[@]}" >SHA256SUMS

"${ROOT}/hack/verify-release.sh" "${OUT}"
echo "release: ${VERSION} (chart ${CHART_VERSION}, image ${IMAGE}:${VERSION} $(cat "crivk-image-${VERSION}.digest"))"
for f in "${files[@]}" SHA256SUMS; do
  echo "  ${OUT}/${f}"
done
