#!/usr/bin/env bash
# `MACHINES=N make run`, N > 1 (hack/run.sh hands over to this): the
# cluster of several machines on this one (#45, hack/README.md "Several
# machines on one"), in the foreground until Ctrl-C:
#
#   1. builds what is missing (as hack/run.sh; the kubelet and kubectl
#      too) and the images, the network add-ons' included
#      (NETWORK_IMAGES=1 hack/images.sh, on the host: the machines only
#      import them);
#   2. the control plane on the host: MACHINES=N hack/local-up.sh (no
#      containerd nor node there; node CIDRs allocated), its etcd data in
#      LOCAL_STATE=machines unless LOCAL_STATE is set (not `make run`'s);
#   3. the machines m1..mN (hack/machines.sh up N) and a node agent in
#      each (hack/machines.sh agent): the kubelet in m1, crivk in m2, the
#      kubelet in m3 (phase 4 adds crivk beside it by the Helm chart), then
#      alternately; waits until each Node has registered with a podCIDR;
#   4. the network add-ons (hack/network.sh apply: kube-proxy, flannel,
#      CoreDNS) and the host's routes to the nodes' pod subnets
#      (hack/machines.sh routes); waits until every Node is Ready and
#      CoreDNS is available.
#
# Ctrl-C: hack/machines.sh down (each machine's pods, agent, containerd
# and namespaces), then hack/local-down.sh.
#
# Written for #45 phases 2 and 3; NOT RUN YET (hack/README.md says what was
# checked and what comes next).
#
# Usage: MACHINES=N hack/run-machines.sh
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOG_PREFIX=run-machines
# LOCAL_STATE before lib/local.sh, which derives etcd's data dir from it.
export LOCAL_STATE=${LOCAL_STATE:-machines}
# shellcheck source=hack/lib/local.sh
source "${ROOT}/hack/lib/local.sh"
export MACHINES
[ "${MACHINES}" -gt 1 ] || { log "ERROR: MACHINES must be 2 or more (1 is hack/run.sh's single node)" >&2; exit 2; }
KUBECTL=("${BIN_DIR}/kubectl" --kubeconfig "${LOCAL_DIR}/admin.kubeconfig")

# agent_of mN: the node agent machine mN runs.
agent_of() {
  case "$1" in
    m1 | m3) echo kubelet ;;
    m2) echo crivk ;;
    *) if (( ${1#m} % 2 )); then echo kubelet; else echo crivk; fi ;;
  esac
}

# wait_for WHAT TIMEOUT CMD...: polls CMD until it succeeds.
wait_for() {
  local what=$1 deadline=$(($(date +%s) + $2))
  shift 2
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "${deadline}" ] || { log "ERROR: timed out waiting for ${what}" >&2; return 1; }
    sleep 1
  done
  log "${what}"
}

# nodes_with_pod_cidrs N: N Nodes have registered with spec.podCIDR.
nodes_with_pod_cidrs() {
  [ "$("${KUBECTL[@]}" get nodes -o jsonpath='{range .items[*]}{.spec.podCIDR}{"\n"}{end}' | grep -c .)" -ge "$1" ]
}

stopped() {
  local rc=$1
  "${ROOT}/hack/machines.sh" down || { log "ERROR: machines.sh down failed" >&2; rc=1; }
  "${ROOT}/hack/local-down.sh" || { log "ERROR: local-down failed: something of the cluster may still run" >&2; rc=1; }
  log "stopped; the cluster's etcd data is kept in LOCAL_STATE=${LOCAL_STATE}"
  exit "${rc}"
}

"${ROOT}/hack/install-deps.sh"
"${ROOT}/hack/build.sh"
"${ROOT}/hack/build-kube.sh" kubelet kubectl
NETWORK_IMAGES=1 "${ROOT}/hack/images.sh"
METRICS_SERVER=${METRICS_SERVER:-1} "${ROOT}/hack/local-up.sh"
trap 'stopped $?' EXIT
NETWORK_IMAGES=1 "${ROOT}/hack/machines.sh" up "${MACHINES}"
for ((i = 1; i <= MACHINES; i++)); do
  "${ROOT}/hack/machines.sh" agent "m${i}" "$(agent_of "m${i}")"
done
wait_for "${MACHINES} Nodes registered with a podCIDR" 180 nodes_with_pod_cidrs "${MACHINES}"
"${ROOT}/hack/network.sh" apply
"${ROOT}/hack/machines.sh" routes
wait_for "every Node Ready" 300 "${KUBECTL[@]}" wait --for=condition=Ready node --all --timeout=10s
wait_for "CoreDNS available" 300 "${KUBECTL[@]}" -n kube-system wait --for=condition=Available deployment/coredns --timeout=10s
"${KUBECTL[@]}" get nodes -o wide
echo
log "the cluster of ${MACHINES} machines is up; in another shell:"
echo "  cd ${ROOT}"
echo "  export KUBECONFIG=\$PWD/_output/local/admin.kubeconfig"
echo "  _output/bin/kubectl get nodes,pods -A -o wide"
echo "  hack/machines.sh status; hack/machines.sh exec m1 crictl ps"
log "Ctrl-C to stop"
while :; do sleep 3600; done
