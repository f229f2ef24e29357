#!/usr/bin/env bash
# The comparisons with the kubelet v1.37.2 (make parity; issue #50), which
# make test does not run (each is behind its environment variable in
# test/e2e), run together, and their results written with the date into
# docs/parity.md, which docs/runtime.md and docs/reliability.md link to:
#
#   TestFieldsKubelet                 CRIVK_E2E_FIELDS_KUBELET=1  the field cases on both agents
#                                                                 (its table: docs/runtime.md)
#   TestEvictionMemoryKubelet         CRIVK_E2E_MEMORY_KUBELET=1  the memory eviction scenario on the
#     beside TestEvictionMemory,                                  kubelet, crivk's two runs beside it
#     TestEvictionMemoryMemcg                                     (docs/reliability.md)
#   TestEvictionDiskPressureKubelet   CRIVK_E2E_DISK_KUBELET=1    the disk pressure scenario on the
#     beside TestEvictionDiskPressure                             kubelet, crivk's beside it
#
# through `hack/test.sh e2e` (its own cluster state, brought up and torn
# down; skips checked: with the three variables set, the kubelet tests may
# not skip). docs/parity.md gets: the date, the commit, the command, each
# test's result and duration, the field table TestFieldsKubelet logs, and
# the "figures" lines the eviction tests log for each agent. The file is
# written whether the tests pass or not (a failure is a result too); the
# exit status is hack/test.sh's.
#
# Expected duration on 2 cores with the binaries built: about 12 minutes
# (the cluster up ~1 min, TestFieldsKubelet ~1 min, the three memory runs
# ~2 min each, the two disk pressure runs ~2 min each, tear-down); a first
# run builds the Kubernetes binaries first (~8 min more).
#
# Usage: hack/parity.sh   (make parity; root; run it through the cluster
# lock where the machine has one)
# Environment: PARITY_OUT (default docs/parity.md).
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
OUT=${PARITY_OUT:-docs/parity.md}
TESTS=(TestFieldsKubelet TestEvictionMemory TestEvictionMemoryMemcg TestEvictionMemoryKubelet TestEvictionDiskPressure TestEvictionDiskPressureKubelet)
RUN="^($(IFS='|'; echo "${TESTS[*]}"))\$"
LOG=${ROOT}/_output/test-logs/e2e.log

started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=
if git status --porcelain 2>/dev/null | grep -qv '^??'; then dirty=" (with uncommitted changes)"; fi
# The kubelet the comparisons run (hack/test.sh e2e builds crivk and the
# control plane, not the kubelet: a fresh clone has none, and its tests
# failed "exit status 127").
mkdir -p _output/test-logs
echo "parity: building the kubelet (hack/build-kube.sh kubelet; log: _output/test-logs/parity-build.log)"
if ! hack/build-kube.sh kubelet >_output/test-logs/parity-build.log 2>&1; then
  tail -n 20 _output/test-logs/parity-build.log
  exit 1
fi
echo "parity: ${TESTS[*]} (hack/test.sh e2e; log: ${LOG#"${ROOT}/"})"
rm -f "${LOG}"
rc=0
CRIVK_E2E_FIELDS_KUBELET=1 CRIVK_E2E_MEMORY_KUBELET=1 CRIVK_E2E_DISK_KUBELET=1 E2E_RUN="${RUN}" \
  hack/test.sh e2e || rc=$?
ended=$(date -u +%Y-%m-%dT%H:%M:%SZ)

# result TEST: "PASS (12.34s)", "FAIL (...)", "SKIP (...)" from go test -v's
# line for TEST, or "did not run".
result() {
  local r
  r=$(sed -nE "s/^--- (PASS|FAIL|SKIP): $1 \\(([0-9.]+s)\\)\$/\\1 (\\2)/p" "${LOG}" 2>/dev/null | tail -n 1)
  echo "${r:-did not run}"
}

# logged TEST PATTERN: TEST's log lines (t.Logf, go test -v's indented
# lines after "=== RUN/CONT/NAME TEST") that match PATTERN, the file:line
# prefix dropped.
logged() {
  awk -v t="$1" -v pat="$2" '
    /^=== (RUN|CONT|NAME) / { cur = $3; next }
    /^--- / { next }
    cur == t || index(cur, t "/") == 1 {
      line = $0
      sub(/^ +/, "", line)
      sub(/^[a-z0-9_]+\.go:[0-9]+: /, "", line)
      if (line ~ pat) print line
    }' "${LOG}" 2>/dev/null
}

{
  echo "# Parity with the kubelet v1.37.2 (make parity)"
  echo
  echo "Written by \`hack/parity.sh\` (\`make parity\`) from its run of ${started} to ${ended} UTC at commit"
  echo "\`${commit}\`${dirty}, on $(nproc) cores, $(awk '/^MemTotal:/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo),"
  # The containerd of the lane the run used (hack/lib/local.sh's CONTAINERD).
  echo "$(PATH=$([ "${CONTAINERD:-built}" = built ] && echo "${ROOT}/_output/bin/runtime:")${PATH} containerd --version 2>/dev/null | awk '{print $1, $3}'):"
  echo
  echo '```'
  echo "CRIVK_E2E_FIELDS_KUBELET=1 CRIVK_E2E_MEMORY_KUBELET=1 CRIVK_E2E_DISK_KUBELET=1 E2E_RUN='${RUN}' hack/test.sh e2e"
  echo '```'
  echo
  echo "Do not edit: run \`make parity\` again. The tables of [runtime.md](runtime.md#the-same-pods-on-the-kubelet-v1354-testfieldskubelet-2026-11-26)"
  echo "and [reliability.md](reliability.md) are read from these (hack/test.sh exit status: ${rc})."
  echo
  echo "| test | result |"
  echo "| --- | --- |"
  for t in "${TESTS[@]}"; do echo "| \`${t}\` | $(result "${t}") |"; done
  echo
  echo "## The same pods on both agents (TestFieldsKubelet)"
  echo
  table=$(logged TestFieldsKubelet '^\|')
  if [ -n "${table}" ]; then echo "${table}"; else echo "(no table: the test did not get that far; see its result above)"; fi
  echo
  echo "## Eviction figures, per agent (the tests' \"figures\" lines)"
  for t in TestEvictionMemory TestEvictionMemoryMemcg TestEvictionMemoryKubelet TestEvictionDiskPressure TestEvictionDiskPressureKubelet; do
    echo
    echo "### ${t}: $(result "${t}")"
    echo
    lines=$(logged "${t}" '^(figures|memcg:|imagefs:|[a-z-]+: node memory available)')
    if [ -n "${lines}" ]; then echo "- ${lines//$'\n'/$'\n'- }"; else echo "(no figures logged)"; fi
  done
} >"${OUT}.tmp"
mv -f "${OUT}.tmp" "${OUT}"
echo "parity: wrote ${OUT} (hack/test.sh e2e exited ${rc})"
exit "${rc}"
