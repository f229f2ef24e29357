#!/usr/bin/env bash
# Runs upstream node conformance specs (e2e.test of Kubernetes v1.37.2)
# against one node agent on the local cluster, then tears everything down:
#
#   1. builds what is missing (crivk, the kube binaries, e2e.test, agnhost);
#   2. brings up the local cluster with the conformance images
#      (CONFORMANCE_IMAGES=1 hack/local-up.sh);
#   3. deletes the Node object left by an earlier run, starts the agent
#      (hack/run-crivk.sh or hack/run-kubelet.sh) and waits for the node Ready;
#   4. runs e2e.test, stops the agent, runs hack/local-down.sh;
#   5. prints a summary whose last lines are `N passed, N failed` and then
#      the names of the failed specs (skipped specs are counted on the line
#      before).
#
# Environment:
#   NODE_AGENT=crivk|kubelet  the node agent (default crivk)
#   CONFORMANCE_FOCUS         ginkgo focus regexp (default: the 141 specs tagged
#                             both [NodeConformance] and [Conformance])
#   CONFORMANCE_SKIP          ginkgo skip regexp (default: \[Disruptive\])
#   CONFORMANCE_TIMEOUT       ginkgo suite timeout (default 4h)
#   CONFORMANCE_PROCS         parallel Ginkgo processes (default 4; specs marked
#                             Serial still run alone, as upstream's CI does)
#   E2E_ARGS                  extra e2e.test arguments (word-split)
# Results: _output/conformance/<agent>-<UTC timestamp>/: e2e.log, junit.xml,
# agent.log, setup.log, local-down.log, summary.txt. On failure, before the
# agent stops, the evidence (the node with its Lease and events, every
# namespace's events, the CSRs, the agent's, containerd's and e2e.test's
# logs) goes to _output/test-logs/conformance/<agent>-<UTC timestamp>/ and
# the output names it. Exit status 0 only when no spec failed. Run as root.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NODE_AGENT=${NODE_AGENT:-crivk}
FOCUS=${CONFORMANCE_FOCUS:-'\[NodeConformance\].*\[Conformance\]|\[Conformance\].*\[NodeConformance\]'}
SKIP=${CONFORMANCE_SKIP:-'\[Disruptive\]'}
TIMEOUT=${CONFORMANCE_TIMEOUT:-4h}
PROCS=${CONFORMANCE_PROCS:-4}
read -r -a extra_args <<<"${E2E_ARGS:-}"
case "${NODE_AGENT}" in
  crivk | kubelet) ;;
  *) echo "conformance: NODE_AGENT must be crivk or kubelet, not '${NODE_AGENT}'" >&2; exit 2 ;;
esac
RESULTS=${ROOT}/_output/conformance/${NODE_AGENT}-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "${RESULTS}"
cd "${ROOT}"
# shellcheck source=hack/lib/evidence.sh
source "${ROOT}/hack/lib/evidence.sh"
# shellcheck source=hack/lib/ginkgo.sh
source "${ROOT}/hack/lib/ginkgo.sh"
# An earlier run's evidence would be taken for this run's.
rm -rf "${ROOT}/_output/test-logs/conformance"
EVIDENCE=${ROOT}/_output/test-logs/conformance/$(basename "${RESULTS}")

log() { echo "conformance: $*"; }

# collect_evidence WHY: the failure's evidence, while the agent still runs
# (issue #34); then names it.
collect_evidence() {
  log "collecting the evidence of the failure into ${EVIDENCE#"${ROOT}/"}/"
  dump_evidence "${EVIDENCE}" -kubeconfig "${KUBECONFIG}" -node "${NODE_NAME}" \
    -copy agent.log="${RESULTS}/agent.log" -copy containerd.log="${LOCAL_DIR}/logs/containerd.log" \
    -copy e2e.log="${RESULTS}/e2e.log" -note "$1" -note "results: ${RESULTS}"
  print_evidence conformance conformance
}

# ---------------------------------------------------------------- set-up

log "building and bringing up the local cluster (log: ${RESULTS}/setup.log)"
# errexit does not apply inside a function called as an if condition, hence
# the explicit returns.
setup() {
  CONFORMANCE_IMAGES=1 hack/install-deps.sh || return
  if [ "${NODE_AGENT}" = crivk ]; then hack/build.sh || return; fi
  hack/build-kube.sh kubelet e2e.test agnhost ginkgo || return
  CONFORMANCE_IMAGES=1 hack/local-up.sh
}
# A clean-up that fails fails the run (its log kept in RESULTS).
trap 'rc=$?; hack/local-down.sh >"${RESULTS}/local-down.log" 2>&1 || { log "ERROR: local-down failed, see ${RESULTS}/local-down.log"; rc=1; }; exit "${rc}"' EXIT
if ! setup >"${RESULTS}/setup.log" 2>&1; then
  tail -n 30 "${RESULTS}/setup.log"
  exit 1
fi
# shellcheck source=/dev/null
source _output/local/env

# api METHOD PATH: the API server as admin; prints the body.
api() {
  curl -sf --max-time 10 -X "$1" --cacert "${CA_CERT}" --cert "${LOCAL_DIR}/pki/admin.crt" \
    --key "${LOCAL_DIR}/pki/admin.key" "${APISERVER_URL}$2"
}
node_ready() {
  api GET "/api/v1/nodes/${NODE_NAME}" | tr -d ' \n' | grep -q '"type":"Ready","status":"True"'
}
# Another agent's Node object (conditions, addresses, nodeInfo) would
# otherwise be what this agent starts from.
delete_node() { api DELETE "/api/v1/nodes/${NODE_NAME}" >/dev/null 2>&1 || true; }

# ---------------------------------------------------------------- agent

agent_pid=
stop_agent() {
  [ -n "${agent_pid}" ] || return 0
  if kill -TERM "${agent_pid}" 2>/dev/null; then
    for _ in $(seq 1 300); do
      kill -0 "${agent_pid}" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "${agent_pid}" 2>/dev/null || true
  fi
  wait "${agent_pid}" 2>/dev/null || true
  agent_pid=
  delete_node
}
trap 'rc=$?; stop_agent; hack/local-down.sh >"${RESULTS}/local-down.log" 2>&1 || { log "ERROR: local-down failed, see ${RESULTS}/local-down.log"; rc=1; }; exit "${rc}"' EXIT

delete_node
log "starting ${NODE_AGENT} (log: ${RESULTS}/agent.log)"
# Both scripts exec the agent, so $! is the agent's PID.
"hack/run-${NODE_AGENT}.sh" >"${RESULTS}/agent.log" 2>&1 &
agent_pid=$!
deadline=$(($(date +%s) + 120))
until node_ready; do
  if ! kill -0 "${agent_pid}" 2>/dev/null; then
    log "${NODE_AGENT} exited before node ${NODE_NAME} was Ready; last lines of its log:"
    tail -n 30 "${RESULTS}/agent.log"
    collect_evidence "${NODE_AGENT} exited before node ${NODE_NAME} was Ready"
    exit 1
  fi
  if [ "$(date +%s)" -ge "${deadline}" ]; then
    log "node ${NODE_NAME} not Ready after 120 s; last lines of ${NODE_AGENT}'s log:"
    tail -n 30 "${RESULTS}/agent.log"
    collect_evidence "node ${NODE_NAME} not Ready 120 s after ${NODE_AGENT} started"
    exit 1
  fi
  sleep 1
done
log "node ${NODE_NAME} Ready"

# ---------------------------------------------------------------- e2e.test

shown=${FOCUS}
if [ "${#shown}" -gt 160 ]; then shown="${FOCUS:0:120}... ($(tr -cd '|' <<<"${FOCUS}" | wc -c) more alternatives)"; fi
log "running e2e.test with ${PROCS} Ginkgo processes (focus: ${shown}; skip: ${SKIP}); log: ${RESULTS}/e2e.log"
started=$(date +%s)
rc=0
_output/bin/ginkgo --procs="${PROCS}" --focus="${FOCUS}" --skip="${SKIP}" \
  --timeout="${TIMEOUT}" --no-color --output-dir="${RESULTS}" --junit-report=junit.xml \
  _output/bin/e2e.test -- --kubeconfig="${KUBECONFIG}" --provider=local --report-dir="${RESULTS}" \
  "${extra_args[@]}" >"${RESULTS}/e2e.log" 2>&1 || rc=$?
elapsed=$(($(date +%s) - started))

[ "${rc}" -eq 0 ] || collect_evidence "e2e.test (ginkgo) exited ${rc}: a spec failed or the run did not complete"
stop_agent
trap - EXIT
down_rc=0
hack/local-down.sh >"${RESULTS}/local-down.log" 2>&1 ||
  { log "ERROR: local-down failed (a failed clean-up fails the run), see ${RESULTS}/local-down.log"; down_rc=1; }

# ---------------------------------------------------------------- summary

ginkgo_summary "${RESULTS}/e2e.log" e2e.test "agent ${NODE_AGENT}; e2e.test ran ${elapsed}s (exit ${rc}); results in ${RESULTS}" "not selected by the focus, or skipped by the spec" "${rc}" &&
  [ "${down_rc}" -eq 0 ]
