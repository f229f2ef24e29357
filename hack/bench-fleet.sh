#!/usr/bin/env bash
# The fleet benchmark (issue #33): crivk nodes (one process, --node-count=N)
# against the kubelet's hollow nodes (k8s.io/kubernetes cmd/kubemark,
# --morph=kubelet, one process per node), both over the kubelet's own fake
# CRI, on the local control plane of hack/local-up.sh, at 10, 50 and 100
# nodes: the API server's requests/s by verb, watches, bytes, kube-apiserver
# and etcd CPU and RSS, the agents' CPU and RSS, create -> Running
# latency, per node. Builds what is missing, brings the cluster up, runs
# the harness (test/benchfleet), tears the cluster down. See
# docs/benchmarks-fleet.md.
#
# Environment:
#   BENCH_FLEET_NODES      node counts, in order (default 10,50,100; e.g. 10 for a smoke run)
#   BENCH_FLEET_DEADLINE   RFC 3339 time: a node count that would end later is skipped (and said),
#                          the run in progress at that time is stopped and cleaned up
#   BENCH_FLEET_BUDGET     seconds from this script's start: the same, when no DEADLINE is given
#   BENCH_FLEET_DOCS=1|0   rewrite docs/benchmarks-fleet.md and docs/benchmarks-fleet/*.svg (default 1)
#   BENCH_FLEET_SMOKE=1    label the report a smoke run
#   BENCH_FLEET_STEADY, BENCH_FLEET_CHURN, BENCH_FLEET_BASELINE   window lengths (30s, 45s, 15s)
#   BENCH_FLEET_PODS       pods per node (3)
#   BENCH_FLEET_AGENTS     agents (crivk,kubelet)
#   BENCH_FLEET_CRIVK_ARGS extra crivk arguments
# Results: _output/bench-fleet/<UTC timestamp>/: results.json, report.md,
# <agent>-<N>/ (every process' log), bench.log, setup.log, local-down.log.
# Run as root, under `flock /work/ci/cluster.lock` on shared machines.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/lib/bench.sh
source "${ROOT}/hack/lib/bench.sh"
if [ -z "${BENCH_FLEET_DEADLINE:-}" ] && [ -n "${BENCH_FLEET_BUDGET:-}" ]; then
  BENCH_FLEET_DEADLINE=$(date -u -d "+${BENCH_FLEET_BUDGET} seconds" +%Y-%m-%dT%H:%M:%SZ)
fi
bench_start bench-fleet

setup() {
  hack/install-deps.sh || return
  hack/build.sh || return
  hack/build-kube.sh kubemark || return
  (cd hack/tools && CGO_ENABLED=0 go build -trimpath -o "${ROOT}/_output/bin/fakecri" ./cmd/fakecri) || return
  go build -o _output/bin/crivk-bench-fleet ./test/benchfleet || return
  hack/local-up.sh
}
bench_up setup

cmdline=$(bench_command "make bench-fleet" BENCH_FLEET_NODES BENCH_FLEET_STEADY BENCH_FLEET_CHURN BENCH_FLEET_BASELINE \
  BENCH_FLEET_PODS BENCH_FLEET_CRIVK_ARGS:q)
args=(-root "${ROOT}" -out "${RESULTS}" -command "${cmdline}"
  -nodes "${BENCH_FLEET_NODES:-10,50,100}" -agents "${BENCH_FLEET_AGENTS:-crivk,kubelet}"
  -kubeconfig "${KUBECONFIG}" -bootstrap-kubeconfig "${BOOTSTRAP_KUBECONFIG}" -ca "${CA_CERT}"
  -serving-cert "${NODE_SERVING_CERT}" -serving-key "${NODE_SERVING_KEY}" -node-ip "${NODE_IP}"
  -bin "${ROOT}/_output/bin" -pids-dir "${LOCAL_DIR}/pids"
  -pods-per-node "${BENCH_FLEET_PODS:-3}" -baseline "${BENCH_FLEET_BASELINE:-15s}"
  -steady "${BENCH_FLEET_STEADY:-30s}" -churn "${BENCH_FLEET_CHURN:-45s}")
[ "${BENCH_FLEET_DOCS:-1}" != 1 ] || args+=(-docs "${ROOT}/docs/benchmarks-fleet.md")
[ "${BENCH_FLEET_SMOKE:-0}" != 1 ] || args+=(-smoke)
bench_flags args -deadline BENCH_FLEET_DEADLINE -crivk-args BENCH_FLEET_CRIVK_ARGS

bench_run "" _output/bin/crivk-bench-fleet "${args[@]}"
# The hollow kubelets' fake runtimes listen on /tmp/kubelet_remote_<n>.sock
# (k8s.io/cri-client/pkg/fake.GenerateEndpoint) and leave them behind:
# those made since this run began are theirs.
find /tmp -maxdepth 1 -name 'kubelet_remote_*.sock' -newer "${RESULTS}/setup.log" -delete 2>/dev/null || true
bench_finish
