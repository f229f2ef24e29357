#!/usr/bin/env bash
# Runs the real kubelet v1.37.2 (hack/build-kube.sh kubelet) in the
# foreground as the node of the local cluster started by hack/local-up.sh,
# against the project's containerd: the comparison agent of the conformance
# runs. Extra arguments are passed to the kubelet.
#
# Never run it while crivk (or anything else) has pods on the same
# containerd: the kubelet lists every CRI sandbox with no label filter and
# kills the ones it does not know.
#
# State: root dir _output/local/kubelet/root, config
# _output/local/kubelet/config.yaml (rewritten at every start), pod logs
# under _output/local/pods (as crivk).
# Environment: KUBELET_KUBECONFIG (default NODE_KUBECONFIG, the
# system:node:NODE_NAME client certificate; the admin kubeconfig works too).
# AGENT_ENV=FILE: the node of a machine of the cluster of machines (#45;
# hack/machines.sh agent writes FILE and starts this script in the
# machine). FILE, sourced after the cluster's env, sets the node's
# NODE_NAME, NODE_IP, CRI_ENDPOINT, NODE_SERVING_CERT and NODE_SERVING_KEY,
# and AGENT_DIR (root dir, holding config.yaml), AGENT_POD_LOGS_DIR,
# AGENT_CGROUP_ROOT, AGENT_CLUSTER_DNS, AGENT_CLUSTER_DOMAIN and
# AGENT_NODE_LABELS, which go into the config and flags; the kubelet then
# joins with the bootstrap token (BOOTSTRAP_KUBECONFIG) and keeps its
# client certificate under its root dir. Without it, as above. NOT RUN YET
# with AGENT_ENV (hack/README.md).
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=/dev/null
source "${ROOT}/_output/local/env"
if [ -n "${AGENT_ENV:-}" ]; then
  # shellcheck source=/dev/null
  source "${AGENT_ENV}"
fi
DIR=${AGENT_DIR:-${LOCAL_DIR}/kubelet}
KUBELET_ROOT=${AGENT_DIR:-${DIR}/root}
PODS_DIR=${AGENT_POD_LOGS_DIR:-${LOCAL_DIR}/pods}
mkdir -p "${KUBELET_ROOT}" "${PODS_DIR}"

# The settings docs/environment.md records as necessary on this machine (hybrid cgroup
# v1 layout, swap, no systemd), the project's CRI endpoint, the API server's
# client CA and webhook authn/authz for port 10250, the serving certificate
# local-up made for the node. Image GC is off: nothing can be pulled again.
# The disk thresholds are absolute: the host's one disk also holds the
# builds and caches (hack/run-crivk.sh says why; the same for both agents).
cat >"${DIR}/config.yaml" <<CFG
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: ${CRI_ENDPOINT}
podLogsDir: ${PODS_DIR}
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: ${CA_CERT}
authorization:
  mode: Webhook
tlsCertFile: ${NODE_SERVING_CERT}
tlsPrivateKeyFile: ${NODE_SERVING_KEY}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 2Gi
  nodefs.inodesFree: 5%
  imagefs.available: 2Gi
resolvConf: /etc/resolv.conf
CFG

credentials=(--kubeconfig="${KUBELET_KUBECONFIG:-${NODE_KUBECONFIG}}")
machine=()
if [ -n "${AGENT_ENV:-}" ]; then
  # The cluster DNS, and the pods' cgroups under the machine's.
  cat >>"${DIR}/config.yaml" <<CFG
clusterDNS:
- ${AGENT_CLUSTER_DNS}
clusterDomain: ${AGENT_CLUSTER_DOMAIN}
cgroupRoot: ${AGENT_CGROUP_ROOT}
CFG
  credentials=(--bootstrap-kubeconfig="${BOOTSTRAP_KUBECONFIG}" --kubeconfig="${KUBELET_ROOT}/kubeconfig")
  machine=(--node-labels="${AGENT_NODE_LABELS}")
fi

exec "${ROOT}/_output/bin/kubelet" \
  --config="${DIR}/config.yaml" \
  "${credentials[@]}" \
  --root-dir="${KUBELET_ROOT}" \
  --hostname-override="${NODE_NAME}" \
  --node-ip="${NODE_IP}" \
  "${machine[@]}" \
  "$@"
