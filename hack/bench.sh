#!/usr/bin/env bash
# Benchmarks crivk against the kubelet and against raw CRI calls (issue 6):
# builds what is missing, brings up the local cluster (hack/local-up.sh),
# runs the harness (test/bench) whose four lanes (raw, rawapi, kubelet,
# crivk) use that one control plane and containerd one after another, then
# tears the cluster down. See docs/benchmarks.md.
#
# Environment:
#   BENCH_QUICK=1           the quick plan (< 5 minutes) instead of the full one (about 35 on 2 cores)
#   BENCH_LANES             lanes in order (default raw,rawapi,kubelet,crivk; add crivk-traced for the tracing overhead)
#   BENCH_DOCS=1|0          rewrite docs/benchmarks.md and docs/benchmarks/*.png
#                           (default 1 in full mode, 0 in quick mode)
#   BENCH_CRIVK_PROFILING   crivk --profiling-address during its lane (e.g. 127.0.0.1:6060)
#   BENCH_CRIVK_ARGS        extra crivk arguments (e.g. --runtime-events=false)
#   BENCH_PROXY_LOG         a file: one line per API request of the agents (time, duration, code, kind, path)
#   BENCH_QPS, BENCH_BURST  API client QPS and burst of both agents (50, 100)
#   BENCH_STEADY_PODS       W5 levels instead of the plan's (e.g. 0,30,110)
#   BENCH_STEADY_DURATION   W5 window per level instead of the plan's (e.g. 30s)
#   BENCH_RAW_PARALLELISM   the raw lane's settings for each batch instead of the plan's (0,8):
#                           bounds on its sandbox calls in flight, 0 for none; the best is raw's figure
# A focused run (any of the next four; its report is per setting and it
# never rewrites docs/benchmarks.md):
#   BENCH_ONLY              only these steps (w1, w2 = the batches created and deleted, w4, w5)
#   BENCH_BATCH_SIZES       W2/W3 batch sizes instead of the plan's (e.g. 110)
#   BENCH_REPEAT            rounds of every lane (e.g. 3)
#   BENCH_CRIVK_VARIANTS    crivk argument sets separated by ';', each run in every round,
#                           interleaved (e.g. '--max-parallel-sandboxes=0;--max-parallel-sandboxes=4')
# Results: _output/bench/<UTC timestamp>/: results.json, report.md, *.png,
# kubelet.log, crivk.log (a focused run: <lane>-<round>-<run>.log), bench.log, setup.log,
# local-down.log.
# The exit status is not about the figures: non-zero only when a lane could
# not run. Run as root; holds the machine's one local cluster (take
# /tmp/crivk-cluster.lock around it on shared machines).
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
QUICK=${BENCH_QUICK:-0}
FOCUSED=0
[ -z "${BENCH_ONLY:-}${BENCH_CRIVK_VARIANTS:-}" ] && [ "${BENCH_REPEAT:-1}" = 1 ] || FOCUSED=1
if [ "${QUICK}" = 1 ] || [ "${FOCUSED}" = 1 ]; then DOCS=${BENCH_DOCS:-0}; else DOCS=${BENCH_DOCS:-1}; fi
RESULTS=${ROOT}/_output/bench/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "${RESULTS}"
cd "${ROOT}"

log() { echo "bench: $*"; }

log "building and bringing up the local cluster (log: ${RESULTS}/setup.log)"
setup() {
  hack/install-deps.sh || return
  hack/build.sh || return
  hack/build-kube.sh kubelet || return
  go build -o _output/bin/crivk-bench ./test/bench || return
  hack/local-up.sh
}
trap 'hack/local-down.sh >"${RESULTS}/local-down.log" 2>&1 || log "local-down failed, see ${RESULTS}/local-down.log"' EXIT
if ! setup >"${RESULTS}/setup.log" 2>&1; then
  tail -n 30 "${RESULTS}/setup.log"
  exit 1
fi
# shellcheck source=/dev/null
source _output/local/env

cmdline="make bench"
[ "${QUICK}" != 1 ] || cmdline="BENCH_QUICK=1 ${cmdline}"
[ -z "${BENCH_CRIVK_ARGS:-}" ] || cmdline="BENCH_CRIVK_ARGS='${BENCH_CRIVK_ARGS}' ${cmdline}"
[ -z "${BENCH_STEADY_DURATION:-}" ] || cmdline="BENCH_STEADY_DURATION=${BENCH_STEADY_DURATION} ${cmdline}"
[ -z "${BENCH_STEADY_PODS:-}" ] || cmdline="BENCH_STEADY_PODS=${BENCH_STEADY_PODS} ${cmdline}"
[ -z "${BENCH_RAW_PARALLELISM:-}" ] || cmdline="BENCH_RAW_PARALLELISM=${BENCH_RAW_PARALLELISM} ${cmdline}"
[ -z "${BENCH_LANES:-}" ] || cmdline="BENCH_LANES=${BENCH_LANES} ${cmdline}"
[ -z "${BENCH_CRIVK_VARIANTS:-}" ] || cmdline="BENCH_CRIVK_VARIANTS='${BENCH_CRIVK_VARIANTS}' ${cmdline}"
[ -z "${BENCH_REPEAT:-}" ] || cmdline="BENCH_REPEAT=${BENCH_REPEAT} ${cmdline}"
[ -z "${BENCH_BATCH_SIZES:-}" ] || cmdline="BENCH_BATCH_SIZES=${BENCH_BATCH_SIZES} ${cmdline}"
[ -z "${BENCH_ONLY:-}" ] || cmdline="BENCH_ONLY=${BENCH_ONLY} ${cmdline}"
args=(-root "${ROOT}" -out "${RESULTS}" -lanes "${BENCH_LANES:-raw,rawapi,kubelet,crivk}"
  -kube-api-qps "${BENCH_QPS:-50}" -kube-api-burst "${BENCH_BURST:-100}" -command "${cmdline}")
[ "${QUICK}" != 1 ] || args+=(-quick)
[ "${DOCS}" != 1 ] || args+=(-docs "${ROOT}/docs/benchmarks.md")
[ -z "${BENCH_CRIVK_ARGS:-}" ] || args+=(-crivk-args "${BENCH_CRIVK_ARGS}")
[ -z "${BENCH_STEADY_PODS:-}" ] || args+=(-steady-pods "${BENCH_STEADY_PODS}")
[ -z "${BENCH_STEADY_DURATION:-}" ] || args+=(-steady-duration "${BENCH_STEADY_DURATION}")
[ -z "${BENCH_RAW_PARALLELISM:-}" ] || args+=(-raw-parallelism "${BENCH_RAW_PARALLELISM}")
[ -z "${BENCH_CRIVK_PROFILING:-}" ] || args+=(-crivk-profiling-address "${BENCH_CRIVK_PROFILING}")
[ -z "${BENCH_ONLY:-}" ] || args+=(-only "${BENCH_ONLY}")
[ -z "${BENCH_BATCH_SIZES:-}" ] || args+=(-batch-sizes "${BENCH_BATCH_SIZES}")
[ -z "${BENCH_REPEAT:-}" ] || args+=(-repeat "${BENCH_REPEAT}")
[ -z "${BENCH_CRIVK_VARIANTS:-}" ] || args+=(-crivk-variants "${BENCH_CRIVK_VARIANTS}")

log "running the lanes (log: ${RESULTS}/bench.log)"
rc=0
_output/bin/crivk-bench "${args[@]}" 2>&1 | tee "${RESULTS}/bench.log" || rc=$?
hack/local-down.sh >"${RESULTS}/local-down.log" 2>&1 || log "local-down failed, see ${RESULTS}/local-down.log"
trap - EXIT
if [ -f "${RESULTS}/report.md" ]; then
  cat "${RESULTS}/report.md"
fi
log "results in ${RESULTS}; make bench took ${SECONDS} s in all (setup included)"
exit "${rc}"
