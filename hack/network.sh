#!/usr/bin/env bash
# The network add-ons of the cluster of machines (#45, hack/README.md
# "Several machines on one", "The pod network"): flannel, kube-proxy and
# CoreDNS, whose manifests are hack/network/*.yaml with placeholders
# ${NAME} for this cluster's values.
#
#   render DIR [CONFIGMAP-DIR]
#         renders the manifests into DIR and checks them offline
#         (hack/tools/cmd/addons: strict decoding, the API server's
#         validation, references between them, kube-proxy's own config
#         decoder and validation, flannel's net-conf.json; no API server
#         needed), and with CONFIGMAP-DIR writes each ConfigMap's data
#         there as NAMESPACE/NAME/KEY. The values: NODE_IP (the
#         environment's, else _output/local/env's) and APISERVER_PORT,
#         CLUSTER_CIDR, CLUSTER_DNS, CLUSTER_DOMAIN and SERVICE_CIDR of
#         hack/lib/local.sh. The images must be those of
#         `NETWORK_IMAGES=1 hack/images.sh` (their tarballs are read for
#         the names), so build them first.
#   check renders into a temporary directory and removes it; NODE_IP
#         192.0.2.2 when neither the environment nor a cluster gives one.
#   apply renders, then applies the manifests to the local cluster
#         (_output/bin/kubectl with its admin kubeconfig; hack/run-machines.sh
#         runs it). Written for phase 3 of #45; NOT RUN YET.
#
# Usage: hack/network.sh render DIR [CONFIGMAP-DIR] | check | apply
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOG_PREFIX=network
# shellcheck source=hack/lib/local.sh
source "${ROOT}/hack/lib/local.sh"

MANIFESTS=("${ROOT}"/hack/network/*.yaml)
# The network images' tarballs (hack/images.sh NETWORK_IMAGES=1).
IMAGE_TARS=(kube-proxy flannel coredns)

usage() {
  echo "usage: hack/network.sh render DIR [CONFIGMAP-DIR] | check | apply" >&2
  exit 2
}

# node_ip: NODE_IP of the environment, else of the cluster's env file,
# else $1.
node_ip() {
  if [ -n "${NODE_IP:-}" ]; then
    echo "${NODE_IP}"
  elif [ -f "${LOCAL_DIR}/env" ]; then
    # shellcheck source=/dev/null
    (source "${LOCAL_DIR}/env" && echo "${NODE_IP}")
  else
    echo "$1"
  fi
}

# images: the names of the network images' tarballs, comma-separated.
images() {
  local t names=()
  (cd "${ROOT}/hack/tools" && CGO_ENABLED=0 go build -trimpath -o "${BIN_DIR}/regtool" ./cmd/regtool)
  for t in "${IMAGE_TARS[@]}"; do
    [ -f "${ROOT}/_output/images/${t}.tar" ] ||
      { log "ERROR: no _output/images/${t}.tar: run NETWORK_IMAGES=1 hack/images.sh first" >&2; return 1; }
    names+=("$("${BIN_DIR}/regtool" name "${ROOT}/_output/images/${t}.tar")")
  done
  (IFS=,; echo "${names[*]}")
}

# render DIR [CONFIGMAP-DIR] NODE-IP
render() {
  local out=$1 cms=$2 ip=$3 imgs args
  [ -n "${ip}" ] || { log "ERROR: no NODE_IP: set it, or run hack/local-up.sh first" >&2; return 1; }
  imgs=$(images)
  (cd "${ROOT}/hack/tools" && CGO_ENABLED=0 go build -trimpath -o "${BIN_DIR}/addons" ./cmd/addons)
  args=(-set "NODE_IP=${ip}" -set "APISERVER_PORT=${APISERVER_PORT}" -set "CLUSTER_CIDR=${CLUSTER_CIDR}"
    -set "CLUSTER_DNS=${CLUSTER_DNS}" -set "CLUSTER_DOMAIN=${CLUSTER_DOMAIN}"
    -service-cidr "${SERVICE_CIDR}" -images "${imgs}" -o "${out}")
  [ -z "${cms}" ] || args+=(-configmaps "${cms}")
  "${BIN_DIR}/addons" "${args[@]}" "${MANIFESTS[@]}" | sed "s|${ROOT}/||"
  log "rendered into ${out} (NODE_IP ${ip})"
}

main() {
  [ $# -gt 0 ] || usage
  local cmd=$1 dir
  shift
  case "${cmd}" in
    render)
      if [ $# -lt 1 ] || [ $# -gt 2 ]; then usage; fi
      render "$1" "${2:-}" "$(node_ip "")"
      ;;
    check)
      [ $# = 0 ] || usage
      dir=$(mktemp -d)
      # shellcheck disable=SC2064 # dir is expanded now: it is main's
      trap "rm -rf '${dir}'" EXIT
      render "${dir}" "" "$(node_ip 192.0.2.2)"
      ;;
    apply)
      [ $# = 0 ] || usage
      [ -f "${LOCAL_DIR}/env" ] || { log "ERROR: no cluster (${LOCAL_DIR}/env): run hack/local-up.sh" >&2; exit 1; }
      dir=${LOCAL_DIR}/network
      rm -rf "${dir}"
      render "${dir}" "" "$(node_ip "")"
      "${ROOT}/hack/build-kube.sh" kubectl >/dev/null
      "${BIN_DIR}/kubectl" --kubeconfig "${LOCAL_DIR}/admin.kubeconfig" apply -f "${dir}"
      ;;
    *) usage ;;
  esac
}

main "$@"
