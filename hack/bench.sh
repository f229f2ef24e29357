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
# shellcheck source=hack/lib/bench.sh
source "${ROOT}/hack/lib/bench.sh"
QUICK=${BENCH_QUICK:-0}
FOCUSED=0
[ -z "${BENCH_ONLY:-}${BENCH_CRIVK_VARIANTS:-}" ] && [ "${BENCH_REPEAT:-1}" = 1 ] || FOCUSED=1
if [ "${QUICK}" = 1 ] || [ "${FOCUSED}" = 1 ]; then DOCS=${BENCH_DOCS:-0}; else DOCS=${BENCH_DOCS:-1}; fi
bench_start bench

setup() {
  hack/install-deps.sh || return
  hack/build.sh || return
  hack/build-kube.sh kubelet || return
  go build -o _output/bin/crivk-bench ./test/bench || return
  hack/local-up.sh
}
bench_up setup

cmdline="make bench"
[ "${QUICK}" != 1 ] || cmdline="BENCH_QUICK=1 ${cmdline}"
cmdline=$(bench_command "${cmdline}" BENCH_CRIVK_ARGS:q BENCH_STEADY_DURATION BENCH_STEADY_PODS BENCH_RAW_PARALLELISM \
  BENCH_LANES BENCH_CRIVK_VARIANTS:q BENCH_REPEAT BENCH_BATCH_SIZES BENCH_ONLY)
args=(-root "${ROOT}" -out "${RESULTS}" -lanes "${BENCH_LANES:-raw,rawapi,kubelet,crivk}"
  -kube-api-qps "${BENCH_QPS:-50}" -kube-api-burst "${BENCH_BURST:-100}" -command "${cmdline}")
[ "${QUICK}" != 1 ] || args+=(-quick)
[ "${DOCS}" != 1 ] || args+=(-docs "${ROOT}/docs/benchmarks.md")
bench_flags args -crivk-args BENCH_CRIVK_ARGS -steady-pods BENCH_STEADY_PODS -steady-duration BENCH_STEADY_DURATION \
  -raw-parallelism BENCH_RAW_PARALLELISM -crivk-profiling-address BENCH_CRIVK_PROFILING -only BENCH_ONLY \
  -batch-sizes BENCH_BATCH_SIZES -repeat BENCH_REPEAT -crivk-variants BENCH_CRIVK_VARIANTS

bench_run "the lanes" _output/bin/crivk-bench "${args[@]}"
bench_finish
