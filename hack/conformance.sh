#!/usr/bin/env bash
# Runs the upstream node conformance specs (e2e.test of Kubernetes v1.35.4)
# against one node agent on the local cluster, then tears everything down.
#
#   NODE_AGENT=crivk|kubelet   the node (default crivk)
#   CONFORMANCE_FOCUS          ginkgo focus (default: the NodeConformance+Conformance specs)
#   CONFORMANCE_SKIP           ginkgo skip  (default: \[Disruptive\])
#
# Results: _output/conformance/<agent>-<timestamp>/ (junit.xml, e2e.log,
# agent.log, summary.txt). The output ends with `N passed, N failed`
# (skipped counted separately), then the failed spec names.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NODE_AGENT=${NODE_AGENT:-crivk}
FOCUS=${CONFORMANCE_FOCUS:-'\[NodeConformance\].*\[Conformance\]|\[Conformance\].*\[NodeConformance\]'}
SKIP=${CONFORMANCE_SKIP:-'\[Disruptive\]'}
case "${NODE_AGENT}" in crivk | kubelet) ;; *) echo "conformance: NODE_AGENT must be crivk or kubelet" >&2; exit 2 ;; esac
RESULTS=${ROOT}/_output/conformance/${NODE_AGENT}-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "${RESULTS}"
log() { echo "conformance: $*"; }

log "preparing (log: ${RESULTS}/setup.log)"
{
  "${ROOT}/hack/install-deps.sh"
  "${ROOT}/hack/build.sh"
  "${ROOT}/hack/build-kube.sh"
  "${ROOT}/hack/build-e2e.sh"
  "${ROOT}/hack/local-up.sh"
} >"${RESULTS}/setup.log" 2>&1 || { tail -n 30 "${RESULTS}/setup.log"; exit 1; }
# shellcheck source=/dev/null
source "${ROOT}/_output/local/env"
"${ROOT}/hack/conformance-images.sh" "${CONTAINERD_ADDRESS}" >>"${RESULTS}/setup.log" 2>&1 ||
  { tail -n 30 "${RESULTS}/setup.log"; exit 1; }

agent_pid=
cleanup() {
  if [ -n "${agent_pid}" ]; then
    kill -TERM "${agent_pid}" 2>/dev/null || true
    wait "${agent_pid}" 2>/dev/null || true
  fi
  "${ROOT}/hack/local-down.sh" >"${RESULTS}/local-down.log" 2>&1 || log "local-down failed, see ${RESULTS}/local-down.log"
}
trap cleanup EXIT

log "starting ${NODE_AGENT} (log: ${RESULTS}/agent.log)"
"${ROOT}/hack/run-${NODE_AGENT}.sh" >"${RESULTS}/agent.log" 2>&1 &
agent_pid=$!

api() {
  curl -sf --cacert "${CA_CERT}" --cert "${LOCAL_DIR}/pki/admin.crt" --key "${LOCAL_DIR}/pki/admin.key" "${APISERVER_URL}$1"
}
for _ in $(seq 1 120); do
  if api "/api/v1/nodes/${NODE_NAME}" 2>/dev/null | tr -d ' \n' | grep -q '"type":"Ready","status":"True"'; then
    ready=1
    break
  fi
  sleep 1
done
if [ -z "${ready:-}" ]; then
  log "node ${NODE_NAME} did not become Ready in 120 s"; tail -n 30 "${RESULTS}/agent.log"; exit 1
fi

log "running e2e.test (focus: ${FOCUS}; skip: ${SKIP}); log: ${RESULTS}/e2e.log"
start=$(date +%s)
rc=0
"${ROOT}/_output/bin/e2e.test" --kubeconfig="${KUBECONFIG}" --provider=local \
  --ginkgo.focus="${FOCUS}" --ginkgo.skip="${SKIP}" --ginkgo.no-color --ginkgo.timeout=4h \
  --report-dir="${RESULTS}" --ginkgo.junit-report=junit.xml \
  >"${RESULTS}/e2e.log" 2>&1 || rc=$?
elapsed=$(($(date +%s) - start))

# Ginkgo's own tally: "N Passed | N Failed | N Pending | N Skipped".
tally=$(grep -Eo '[0-9]+ Passed \| [0-9]+ Failed \| [0-9]+ Pending \| [0-9]+ Skipped' "${RESULTS}/e2e.log" | tail -n 1 || true)
if [ -z "${tally}" ]; then
  log "e2e.test produced no summary (exit ${rc}); last lines:"; tail -n 30 "${RESULTS}/e2e.log"; exit 1
fi
read -r passed _ _ failed _ _ pending _ _ skipped _ <<<"${tally}"
{
  echo "agent: ${NODE_AGENT}; run time: ${elapsed}s; results: ${RESULTS}"
  echo "skipped: ${skipped}, pending: ${pending}"
  echo "${passed} passed, ${failed} failed"
  grep -E '^\s*\[FAIL\]' "${RESULTS}/e2e.log" | sed 's/^\s*//' | sort -u || true
} | tee "${RESULTS}/summary.txt"
[ "${failed}" -eq 0 ]
