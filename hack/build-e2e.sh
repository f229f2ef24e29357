#!/usr/bin/env bash
# Builds the upstream conformance binaries from the hack/tools module into
# _output/bin: e2e.test (go test -c of k8s.io/kubernetes/test/e2e) and a
# static agnhost. Skips a binary already built for KUBE_VERSION.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KUBE_VERSION=${KUBE_VERSION:-v1.35.4}
BIN=${ROOT}/_output/bin
mkdir -p "${BIN}"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${KUBE_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=35 -X k8s.io/component-base/version.gitTreeState=clean"

built() { [ -x "${BIN}/$1" ] && [ "$(cat "${BIN}/.$1.version" 2>/dev/null)" = "${KUBE_VERSION}" ]; }

cd "${ROOT}/hack/tools"
if built e2e.test; then
  echo "build-e2e: e2e.test ${KUBE_VERSION} already built"
else
  echo "build-e2e: building e2e.test ${KUBE_VERSION}"
  go test -c -trimpath -ldflags "${ldflags}" -o "${BIN}/e2e.test" k8s.io/kubernetes/test/e2e
  echo "${KUBE_VERSION}" > "${BIN}/.e2e.test.version"
fi
if built agnhost; then
  echo "build-e2e: agnhost already built"
else
  echo "build-e2e: building agnhost"
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${BIN}/agnhost" k8s.io/kubernetes/test/images/agnhost
  echo "${KUBE_VERSION}" > "${BIN}/.agnhost.version"
fi
