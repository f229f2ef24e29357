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
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=/dev/null
source "${ROOT}/_output/local/env"
DIR=${LOCAL_DIR}/kubelet
mkdir -p "${DIR}/root" "${LOCAL_DIR}/pods"

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
podLogsDir: ${LOCAL_DIR}/pods
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

exec "${ROOT}/_output/bin/kubelet" \
  --config="${DIR}/config.yaml" \
  --kubeconfig="${KUBELET_KUBECONFIG:-${NODE_KUBECONFIG}}" \
  --root-dir="${DIR}/root" \
  --hostname-override="${NODE_NAME}" \
  --node-ip="${NODE_IP}" \
  "$@"
