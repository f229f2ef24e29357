#!/usr/bin/env bash
# Builds crictl (the CRI command-line client, pinned in hack/tools/crictl/go.mod)
# into _output/bin/crictl. Skipped when the binary exists for the pinned version.
#
# Usage: hack/build-crictl.sh
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${ROOT}/_output/bin
MOD=${ROOT}/hack/tools/crictl
mkdir -p "${BIN}"

cd "${MOD}"
version=$(go list -m -f '{{.Version}}' sigs.k8s.io/cri-tools)
stamp="${BIN}/.crictl.version"
if [ -x "${BIN}/crictl" ] && [ "$(cat "${stamp}" 2>/dev/null)" = "${version}" ]; then
  echo "build-crictl: crictl ${version} already built"
  exit 0
fi
echo "build-crictl: building crictl ${version}"
CGO_ENABLED=0 go build -trimpath \
  -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=${version}" \
  -o "${BIN}/crictl" sigs.k8s.io/cri-tools/cmd/crictl
echo "${version}" > "${stamp}"
