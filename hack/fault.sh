#!/usr/bin/env bash
# Injects a real fault into the local cluster (hack/local-up.sh) for the
# fault-tolerance tests: kills one component with SIGKILL, and starts it
# again with exactly the command line local-up recorded, without
# local-up's clean-up (which would remove containerd's pods: a restarted
# runtime must find its containers still running, as after a crash).
#
# Usage: hack/fault.sh kill|start COMPONENT
#   COMPONENT: containerd, etcd, kube-apiserver, kube-controller-manager,
#   kube-scheduler. `start` of a running component does nothing.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOG_PREFIX=fault
# shellcheck source=lib/local.sh
source "${ROOT}/hack/lib/local.sh"

action=${1:-}
name=${2:-}
usage() {
  local IFS="|"
  echo "usage: hack/fault.sh kill|start ${COMPONENTS[*]}" >&2
  exit 2
}
[[ " ${COMPONENTS[*]} " == *" ${name} "* ]] || usage
args_file="${PID_DIR}/${name}.args"
[ -f "${args_file}" ] || { echo "fault: ${name} was not started by hack/local-up.sh (no ${args_file})" >&2; exit 1; }

case "${action}" in
  kill)
    pid=$(recorded_pid "${name}")
    [ -n "${pid}" ] || { echo "fault: ${name} is not running" >&2; exit 1; }
    kill -KILL "${pid}"
    for _ in $(seq 1 50); do pid_alive "${pid}" || break; sleep 0.1; done
    log "${name} (pid ${pid}) killed"
    ;;
  start)
    if [ -n "$(recorded_pid "${name}")" ]; then
      log "${name} already running"; exit 0
    fi
    # The recorded command line, %q-quoted, before the fingerprint comment.
    args=$(sed 's/ # .*$//' "${args_file}")
    eval "set -- ${args}"
    echo "===== $(date -u +%Y-%m-%dT%H:%M:%SZ) hack/fault.sh: starting ${name}" >>"${LOG_DIR}/${name}.log"
    setsid "$@" >>"${LOG_DIR}/${name}.log" 2>&1 </dev/null &
    pid=$!
    # The recorded binary, not component_bin: this script is not told which
    # etcd (LOCAL_ETCD) local-up ran.
    for _ in $(seq 1 50); do
      [ "$(readlink "/proc/${pid}/exe" 2>/dev/null)" = "$1" ] && break
      sleep 0.1
    done
    echo "${pid}" >"${PID_DIR}/${name}.pid"
    log "${name} started (pid ${pid})"
    ;;
  *) usage ;;
esac
