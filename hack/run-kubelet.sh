#!/usr/bin/env bash
# Runs the real kubelet v1.35.4 (from hack/build-kube.sh) in the foreground
# as the node of the local cluster, against the project's containerd: the
# comparison agent of the conformance runs and benchmarks. Never run it at
# the same time as crivk on the same containerd (the kubelet kills sandboxes
# it does not know).
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=/dev/null
source "${ROOT}/_output/local/env"
DIR=${LOCAL_DIR}/kubelet
mkdir -p "${DIR}"
cat > "${DIR}/config.yaml" <<CFG
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: ${CRI_ENDPOINT}
podLogsDir: ${LOCAL_DIR}/pods
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ${CA_CERT}}
authorization: {mode: Webhook}
tlsCertFile: ${NODE_SERVING_CERT}
tlsPrivateKeyFile: ${NODE_SERVING_KEY}
maxPods: 110
resolvConf: /etc/resolv.conf
CFG
exec "${ROOT}/_output/bin/kubelet" \
  --config="${DIR}/config.yaml" \
  --kubeconfig="${NODE_KUBECONFIG}" \
  --hostname-override="${NODE_NAME}" \
  --node-ip="${NODE_IP}" \
  --root-dir="${DIR}/root" \
  "$@"
