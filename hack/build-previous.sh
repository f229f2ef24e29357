#!/usr/bin/env bash
# Builds the previous release of crivk (hack/previous-release: a commit of
# this repository) into _output/bin/crivk-previous, from this clone's git
# history, for TestUpgradeFromPreviousRelease (test/e2e/upgrade_test.go).
# A clone without that commit (a shallow clone) builds nothing and says so;
# the test then skips, as hack/allowed-skips.txt allows for exactly that
# fact. Any other failure fails.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
read -r commit what < <(grep -v '^#' hack/previous-release)
out=_output/bin/crivk-previous
rm -f "${out}"
if ! git cat-file -e "${commit}^{commit}" 2>/dev/null; then
  echo "build-previous: commit ${commit} (${what}) is not in this clone: no previous release to upgrade from"
  exit 0
fi
src=_output/previous/${commit}
if [ ! -f "${src}/go.mod" ]; then
  rm -rf "${src}"
  mkdir -p "${src}"
  git archive "${commit}" | tar -x -C "${src}"
fi
(cd "${src}" && CGO_ENABLED=0 go build -trimpath -ldflags "-X main.version=v1.35.4-crivk.0" -o "${ROOT}/${out}" ./cmd/crivk)
echo "build-previous: ${out} from ${commit} (${what})"
