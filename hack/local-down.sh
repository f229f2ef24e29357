#!/usr/bin/env bash
# Stops the local test cluster started by hack/local-up.sh:
#
#   1. stops and removes every CRI pod sandbox (and so container) in OUR
#      containerd, so CNI releases pod IPs and iptables rules;
#   2. stops the recorded processes in reverse start order (SIGTERM, SIGKILL
#      after 10s), and any stray process of ours (same binary, our paths on
#      its command line); etcd of either LOCAL_ETCD (Debian's or
#      _output/bin/etcd), whichever local-up started;
#      then crivk's second containerd if it runs (hack/crivk-runtime.sh stop);
#   3. removes left-over runc containers, containerd-shim-runc-v2 processes
#      whose -address is our socket, and every mount under our containerd's
#      state dir and _output/local (deepest first), then the PID files and
#      sockets.
#
# It never touches another containerd's processes, shims or mounts. etcd data
# (_output/local/etcd, and etcd-3.6 of LOCAL_ETCD=built), certificates and
# images are kept for the next local-up unless CLEAN=1, which also removes
# _output/local (both etcd data dirs with it), our run dir and the CNI
# bridge. Running it when nothing is up does nothing and exits 0.
#
# FRESH=1, with LOCAL_STATE=NAME (hack/lib/local.sh), then empties that
# state for the next local-up: its etcd data (_output/local/etcd-NAME and
# etcd-3.6-NAME) and the node's (crivk's root dir _output/local/crivk and
# the static pod manifests _output/local/manifests, which every run of
# crivk as crivk-local shares). hack/test.sh's cluster tiers and
# hack/walkthrough.sh run it first: they start from a state of their own,
# whatever `make run` or a user left (`make run`'s etcd data is not
# touched). The sandboxes a user's crivk left in our containerd are
# removed by step 1, or, if containerd is not running, by local-up when it
# starts it.
#
# Usage: [CLEAN=1] [LOCAL_STATE=NAME FRESH=1] hack/local-down.sh
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOG_PREFIX=local-down
# shellcheck source=hack/lib/local.sh
source "${ROOT}/hack/lib/local.sh"

CLEAN=${CLEAN:-0}
FRESH=${FRESH:-0}
if [ "${FRESH}" = 1 ] && [ -z "${LOCAL_STATE}" ]; then
  log "ERROR: FRESH=1 empties a LOCAL_STATE of its own; without one it would empty make run's etcd data" >&2
  exit 2
fi

# remove_pod_cgroups removes crivk's pod cgroup tree (run-crivk.sh's
# --cgroup-root, /crivk) in every hierarchy, deepest first, once no pod
# runs: crivk removes each pod's cgroup itself, the tree stays between runs.
remove_pod_cgroups() {
  local root=${CRIVK_CGROUP_ROOT:-/crivk} d
  [ "${root}" != "/" ] || return 0
  for d in /sys/fs/cgroup/*"${root}" /sys/fs/cgroup"${root}"; do
    [ -d "${d}" ] || continue
    find "${d}" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    [ -d "${d}" ] && log "WARNING: cgroup ${d} could not be removed (processes left in it?)" >&2
  done
  return 0
}

main() {
  local i
  if [ -n "$(recorded_pid containerd)" ] && [ -x "${CRICTL}" ] && [ -S "${CONTAINERD_SOCK}" ]; then
    remove_all_pods
  fi

  if [ -n "$(recorded_pid metrics-server)" ] && [ -n "$(recorded_pid kube-apiserver)" ]; then
    remove_metrics_apiservice
  fi
  # A crivk of this checkout that outlived whatever started it (an e2e run
  # interrupted before its TestMain stopped crivk) would keep the node API
  # port and talk to the next cluster as its node: it goes first.
  # shellcheck disable=SC2046 # word splitting intended
  stop_pids crivk $(pids_running "${ROOT}/_output/bin/crivk")
  for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
    stop_component "${COMPONENTS[i]}"
  done
  # crivk's second containerd (hack/crivk-runtime.sh: the e2e tests that
  # run the kubelet beside crivk, the Helm e2e) outlives an interrupted
  # run the same way: its own script stops it, with its pods and mounts.
  if [ -s "${ROOT}/_output/runtime-b/containerd.pid" ]; then
    "${ROOT}/hack/crivk-runtime.sh" stop || log "WARNING: hack/crivk-runtime.sh stop failed" >&2
  fi

  cleanup_runtime || {
    log "ERROR: mounts left under ${CONTAINERD_RUN} or ${LOCAL_DIR}" >&2
    exit 1
  }
  remove_pod_cgroups
  # The kubelet's /var/log/containers links of our pods' logs that a killed
  # agent left (both agents remove them with their containers otherwise).
  find /var/log/containers -maxdepth 1 -type l -lname "${LOCAL_DIR}/pods/*" -delete 2>/dev/null || true
  rm -f "${PID_DIR}"/*.pid "${PID_DIR}"/*.args 2>/dev/null || true

  if [ "${FRESH}" = 1 ]; then
    log "FRESH=1: emptying LOCAL_STATE=${LOCAL_STATE}: ${LOCAL_DIR}/etcd-${LOCAL_STATE}, ${LOCAL_DIR}/etcd-3.6-${LOCAL_STATE}, the node's ${LOCAL_DIR}/crivk and ${LOCAL_DIR}/manifests"
    rm -rf "${LOCAL_DIR}/etcd-${LOCAL_STATE}" "${LOCAL_DIR}/etcd-3.6-${LOCAL_STATE}" "${LOCAL_DIR}/crivk" "${LOCAL_DIR}/manifests"
  fi
  if [ "${CLEAN}" = 1 ]; then
    log "CLEAN=1: removing ${LOCAL_DIR}, ${CONTAINERD_RUN}, ${RUNC_ROOT}, ${CRIVK_RUN_DIR}/cni and bridge ${CNI_BRIDGE}"
    rm -rf "${LOCAL_DIR}" "${CONTAINERD_RUN}" "${RUNC_ROOT}" "${CRIVK_RUN_DIR}/cni"
    rmdir "${CRIVK_RUN_DIR}" 2>/dev/null || true
    if ip link show "${CNI_BRIDGE}" >/dev/null 2>&1; then
      ip link delete "${CNI_BRIDGE}" || log "WARNING: cannot delete bridge ${CNI_BRIDGE}" >&2
    fi
  fi
  log "done"
}

main "$@"
