#!/usr/bin/env bash
# Runs crivk in the foreground as the node of the local cluster started by
# hack/local-up.sh. Extra arguments are passed to crivk. Its pod cgroups
# live under /crivk (CRIVK_CGROUP_ROOT), apart from a kubelet's /kubepods.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=/dev/null
source "${ROOT}/_output/local/env"

exec "${ROOT}/_output/bin/crivk" \
  --kubeconfig="${KUBECONFIG}" \
  --node-name="${NODE_NAME}" \
  --node-ip="${NODE_IP}" \
  --cri-endpoint="${CRI_ENDPOINT}" \
  --root-dir="${LOCAL_DIR}/crivk" \
  --pod-log-dir="${LOCAL_DIR}/pods" \
  --tls-cert-file="${NODE_SERVING_CERT}" \
  --tls-private-key-file="${NODE_SERVING_KEY}" \
  --client-ca-file="${CA_CERT}" \
  --cgroup-root="${CRIVK_CGROUP_ROOT:-/crivk}" \
  "$@"
