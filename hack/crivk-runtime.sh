#!/usr/bin/env bash
# A second containerd for crivk beside the kubelet's (docs/coexistence.md):
# what an operator installs as a host service before `helm install
# charts/crivk --set runtime.managed=false`; with runtime.managed (the
# default) the chart starts the same itself. The Helm e2e
# (hack/helm-e2e.sh) uses these paths for the chart's runtime and this
# script's stop to clean up after it. Its own
# socket /run/crivk-b/containerd.sock, root and config under
# _output/runtime-b, runc root, network namespaces and CNI network (bridge
# crivk1, 10.89.0.0/16): nothing is shared with the local cluster's
# containerd (hack/local-up.sh), which the kubelet uses. The test images are
# imported (hack/images.sh).
# Usage: hack/crivk-runtime.sh start|stop
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOG_PREFIX=crivk-runtime
# shellcheck source=hack/lib/local.sh
source "${ROOT}/hack/lib/local.sh"

# The helpers of lib/local.sh (cleanup_runtime, our_shims, our_mounts)
# work on these.
B=${ROOT}/_output/runtime-b
LOCAL_DIR=${B}
CONTAINERD_RUN=/run/crivk-b
CONTAINERD_STATE=${CONTAINERD_RUN}/state
CONTAINERD_SOCK=${CONTAINERD_RUN}/containerd.sock
CONTAINERD_ROOT=${B}/root
CONTAINERD_CONFIG=${B}/config.toml
RUNC_ROOT=${CONTAINERD_RUN}/runc
CNI_CONF_DIR=${B}/net.d
CONTAINERD_HOSTS_DIR=${B}/certs.d
CNI_DATA_DIR=${CONTAINERD_RUN}/cni
CNI_NETWORK=crivk-b
CNI_BRIDGE=crivk1
POD_CIDR=10.89.0.0/16
PIDFILE=${B}/containerd.pid

start() {
  mkdir -p "${B}" "${CNI_CONF_DIR}" "${CONTAINERD_RUN}"
  containerd_config >"${CONTAINERD_CONFIG}"
  registry_hosts
  cni_conflist >"${CNI_CONF_DIR}/10-${CNI_NETWORK}.conflist"
  if [ -s "${PIDFILE}" ] && pid_alive "$(cat "${PIDFILE}")"; then
    log "already running (pid $(cat "${PIDFILE}"))"
  else
    cleanup_runtime || true
    setsid "$(command -v containerd)" --config "${CONTAINERD_CONFIG}" >>"${B}/containerd.log" 2>&1 </dev/null &
    echo $! >"${PIDFILE}"
    log "started containerd (pid $!), log ${B}/containerd.log"
  fi
  local i
  for i in $(seq 1 100); do
    "${CRICTL}" --runtime-endpoint "unix://${CONTAINERD_SOCK}" info >/dev/null 2>&1 && break
    [ "${i}" -lt 100 ] || fail "containerd at ${CONTAINERD_SOCK} did not answer"
    sleep 0.2
  done
  "${ROOT}/hack/images.sh" "${CONTAINERD_SOCK}" >/dev/null
  log "ready: unix://${CONTAINERD_SOCK}"
}

fail() { log "ERROR: $*" >&2; exit 1; }

stop() {
  if [ -S "${CONTAINERD_SOCK}" ]; then
    "${CRICTL}" --runtime-endpoint "unix://${CONTAINERD_SOCK}" rmp -fa >/dev/null 2>&1 || true
  fi
  # The PID file is this script's or, in the Helm e2e, the chart's runtime
  # container's (runtime.configDir=${B}): only a containerd with our config.
  if [ -s "${PIDFILE}" ]; then
    local pid
    pid=$(cat "${PIDFILE}")
    case "$(cmdline_of "${pid}" 2>/dev/null)" in
      *"${CONTAINERD_CONFIG}"*) stop_pids containerd "${pid}" ;;
    esac
    rm -f "${PIDFILE}"
  fi
  cleanup_runtime
  if ip link show "${CNI_BRIDGE}" >/dev/null 2>&1; then ip link delete "${CNI_BRIDGE}" || true; fi
  log "stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: hack/crivk-runtime.sh start|stop" >&2; exit 2 ;;
esac
