#!/usr/bin/env bash
# Runs crivk in the foreground as the node of the local cluster started by
# hack/local-up.sh. Extra arguments are passed to crivk.
#
# crivk joins as a kubelet does: with only the bootstrap token
# (BOOTSTRAP_KUBECONFIG) it requests its system:node client certificate
# through a CSR, keeps it under <root-dir>/pki and writes
# <root-dir>/kubeconfig; the API server runs Node,RBAC and NodeRestriction.
# CRIVK_ADMIN_KUBECONFIG=1 runs it with the admin kubeconfig instead.
# Its pod cgroups live under /crivk (CRIVK_CGROUP_ROOT), apart from a
# kubelet's /kubepods. Its static pod manifests are read from
# _output/local/manifests (CRIVK_POD_MANIFEST_PATH), as the node e2e suite
# runs a kubelet with a manifest directory.
# CRIVK_BIN runs another build of crivk with the same settings (the e2e
# upgrade test's previous release, hack/build-previous.sh).
# This machine's cgroups are v1 (docs/environment.md), which crivk, as the
# kubelet, refuses by default: --fail-cgroupv1=false says so (hack/run-kubelet.sh's
# file has failCgroupV1: false). A build older than the flag (CRIVK_BIN, the
# e2e upgrade test's previous release) never refused v1 and does not know
# it: it is left out for such a build.
# CRIVK_SETTINGS_FROM_CONFIG=1 leaves out the flags below that are
# KubeletConfiguration fields (the CRI endpoint, pod logs, serving
# certificate, client CA, cgroup root, cgroup v1, manifests, image GC, eviction):
# flags override --config, which must then be their only source
# (hack/lib/node-e2e-agent.sh restarts crivk with the node e2e suite's).
# AGENT_ENV=FILE: the node of a machine of the cluster of machines (#45;
# hack/machines.sh agent writes FILE and starts this script in the
# machine), as hack/run-kubelet.sh's: FILE, sourced after the cluster's
# env, sets NODE_NAME, NODE_IP, CRI_ENDPOINT, NODE_SERVING_CERT and _KEY,
# AGENT_DIR (root dir; the static pod manifests in its manifests/),
# AGENT_POD_LOGS_DIR, AGENT_CGROUP_ROOT (CRIVK_CGROUP_ROOT still wins),
# AGENT_CLUSTER_DNS, AGENT_CLUSTER_DOMAIN and AGENT_NODE_LABELS. NOT RUN
# YET with AGENT_ENV (hack/README.md).
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=/dev/null
source "${ROOT}/_output/local/env"
if [ -n "${AGENT_ENV:-}" ]; then
  # shellcheck source=/dev/null
  source "${AGENT_ENV}"
fi
CRIVK_ROOT=${AGENT_DIR:-${LOCAL_DIR}/crivk}
PODS_DIR=${AGENT_POD_LOGS_DIR:-${LOCAL_DIR}/pods}

if [ "${CRIVK_ADMIN_KUBECONFIG:-0}" = 1 ]; then
  credentials=(--kubeconfig="${KUBECONFIG}")
else
  credentials=(--bootstrap-kubeconfig="${BOOTSTRAP_KUBECONFIG}" --kubeconfig="${CRIVK_ROOT}/kubeconfig")
fi

# The serving certificate local-up made, unless crivk asks the cluster for
# one (--rotate-server-certificates).
serving=(--tls-cert-file="${NODE_SERVING_CERT}" --tls-private-key-file="${NODE_SERVING_KEY}")
for a in "$@"; do
  case "${a}" in --rotate-server-certificates | --rotate-server-certificates=true) serving=() ;; esac
done

# The host's one disk holds the builds, the Go caches and this cluster: a
# share of it says nothing of this node's pods (at the default 85% image GC
# and imagefs.available<15%, a 252 GiB disk with 37 GiB free already has
# DiskPressure). So, as hack/run-kubelet.sh: image GC is off (the local
# images cannot be pulled again) and the disk thresholds are absolute.
# The GC and DiskPressure tests pass their own, on filesystems of their own
# (test/e2e/gc_test.go, diskpressure_test.go); later flags win.
manifests="${CRIVK_POD_MANIFEST_PATH:-${AGENT_DIR:-${LOCAL_DIR}}/manifests}"
mkdir -p "${manifests}"

bin=${CRIVK_BIN:-${ROOT}/_output/bin/crivk}
cgroupv1=()
case "$("${bin}" --help 2>/dev/null || true)" in *--fail-cgroupv1*) cgroupv1=(--fail-cgroupv1=false) ;; esac

settings=(
  --cri-endpoint="${CRI_ENDPOINT}"
  --pod-log-dir="${PODS_DIR}"
  "${serving[@]}"
  --client-ca-file="${CA_CERT}"
  --cgroup-root="${CRIVK_CGROUP_ROOT:-${AGENT_CGROUP_ROOT:-/crivk}}"
  "${cgroupv1[@]}"
  --pod-manifest-path="${manifests}"
  --image-gc-high-threshold=100 --image-gc-low-threshold=99
  --eviction-hard='memory.available<100Mi,nodefs.available<2Gi,nodefs.inodesFree<5%,imagefs.available<2Gi'
)
[ "${CRIVK_SETTINGS_FROM_CONFIG:-0}" != 1 ] || settings=()
machine=()
if [ -n "${AGENT_ENV:-}" ]; then
  machine=(--cluster-dns="${AGENT_CLUSTER_DNS}" --cluster-domain="${AGENT_CLUSTER_DOMAIN}"
    --node-labels="${AGENT_NODE_LABELS}")
fi

exec "${bin}" \
  "${credentials[@]}" \
  --node-name="${NODE_NAME}" \
  --node-ip="${NODE_IP}" \
  --root-dir="${CRIVK_ROOT}" \
  "${settings[@]}" \
  "${machine[@]}" \
  "$@"
