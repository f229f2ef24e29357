#!/usr/bin/env bash
# A smoke test of the network add-ons' images and configuration (#45,
# hack/README.md "Several machines on one", "The pod network"), without a
# cluster: builds the images (NETWORK_IMAGES=1 hack/images.sh), renders
# and checks the manifests (hack/network.sh render), brings up one
# machine (hack/machines.sh up 1, the images imported into its
# containerd), then in m1, each container run by ctr from the image:
#
#   versions    kube-proxy --version is Kubernetes v1.37.2, flanneld
#               --version v0.28.11, coredns -version CoreDNS-1.15.0, and
#               flannel-cni-conf -h prints its usage
#   tools       in the kube-proxy and flannel images (privileged, the
#               machine's network): iptables, iptables-restore, ip6tables
#               are the nf_tables variant (the host's is too) and nft
#               runs; a chain the image's iptables makes is in m1's nat
#               table, not the host's
#   kube-proxy  kube-proxy reads and validates the rendered ConfigMap's
#               config.conf where the DaemonSet mounts it
#               (/var/lib/kube-proxy; --write-config-to prints the result):
#               mode iptables, clusterCIDR 10.244.0.0/16, maxPerCore 0,
#               strictly decoded (no "lenient decoding")
#   coredns     CoreDNS runs the rendered Corefile (the ConfigMap at
#               /etc/coredns, a fake service account pointing at an API
#               server that is not there): /health 200, /ready 503 (the
#               kubernetes plugin has no API), /metrics 200, a query to it
#               answered (SERVFAIL), no [ERROR] in its log
#   cni-conf    the flannel DaemonSet's cni-conf container (the flannel
#               image's flannel-cni-conf, with its mounts) writes the
#               conflist of a subnet.env as flanneld writes it
#               (10.244.1.1/24): m1's containerd reports the network ready
#               and a pod sandbox gets an address in 10.244.1.0/24
#
# then `machines.sh down`. Nothing of it talks to an API server: the
# add-ons running against one is phase 3 of #45. Refuses to start while
# machines are up. Exits non-zero when a step failed.
#
# Usage: hack/smoke-network.sh   (as root)
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
M=${ROOT}/hack/machines.sh
WORK=${ROOT}/_output/network-smoke
KUBE_PROXY_IMAGE=registry.k8s.io/kube-proxy:v1.37.2
FLANNEL_IMAGE=docker.io/flannel/flannel:v0.28.11
COREDNS_IMAGE=registry.k8s.io/coredns/coredns:v1.15.0
BUSYBOX_IMAGE=registry.k8s.io/e2e-test-images/busybox:1.37.0-2
POD_SUBNET=10.244.1.1/24

log() { echo "smoke-network: $*"; }
fail() {
  log "ERROR: $*" >&2
  exit 1
}

[ "$(id -u)" = 0 ] || fail "run as root"
if "${M}" status | grep -q ': holder'; then
  fail "machines are up; hack/machines.sh down first"
fi

passed=()
failed=()

# step NAME FUNCTION: as hack/smoke-machines.sh's.
step() {
  local name=$1 rc
  log "--- ${name}"
  set +o errexit
  (
    set -o errexit
    "$2"
  )
  rc=$?
  set -o errexit
  if [ "${rc}" -eq 0 ]; then
    passed+=("${name}")
  else
    failed+=("${name}")
    log "FAILED: ${name}" >&2
  fi
}

# x CMD...: CMD in m1, without ctr's warning that the host's cgroups are v1.
x() { "${M}" exec m1 "$@" 2> >(grep -v 'support for cgroup v1 is deprecated' >&2); }

# want WHAT GOT WANT: prints GOT, fails unless it is WANT.
want() {
  echo "  $1: $2"
  [ "$2" = "$3" ] || { echo "  want: $3" >&2; return 1; }
}

# has WHAT TEXT PATTERN: TEXT (printed indented) holds PATTERN (grep -E).
has() {
  grep -qE -- "$3" <<<"$2" || { echo "  $1: no match for '$3' in:" >&2; printf '%s\n' "$2" | sed 's/^/    /' >&2; return 1; }
  echo "  $1: $(grep -E -m1 -- "$3" <<<"$2")"
}

# run IMAGE CMD...: CMD in a container of IMAGE in m1, removed after it.
run() {
  local image=$1
  shift
  x ctr run --rm "${RUN_OPTS[@]}" "${image}" "smoke-network-$$" "$@"
}
RUN_OPTS=()

versions() {
  has kube-proxy "$(run "${KUBE_PROXY_IMAGE}" /usr/local/bin/kube-proxy --version 2>&1)" '^Kubernetes v1\.37\.2$'
  has flanneld "$(run "${FLANNEL_IMAGE}" /opt/bin/flanneld --version 2>&1)" '^v0\.28\.11$'
  has coredns "$(run "${COREDNS_IMAGE}" /coredns -version 2>&1)" '^CoreDNS-1\.15\.0$'
  has flannel-cni-conf "$(run "${FLANNEL_IMAGE}" /opt/bin/flannel-cni-conf -h 2>&1)" '^Usage of flannel-cni-conf'
}

tools() {
  local image out
  RUN_OPTS=(--net-host --privileged)
  for image in "${KUBE_PROXY_IMAGE}" "${FLANNEL_IMAGE}"; do
    echo "  ${image}:"
    # shellcheck disable=SC2016 # the container's shell expands
    out=$(run "${image}" sh -c 'for t in iptables iptables-restore iptables-save ip6tables ip6tables-restore; do $t --version; done; nft --version; iptables -t nat -N SMOKE-NETWORK && iptables -t nat -S SMOKE-NETWORK && iptables -t nat -X SMOKE-NETWORK' 2>&1)
    printf '%s\n' "${out}" | sed 's/^/    /'
    [ "$(grep -c '(nf_tables)$' <<<"${out}")" = 5 ] || return 1
    has "  nft" "${out}" '^nftables v'
    has "  a chain in m1's nat table" "${out}" '^-N SMOKE-NETWORK$'
  done
  if iptables -t nat -S 2>/dev/null | grep -q SMOKE-NETWORK; then
    echo "  the chain is in the host's nat table" >&2
    return 1
  fi
  echo "  the host's nat table: no SMOKE-NETWORK chain"
}

kube_proxy() {
  local out
  RUN_OPTS=(--mount "type=bind,src=${WORK}/configmaps/kube-system/kube-proxy,dst=/var/lib/kube-proxy,options=rbind:ro")
  out=$(run "${KUBE_PROXY_IMAGE}" /usr/local/bin/kube-proxy --config=/var/lib/kube-proxy/config.conf \
    --hostname-override=m1 --write-config-to=/dev/stdout 2>&1)
  has mode "${out}" '^mode: iptables$'
  has clusterCIDR "${out}" '^clusterCIDR: 10\.244\.0\.0/16$'
  has maxPerCore "${out}" '^  maxPerCore: 0$'
  has kubeconfig "${out}" '^  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf$'
  has written "${out}" '"Wrote configuration"'
  if grep -q 'lenient decoding' <<<"${out}"; then
    echo "  kube-proxy decoded its config leniently" >&2
    return 1
  fi
}

coredns() {
  local code p out ok=false
  mkdir -p "${WORK}/sa"
  printf 'smoke' >"${WORK}/sa/token"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "${WORK}/sa/ca.key" -out "${WORK}/sa/ca.crt" \
    -subj /CN=smoke-network -days 1 2>/dev/null
  : >"${WORK}/coredns.log"
  x ctr run -d --net-host --env KUBERNETES_SERVICE_HOST=127.0.0.1 --env KUBERNETES_SERVICE_PORT=6443 \
    --log-uri "file://${WORK}/coredns.log" \
    --mount "type=bind,src=${WORK}/configmaps/kube-system/coredns,dst=/etc/coredns,options=rbind:ro" \
    --mount "type=bind,src=${WORK}/sa,dst=/var/run/secrets/kubernetes.io/serviceaccount,options=rbind:ro" \
    "${COREDNS_IMAGE}" smoke-network-coredns /coredns -conf /etc/coredns/Corefile
  # The kubernetes plugin waits 5 s for the API before it serves.
  for _ in $(seq 1 50); do
    if x curl -s -o /dev/null --max-time 1 http://127.0.0.1:8080/health; then ok=true; break; fi
    sleep 0.2
  done
  [ "${ok}" = true ] || { cat "${WORK}/coredns.log" >&2; return 1; }
  for p in 8080/health:200 8181/ready:503 9153/metrics:200; do
    code=$(x curl -s -o /dev/null -w '%{http_code}' --max-time 3 "http://127.0.0.1:${p%:*}")
    want "${p%:*}" "${code}" "${p#*:}"
  done
  for _ in $(seq 1 50); do
    grep -q '^\.:53$' "${WORK}/coredns.log" && break
    sleep 0.2
  done
  RUN_OPTS=(--net-host)
  out=$(run "${BUSYBOX_IMAGE}" nslookup -timeout=2 kubernetes.default.svc.cluster.local 127.0.0.1 2>&1 || true)
  has "query" "${out}" 'SERVFAIL'
  x ctr task kill -s TERM smoke-network-coredns
  for _ in $(seq 1 60); do
    [ "$(x ctr task ls | awk '$1 == "smoke-network-coredns" {print $3}')" = STOPPED ] && break
    sleep 0.2
  done
  x ctr container rm smoke-network-coredns
  sed 's/^/    /' "${WORK}/coredns.log"
  has "version" "$(cat "${WORK}/coredns.log")" '^CoreDNS-1\.15\.0$'
  if grep -q '\[ERROR\]' "${WORK}/coredns.log"; then
    echo "  errors in CoreDNS's log" >&2
    return 1
  fi
}

cni_conf() {
  local ready id ip conflist=${ROOT}/_output/machines/m1/net.d/10-flannel.conflist
  mkdir -p "${WORK}/flannel"
  printf 'FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=%s\nFLANNEL_MTU=1500\nFLANNEL_IPMASQ=true\n' "${POD_SUBNET}" \
    >"${WORK}/flannel/subnet.env"
  want "m1 NetworkReady before" "$(x crictl info -o go-template --template '{{range .status.conditions}}{{if eq .type "NetworkReady"}}{{.status}}{{end}}{{end}}')" false
  RUN_OPTS=(--mount "type=bind,src=${WORK}/flannel,dst=/run/flannel,options=rbind:ro"
    --mount "type=bind,src=/etc/cni/net.d,dst=/etc/cni/net.d,options=rbind:rw")
  run "${FLANNEL_IMAGE}" /opt/bin/flannel-cni-conf -subnet-file=/run/flannel/subnet.env \
    -conflist=/etc/cni/net.d/10-flannel.conflist
  sed 's/^/    /' "${conflist}"
  has subnet "$(cat "${conflist}")" '"subnet": "10\.244\.1\.0/24"'
  has ipMasq "$(cat "${conflist}")" '"ipMasq": false'
  for _ in $(seq 1 50); do
    ready=$(x crictl info -o go-template --template '{{range .status.conditions}}{{if eq .type "NetworkReady"}}{{.status}}{{end}}{{end}}')
    [ "${ready}" != true ] || break
    sleep 0.2
  done
  want "m1 NetworkReady" "${ready}" true
  cat >"${WORK}/pod.json" <<EOF
{
  "metadata": {"name": "probe", "namespace": "network-smoke", "uid": "network-smoke-probe", "attempt": 0},
  "hostname": "probe",
  "log_directory": "/var/log/pods/network-smoke-probe",
  "linux": {"cgroup_parent": "/crivk-machines/m1/pods"}
}
EOF
  id=$(x crictl runp "${WORK}/pod.json")
  ip=$(x crictl inspectp -o go-template --template '{{.status.network.ip}}' "${id}")
  echo "  sandbox ${id:0:13}: ip ${ip}"
  x crictl stopp "${id}" >/dev/null
  x crictl rmp "${id}" >/dev/null
  case "${ip}" in 10.244.1.*) ;; *) return 1 ;; esac
}

trap '"${M}" down >/dev/null 2>&1 || true' EXIT
rm -rf "${WORK}"
mkdir -p "${WORK}"
NETWORK_IMAGES=1 nice -n 19 ionice -c3 "${ROOT}/hack/images.sh" | sed 's/^/  /'
# NODE_IP: the host's side of the LAN; nothing here reaches it.
NODE_IP=10.91.0.1 "${ROOT}/hack/network.sh" render "${WORK}/manifests" "${WORK}/configmaps" | sed 's/^/  /'
NETWORK_IMAGES=1 "${M}" up 1
step versions versions
step tools tools
step kube-proxy kube_proxy
step coredns coredns
step cni-conf cni_conf
log "--- down"
"${M}" down
trap - EXIT
rm -rf "${WORK}"

log "passed: ${passed[*]:-none}; failed: ${failed[*]:-none}"
[ "${#failed[@]}" -eq 0 ]
