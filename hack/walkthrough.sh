#!/usr/bin/env bash
# The README's quick start, as a user runs it (issue #50), checked:
#
#   1. `make run`'s script (hack/run.sh) in the background, in a process
#      group of its own as a terminal's foreground job, until its output
#      says "node registered and running";
#   2. in "another shell", the README's own commands: the sh block after
#      "While `make run` is up" in README.md, read from it line by line
#      (export KUBECONFIG, kubectl get nodes, kubectl run bb ..., kubectl
#      wait ... Ready, kubectl logs bb), each of which must succeed, and
#      kubectl logs bb must print hello;
#   3. Ctrl-C: SIGINT to that process group, then run.sh must exit 0 within
#      WALKTHROUGH_STOP_SECONDS (120), having run local-down, with no
#      process of the group left.
#
# It runs on a state of its own (LOCAL_STATE=walkthrough: etcd data in
# _output/local/etcd-walkthrough, emptied first with the node's root dir by
# FRESH=1 hack/local-down.sh), so that a user's bb in `make run`'s etcd
# neither collides with the README's `kubectl run bb` nor is touched. Its bb
# stays in that etcd afterwards, as a user's does: the cluster tiers of
# hack/test.sh, which run after it, start from their own state all the same.
#
# Logs: _output/test-logs/walkthrough/{own-state,run,commands}.log.
# Usage: hack/walkthrough.sh   (make test-walkthrough; root)
# Environment: WALKTHROUGH_UP_SECONDS (default 1800: the first run builds
# the Kubernetes binaries) bounds step 1. WALKTHROUGH_STATE=default runs it
# on `make run`'s own state instead (not emptied: empty on a fresh machine):
# the README's exact order, `make run` ... Ctrl-C then `make test`, is
# `WALKTHROUGH_STATE=default hack/walkthrough.sh && make test`, which
# leaves bb in `make run`'s etcd as a user's walkthrough does.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOGS=${ROOT}/_output/test-logs/walkthrough
UP_SECONDS=${WALKTHROUGH_UP_SECONDS:-1800}
STOP_SECONDS=${WALKTHROUGH_STOP_SECONDS:-120}
case "${WALKTHROUGH_STATE:-walkthrough}" in
  default) export LOCAL_STATE= ;;
  *) export LOCAL_STATE=${WALKTHROUGH_STATE:-walkthrough} ;;
esac
rm -rf "${LOGS}"
mkdir -p "${LOGS}"
cd "${ROOT}"

log() { echo "walkthrough: $*"; }
fail() {
  log "FAILED: $*"
  log "logs: ${LOGS#"${ROOT}/"}/ (run.log: make run's output; commands.log: the README's commands)"
  exit 1
}

# readme_commands: the lines of the sh block that follows "While `make run`
# is up" in README.md.
readme_commands() {
  awk '/^While `make run` is up/ {found = 1} found && /^```sh$/ {inblock = 1; next} inblock && /^```$/ {exit} inblock {print}' README.md
}

commands=$(readme_commands)
grep -q 'kubectl run bb ' <<<"${commands}" || fail "README.md has no sh block with kubectl run bb after \"While \`make run\` is up\""
grep -q 'kubectl logs bb' <<<"${commands}" || fail "README.md's walkthrough block has no kubectl logs bb"

started=$(date +%s)
if [ -n "${LOCAL_STATE}" ]; then
  log "a state of its own (FRESH=1 LOCAL_STATE=${LOCAL_STATE} hack/local-down.sh; log: own-state.log)"
  FRESH=1 hack/local-down.sh >"${LOGS}/own-state.log" 2>&1 || fail "FRESH=1 hack/local-down.sh failed"
else
  # make run's own state is never emptied (local-down refuses FRESH=1
  # without a LOCAL_STATE): on a fresh machine it is empty.
  log "make run's own state (hack/local-down.sh; log: own-state.log)"
  hack/local-down.sh >"${LOGS}/own-state.log" 2>&1 || fail "hack/local-down.sh failed"
fi

# Job control: run.sh leads its own process group (SIGINT not ignored, as
# for a job started from a terminal), which Ctrl-C signals as a whole.
log "make run's script: hack/run.sh (log: run.log)"
set -m
hack/run.sh >"${LOGS}/run.log" 2>&1 </dev/null &
run_pid=$!
set +m
# alive PID: PID runs (an exited child not yet waited for is a zombie,
# which kill -0 still finds).
alive() {
  local state
  state=$(sed -e 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "${state}" ] && [ "${state}" != Z ]
}
# group_alive: the PIDs of run.sh's process group that run.
group_alive() {
  local p
  for p in $(pgrep -g "${run_pid}"); do alive "${p}" && echo "${p}"; done
  return 0
}
# Whatever happens below, nothing of the group outlives the script.
stop_group() {
  [ -n "$(group_alive)" ] || return 0
  kill -INT -- "-${run_pid}" 2>/dev/null || true
  for _ in $(seq 1 "$((STOP_SECONDS * 10))"); do
    [ -n "$(group_alive)" ] || return 0
    sleep 0.1
  done
  kill -KILL -- "-${run_pid}" 2>/dev/null || true
}
trap 'stop_group' EXIT

deadline=$((started + UP_SECONDS))
until grep -q 'node registered and running' "${LOGS}/run.log"; do
  alive "${run_pid}" || { tail -n 30 "${LOGS}/run.log"; fail "hack/run.sh exited before \"node registered and running\""; }
  [ "$(date +%s)" -lt "${deadline}" ] || { tail -n 30 "${LOGS}/run.log"; fail "no \"node registered and running\" after ${UP_SECONDS}s"; }
  sleep 1
done
up=$(date +%s)
log "node registered and running after $((up - started))s"

# The README's commands, in one shell as a user types them: each must
# succeed; the output of the last, kubectl logs bb, must be hello.
last=
out_file=${LOGS}/command.out
while IFS= read -r line; do
  [ -n "${line}" ] || continue
  echo "\$ ${line}" >>"${LOGS}/commands.log"
  log "\$ ${line}"
  # The README's lines, run as they are written, in this shell (its export
  # reaches the next line, as in the user's shell).
  if ! eval "${line}" >"${out_file}" 2>&1 </dev/null; then
    cat "${out_file}" >>"${LOGS}/commands.log"
    tail -n 20 "${out_file}"
    fail "the README's command failed: ${line}"
  fi
  cat "${out_file}" >>"${LOGS}/commands.log"
  last=$(cat "${out_file}")
done <<<"${commands}"
[ "${last}" = hello ] || fail "kubectl logs bb printed '${last}', want hello"
log "kubectl logs bb: hello"

log "Ctrl-C (SIGINT to make run's process group)"
stop_at=$(date +%s)
kill -INT -- "-${run_pid}"
rc=0
for _ in $(seq 1 "$((STOP_SECONDS * 10))"); do
  alive "${run_pid}" || break
  sleep 0.1
done
alive "${run_pid}" && { tail -n 30 "${LOGS}/run.log"; fail "make run still runs ${STOP_SECONDS}s after Ctrl-C"; }
wait "${run_pid}" || rc=$?
trap - EXIT
[ "${rc}" -eq 0 ] || { tail -n 30 "${LOGS}/run.log"; fail "make run exited ${rc} after Ctrl-C"; }
grep -q '^local-down: done' "${LOGS}/run.log" || fail "make run's output has no \"local-down: done\" after Ctrl-C"
grep -q '^run: stopped. Kept for the next make run' "${LOGS}/run.log" || fail "make run did not say what it keeps for the next run"
left=$(group_alive)
[ -z "${left}" ] || fail "processes of make run's group still run after it exited: ${left//$'\n'/ }"

log "make run stopped $(($(date +%s) - stop_at))s after Ctrl-C (local-down done); the walkthrough took $(($(date +%s) - started))s"
