#!/usr/bin/env bash
# Builds crivk into _output/bin/crivk.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VERSION=${VERSION:-v1.37.2-crivk.0}
mkdir -p "${ROOT}/_output/bin"
cd "${ROOT}"
CGO_ENABLED=0 go build -trimpath -ldflags "-X main.version=${VERSION}" -o _output/bin/crivk ./cmd/crivk
echo "build: _output/bin/crivk ${VERSION}"
