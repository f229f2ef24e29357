# shellcheck shell=bash
# Sourced by the benchmark scripts (hack/bench.sh, hack/bench-fleet.sh): the
# frame both run their harness in. A run writes into its own results
# directory, builds what it needs and brings up the local cluster
# (hack/local-up.sh), and tears the cluster down however it ends; its
# report names the command line that reproduces it. The caller sets ROOT
# and calls, in order:
#
#   bench_start NAME            RESULTS=_output/NAME/<UTC timestamp>; cd ROOT
#   bench_up SETUP              runs the caller's SETUP function (its builds,
#                               then hack/local-up.sh) into setup.log, with
#                               the cluster's tear-down trapped on EXIT;
#                               sources _output/local/env
#   bench_run WHAT BINARY ARGS  the harness, its output into bench.log too;
#                               sets BENCH_RC (not 0: it failed)
#   bench_finish                tears the cluster down, prints report.md and
#                               the time taken; exits with BENCH_RC
#
# and builds the harness's arguments with bench_command (the -command it
# reports) and bench_flags (the optional flags).

# bench_log MESSAGE...: a line prefixed with the benchmark's NAME.
bench_log() {
  echo "${BENCH_NAME}: $*"
}

# bench_start NAME: the results directory _output/NAME/<UTC timestamp>/
# (RESULTS), made; the working directory ROOT. NAME is also the make
# target (make NAME) and bench_log's prefix.
bench_start() {
  BENCH_NAME=$1
  RESULTS=${ROOT}/_output/${BENCH_NAME}/$(date -u +%Y%m%dT%H%M%SZ)
  mkdir -p "${RESULTS}"
  cd "${ROOT}"
}

# bench_down: hack/local-down.sh into local-down.log; a failure is said,
# not fatal.
bench_down() {
  hack/local-down.sh >"${RESULTS}/local-down.log" 2>&1 || bench_log "local-down failed, see ${RESULTS}/local-down.log"
}

# bench_up SETUP: runs the function SETUP with its output in setup.log, the
# cluster's tear-down trapped on EXIT from before it starts; when SETUP
# fails, prints setup.log's last 30 lines and exits 1. Then sources
# _output/local/env (KUBECONFIG, NODE_IP, LOCAL_DIR...: hack/local-up.sh).
bench_up() {
  bench_log "building and bringing up the local cluster (log: ${RESULTS}/setup.log)"
  trap bench_down EXIT
  if ! "$1" >"${RESULTS}/setup.log" 2>&1; then
    tail -n 30 "${RESULTS}/setup.log"
    exit 1
  fi
  # shellcheck source=/dev/null
  source _output/local/env
}

# bench_command COMMAND NAME...: prints COMMAND preceded by NAME=value for
# every NAME that is set and not empty, each put in front in turn (the last
# NAME stands leftmost). NAME:q puts the value in single quotes (free-form
# arguments with spaces).
bench_command() {
  local cmd=$1 spec name
  shift
  for spec in "$@"; do
    name=${spec%:q}
    [ -n "${!name:-}" ] || continue
    if [ "${spec}" != "${name}" ]; then
      cmd="${name}='${!name}' ${cmd}"
    else
      cmd="${name}=${!name} ${cmd}"
    fi
  done
  echo "${cmd}"
}

# bench_flags ARRAY FLAG NAME [FLAG NAME]...: appends FLAG and NAME's value
# to the array ARRAY for every NAME that is set and not empty.
bench_flags() {
  local -n bench_flags_array=$1
  shift
  while [ "$#" -ge 2 ]; do
    [ -z "${!2:-}" ] || bench_flags_array+=("$1" "${!2}")
    shift 2
  done
}

# bench_run WHAT BINARY ARGS...: says it runs WHAT (may be empty) and runs
# the harness BINARY with ARGS, its output on stdout and in bench.log;
# BENCH_RC is its exit status.
bench_run() {
  bench_log "running${1:+ $1} (log: ${RESULTS}/bench.log)"
  shift
  BENCH_RC=0
  "$@" 2>&1 | tee "${RESULTS}/bench.log" || BENCH_RC=$?
}

# bench_finish: tears the cluster down (and no longer on EXIT), prints the
# harness's report.md if it wrote one and the time the script took, and
# exits with BENCH_RC.
bench_finish() {
  bench_down
  trap - EXIT
  [ ! -f "${RESULTS}/report.md" ] || cat "${RESULTS}/report.md"
  bench_log "results in ${RESULTS}; make ${BENCH_NAME} took ${SECONDS} s in all (setup included)"
  exit "${BENCH_RC}"
}
